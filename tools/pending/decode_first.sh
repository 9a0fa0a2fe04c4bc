#!/usr/bin/env bash
# Session 33, issue 14's A and C (a small extend beside a large decode: 1.007-1.010x / 1.00x
# FlashInfer's BatchAttention on an H100): decode_first.patch, lab flag MA_LAB_DECODE_FIRST. The
# extend runs first today and its CTAs hold nearly every SM for its ~20 us while the decode waits;
# the decode's last wave then leaves SMs idle (A: 1024 stage-1 CTAs in 264 slots, 3.9 waves). The
# lab build launches the decode's stage 1 first and the extend as its programmatic dependent,
# which takes the SMs the decode's last wave leaves, where the plan has no merge and is not
# graph-safe; MA_DECODE_FIRST=1 in the environment turns it on per call. One build, then:
# bench_mixed with it off (FlashInfer's rows beside) and on (A, C, H; B, D, K where the extend is
# large: expected slower; E, F split their rows: unchanged, the control), the whole-step and PDL
# tests with it on, memcheck and racecheck over the sanitize subset with it on. ~6 minutes warm.
# Predicted: A and C within 0.5% of the decode half alone (H), i.e. ~0.98-0.99x FI best.
# Carry [".peers", ".device_commit"].
set -uo pipefail
source "$(dirname "$0")/peers_env.sh"
T0=$(date +%s)
git apply tools/pending/decode_first.patch || { echo "the patch does not apply"; exit 1; }
touch csrc/torch/* csrc/cuda/extend/sm90/*
start=$(date +%s)
bash scripts/build_inplace.sh "-DMIXED_ATTN_HEAD_DIMS=64;128" -DMIXED_ATTN_FP8=OFF "-DCMAKE_CUDA_FLAGS=-DMA_LAB_DECODE_FIRST=1" \
  "-DCMAKE_CXX_FLAGS=-DMA_LAB_DECODE_FIRST=1" > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "build: $(( $(date +%s) - start )) s"
CASES=${CASES:-A,C,H,B,D,K,E,F}
for on in 0 1; do
  rows=ma_split; [ $on = 0 ] && rows=ma_split,ma_dec,fi_split,fi_batchattn
  MA_DECODE_FIRST=$on timeout 200 python3 benchmarks/bench_mixed.py --no-plan --no-plot --cases $CASES --rows $rows \
    --json "$OUT/mixed_df$on.json" > "$OUT/mixed_df$on.txt" 2>&1
  echo "== MA_DECODE_FIRST=$on (rc=$?)"; grep -A12 "^=== summary" "$OUT/mixed_df$on.txt" | cut -c1-150 | tail -10
done
MA_DECODE_FIRST=1 timeout 200 python3 -m pytest -q -x -p no:cacheprovider tests/test_gpu_wrapper.py tests/test_gpu_pdl.py \
  tests/test_cuda_decode.py > "$OUT/tests_df.txt" 2>&1; echo "tests (decode first) rc=$?"; tail -2 "$OUT/tests_df.txt"
for tool in memcheck racecheck; do
  [ $(( $(date +%s) - T0 )) -gt ${GUARD:-450} ] && { echo "skip $tool (time)"; continue; }
  MA_DECODE_FIRST=1 timeout 90 compute-sanitizer --tool $tool --error-exitcode 9 python3 -m pytest -q -x \
    -p no:cacheprovider tests -k "sanitize" > "$OUT/$tool.txt" 2>&1
  echo "$tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" "$OUT/$tool.txt" | tail -3
done
echo "total $(( $(date +%s) - T0 )) s"
