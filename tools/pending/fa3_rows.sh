#!/usr/bin/env bash
# Issues 13 and 14, one device call (~6 minutes warm): FlashInfer's rows in the same process as
# ours, which session 18 could not take (its FA3 ratios use session 17's FA3 times). Here first:
# `bash tools/setup_peers.sh` (head dim 128's modules); the call carries [".peers"].
# bench_extend: B, D, B-p1, P, P-512 with cut items (auto), without (nc) and FA3;
# bench_mixed: the head-dim-128 cases, ours with and without PDL, the halves, and FlashInfer's split
# (FA3 prefill + tensor-core decode), extend half and BatchAttention rows.
set -uo pipefail
cd "$(dirname "$0")/../.."
[ -d .peers/flashinfer ] || { echo "run tools/setup_peers.sh here first and carry .peers"; exit 1; }
OUT=${OUT:-/tmp/mixed_attn_out}
mkdir -p "$OUT"
export MIXED_ATTN_CUDA_ARCHS=90a PYTHONUNBUFFERED=1 NINJA_JOBS=16 MAX_JOBS=16
export PYTHONPATH=$PWD/.peers:$PWD/python FLASHINFER_WORKSPACE_BASE=$HOME/fi_ws
# SKIP_BUILD=1: a default build is already in place on this machine (a warm call after gpu_check's).
if [ -z "${SKIP_BUILD:-}" ]; then
  start=$(date +%s)
  bash scripts/build_inplace.sh "-DMIXED_ATTN_HEAD_DIMS=128" "-DCMAKE_CUDA_FLAGS=" "-DCMAKE_CXX_FLAGS=" \
    > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
  echo "build: $(( $(date +%s) - start )) s"
fi
timeout 200 python3 benchmarks/bench_extend.py --cases ${EXT_CASES:-B,D,B-p1,P,P-512} --kernels auto,nc,fa3 \
  2>&1 | tee "$OUT/extend.log" | tail -22
timeout 300 python3 benchmarks/bench_mixed.py --cases ${CASES:-A,B,C,D,E,F,H,J,L} \
  --rows ${ROWS:-ma_split,ma_split_nopdl,ma_ext,fi_split,fi_ext,fi_batchattn} --markdown "$OUT/mixed.md" \
  > "$OUT/mixed.log" 2>&1
grep -A16 "=== summary" "$OUT/mixed.log" | head -18
# Page size 1 (sglang's default): issue 14 asks for page-1 B as well.
timeout 120 python3 benchmarks/bench_mixed.py --cases B --page-size 1 \
  --rows ma_split,ma_split_nopdl,ma_ext,fi_split,fi_ext,fi_batchattn --markdown "$OUT/mixed_p1.md" \
  > "$OUT/mixed_p1.log" 2>&1
grep -A6 "=== summary" "$OUT/mixed_p1.log" | head -8
