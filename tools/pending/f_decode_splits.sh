#!/usr/bin/env bash
# Session 35, issue 14's F (1.004x FI best on an H100; the step is its decode half alone + 19.5 us
# with 66 SMs left to the decode): the decode's 128 rows of 8k keys split 2 a row, 256 stage-1 CTAs
# of 4k keys, one wave, so while the extend holds 66 SMs half of them wait, and the step ends on
# the CTAs that started late. Finer splits (the SM-aware policy aiming at 4 / 8 CTAs an SM) give
# the decode's tail smaller pieces. bench_mixed F and E: the policy's step beside ctas_per_sm=4 / 8,
# the step leaving none, the decode half alone and FlashInfer's best rows. Uses the in-place build
# already there. ~1.5 minutes warm. Carry [".peers", ".device_commit"].
set -uo pipefail
source "$(dirname "$0")/peers_env.sh"
ls python/mixed_attn/_C*.so > /dev/null 2>&1 || build_subset
timeout 200 python3 benchmarks/bench_mixed.py --cases ${CASES:-F,E} \
  --rows ma_split,ma_split_cps4,ma_split_cps8,ma_split_leave0,ma_dec,fi_split,fi_batchattn \
  --json "$OUT/f_splits.json" > "$OUT/f_splits.txt" 2>&1
echo "bench_mixed rc=$?"
grep -A10 "=== summary" "$OUT/f_splits.txt" | cut -c1-260
