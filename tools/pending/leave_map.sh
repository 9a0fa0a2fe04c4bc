#!/usr/bin/env bash
# Session 27, one device call (~4 minutes warm; an H200 wanted). Here first:
# `bash tools/setup_peers.sh "64 128"`; the call carries [".peers", ".device_commit"].
# 1. The op's host time per call (tools/pending/host_time.py; on an H100 in session 27: the op
#    10-11 us, FlashInfer's run 16-17 us, the test harness 27 us before its stream context went).
# 2. bench_extend's P-512 / P / B / D against FA3 with the harness's ~15 us a call gone.
# 3. extend_leave_sms mapped on A / F / K, twice (an H100, one run: K 0.402 -> 0.391 ms at 44,
#    F 0.239 -> 0.233 at 66, A 0.740 -> 0.734 at 22-44, C flat): what a planner rule choosing N
#    from the two halves' estimates would have to reproduce.
set -uo pipefail
source "$(dirname "$0")/peers_env.sh"
build_subset
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_gpu_pdl.py 2>&1 | tail -2  # subset build: skips, not failures
timeout 100 python3 tools/pending/host_time.py > "$OUT/host_time.md" 2>&1
sed -n 2,14p "$OUT/host_time.md"
timeout 150 python3 benchmarks/bench_extend.py --cases P-512,P,B,D,B-d64 --kernels auto,fa3 \
  > "$OUT/bench_extend.log" 2>&1
tail -11 "$OUT/bench_extend.log"
for rep in 1 2; do
  timeout 150 python3 benchmarks/bench_mixed.py --cases ${CASES:-A,F,K} \
    --rows ma_split,ma_split_leave22,ma_split_leave33,ma_split_leave44,ma_split_leave55,ma_split_leave66,fi_batchattn \
    --json "$OUT/leave$rep.json" --markdown "$OUT/leave$rep.md" > "$OUT/leave$rep.log" 2>&1
  grep -A6 "=== summary" "$OUT/leave$rep.log" | cut -c1-330
done
