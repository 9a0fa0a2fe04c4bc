#!/usr/bin/env bash
# Session 27, one device call (~3 minutes warm): the planner's extend_leave_sms choice (plan.cc,
# step 3f) on the GPU. Here first: `bash tools/setup_peers.sh "64 128"`; carry [".peers", ".device_commit"].
# 1. tests/test_gpu_pdl.py (the policy's plan against the fp64 reference and bit for bit against
#    the plan that leaves none; the fixed N's bit-equality test).
# 2. bench_mixed: ma_split (the policy's N) against ma_split_leave0 (none: the planner before) and
#    FlashInfer's rows, same process.
set -uo pipefail
source "$(dirname "$0")/peers_env.sh"
build_subset
timeout 90 python3 -m pytest -q -p no:cacheprovider tests/test_gpu_pdl.py 2>&1 | tail -3
timeout ${BENCH_TIMEOUT:-150} python3 benchmarks/bench_mixed.py --cases ${CASES:-B,D,E,F,K,A,C,H,I,J} \
  --rows ma_split,ma_split_leave0,fi_split,fi_batchattn --json "$OUT/leave_policy.json" \
  --markdown "$OUT/leave_policy.md" > "$OUT/leave_policy.log" 2>&1
grep -A14 "=== summary" "$OUT/leave_policy.log" | cut -c1-300
