#!/usr/bin/env bash
# Builds the extension in build/ and copies it next to the Python package, so
# `PYTHONPATH=python python -c "import mixed_attn"` works without installing.
# PYTHON picks the interpreter (default python3); extra args go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
prefix=$("$PY" -c 'import torch; print(torch.utils.cmake_prefix_path)')
cmake -S . -B build -G Ninja -DPython3_EXECUTABLE="$(command -v "$PY")" \
  -DCMAKE_PREFIX_PATH="$prefix" "$@" >build.log 2>&1 || { cat build.log; exit 1; }
ninja -C build ${NINJA_JOBS:+-j$NINJA_JOBS} >>build.log 2>&1 || { tail -n 80 build.log; exit 1; }
cp build/_C*.so python/mixed_attn/
# The optional plan() fast path (CMakeLists.txt: built when Python's headers are there); a stale
# copy from an earlier build must not outlive a build without it.
rm -f python/mixed_attn/_fastplan*.so
if ls build/_fastplan*.so >/dev/null 2>&1; then cp build/_fastplan*.so python/mixed_attn/; fi
echo "built $(ls python/mixed_attn/_C*.so)"
