#!/usr/bin/env bash
# Session 28, device call 1 (~8 minutes): the full build at HEAD, the two GPU tests never run
# (the overlapped step forced on / off; its sanitize case run plainly), then the planner's
# extend_leave_sms choice against leaving none, the hand rows around it and FlashInfer's rows
# (cases B-K), and G (head dim 256) without FlashInfer's rows (its modules are not carried).
# Here first: `bash tools/setup_peers.sh "64 128"`, `bash scripts/device_commit.sh`;
# carry [".peers", ".device_commit"].
set -uo pipefail
source "$(dirname "$0")/peers_env.sh"
start=$(date +%s)
bash scripts/build_inplace.sh > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "full build: $(( $(date +%s) - start )) s"
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_gpu_pdl.py \
  "tests/test_gpu_sanitize_subset.py::test_sanitize_overlapped_step" > "$OUT/tests_new.log" 2>&1
tail -4 "$OUT/tests_new.log"
timeout ${BENCH_TIMEOUT:-240} python3 benchmarks/bench_mixed.py --cases ${CASES:-B,D,E,F,K,A,C,H,I,J} \
  --rows ma_split,ma_split_leave0,ma_split_leave33,ma_split_leave44,ma_split_leave55,fi_split,fi_batchattn \
  --json "$OUT/leave_policy.json" --markdown "$OUT/leave_policy.md" > "$OUT/leave_policy.log" 2>&1
grep -A16 "=== summary" "$OUT/leave_policy.log" | cut -c1-300
timeout 90 python3 benchmarks/bench_mixed.py --cases G \
  --rows ma_split,ma_split_leave0,ma_split_leave33,ma_split_leave55 \
  --json "$OUT/leave_g.json" > "$OUT/leave_g.log" 2>&1
grep -A6 "=== summary" "$OUT/leave_g.log" | cut -c1-300
