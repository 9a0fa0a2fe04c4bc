#!/usr/bin/env bash
# Issue 13, two device calls (~6 and ~3.5 minutes warm): the bf16 extend's K/V ring depth at head
# dim 128. `STEP=time`: bf16_gap.sh's timings for the default ring (2 K + 2 V slots), cp.async
# only, cp.async with the slots handed over before the copies land (MA_LAB_KV_NO_WAIT from
# sm90_lab_leave_out.patch: what the copies cost beside the math when their latency is hidden),
# 3 K slots and 3 V slots. `STEP=check`: a full build (every head dim) with FLAGS and its
# correctness: the extend GPU tests, memcheck and racecheck on the extend sanitize tests. Logs
# under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/mixed_attn_out}; mkdir -p "$OUT"
FLAGS=${FLAGS:--DMA_SM90_D128_KST=3}
STEP=${STEP:-time}
[ "$STEP" = time ] && VARIANTS=${VARIANTS:-"none;-DMA_SM90_TMA=0;-DMA_SM90_TMA=0 -DMA_LAB_KV_NO_WAIT;-DMA_SM90_D128_KST=3;-DMA_SM90_D128_VST=3"} CASES=${CASES:-B,D,B-p1} \
  bash tools/pending/bf16_gap.sh
[ "$STEP" = time ] && exit 0
export MIXED_ATTN_CUDA_ARCHS=90a PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/python NINJA_JOBS=16
start=$(date +%s)
bash scripts/build_inplace.sh "-DCMAKE_CUDA_FLAGS=$FLAGS" "-DCMAKE_CXX_FLAGS=$FLAGS" -UMIXED_ATTN_HEAD_DIMS \
  > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "== full build with $FLAGS: $(( $(date +%s) - start )) s"
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_extend.py > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; tail -2 "$OUT/tests.log"
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 python3 -m pytest -q -x -p no:cacheprovider \
  tests/test_gpu_sanitize_subset.py -k "extend_schedule" > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|passed|failed" "$OUT/memcheck.log" | tail -2
timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 python3 -m pytest -q -x -p no:cacheprovider \
  tests/test_gpu_sanitize_subset.py -k "extend_schedule and 128" > "$OUT/racecheck.log" 2>&1
echo "racecheck rc=$?"; grep -E "RACECHECK SUMMARY|passed|failed" "$OUT/racecheck.log" | tail -2
