#!/usr/bin/env bash
# Builds the extension in build/ and copies it next to the Python package, so
# `PYTHONPATH=python python -c "import mixed_attn"` works without installing.
# PYTHON picks the interpreter (default python3); extra args go to cmake. Every variant is built
# unless the args say otherwise: MIXED_ATTN_HEAD_DIMS / MIXED_ATTN_FP8 are cache variables, so a
# subset asked for once would otherwise stay in build/ for every later build (session 27: the GPU
# suite then failed 544 tests for kernels the build had left out).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
prefix=$("$PY" -c 'import torch; print(torch.utils.cmake_prefix_path)')
cmake -S . -B build -G Ninja -DPython3_EXECUTABLE="$(command -v "$PY")" \
  -DCMAKE_PREFIX_PATH="$prefix" "-DMIXED_ATTN_HEAD_DIMS=64;128;256" -DMIXED_ATTN_FP8=ON "$@" >build.log 2>&1 || { cat build.log; exit 1; }
ninja -C build ${NINJA_JOBS:+-j$NINJA_JOBS} >>build.log 2>&1 || { tail -n 80 build.log; exit 1; }
cp build/_C*.so python/mixed_attn/
# The optional plan() fast path (CMakeLists.txt: built when Python's headers are there); a stale
# copy from an earlier build must not outlive a build without it.
rm -f python/mixed_attn/_fastplan*.so
if ls build/_fastplan*.so >/dev/null 2>&1; then cp build/_fastplan*.so python/mixed_attn/; fi
echo "built $(ls python/mixed_attn/_C*.so)"
