#!/usr/bin/env bash
# Dump sm_90a PTX and the ptxas register/spill report for every .cu under csrc/cuda/ of a tree.
#   tools/ptx_dump.sh SRC_ROOT OUT_DIR [STEM]       (SRC_ROOT: a checkout; e.g. `git worktree` or `git archive` of a commit)
# Compiles one file at a time (the build machines are shared). Compare two dumps with tools/ptx_compare.py.
set -euo pipefail
src=$(cd "$1" && pwd); out=$2; mkdir -p "$out"; out=$(cd "$out" && pwd)
nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
for f in "$src"/csrc/cuda/${3:-*}.cu "$src"/csrc/cuda/*/${3:-*}.cu; do  # optional 3rd argument: one file stem (e.g. instantiate_hd128)
  [ -f "$f" ] || continue
  b=$(realpath --relative-to="$src/csrc/cuda" "$f" | sed 's#/#_#g; s#\.cu$##'); k="$out/keep_$b"; rm -rf "$k"; mkdir -p "$k"
  "$nvcc" -std=c++17 -O3 --expt-relaxed-constexpr -I "$src/csrc/include" -I "$src/csrc" \
    -gencode=arch=compute_90a,code=sm_90a -Xptxas -v --keep --keep-dir "$k" \
    -c "$f" -o "$k/$b.o" 2> "$out/$b.ptxas.txt"
  cp "$k"/*.ptx "$out/$b.ptx"
  # (no cuobjdump in this toolkit: PTX and the ptxas report only)
  rm -rf "$k"
  echo "$b done"
done
