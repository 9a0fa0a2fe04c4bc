#!/usr/bin/env bash
# Session 28, device call 2 (~6 minutes warm): the per-SM streaming rate with every SM but N held
# (confined_stream.py: a streaming read, our decode, FlashInfer's), page-1 B and D with the
# planner's extend_leave_sms against leaving none and FlashInfer, and serve_replay's split
# (overlapped) against split_leave0 and fold. Carry [".peers", ".device_commit"].
set -uo pipefail
source "$(dirname "$0")/peers_env.sh"
# Deterministic plans leave SMs too (deterministic_leave.patch, not landed until this passes): the
# leave tests (its deterministic bit-equality case) and the batch-invariance tests.
git apply tools/pending/deterministic_leave.patch 2>/dev/null || patch -p1 < tools/pending/deterministic_leave.patch
build_subset
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_gpu_pdl.py tests/test_cuda_decode.py \
  tests/test_cuda_extend.py tests/test_verify_rows.py tests/test_cuda_decode_narrow.py -k "leaves_sms_in or determin" \
  > "$OUT/tests_det.log" 2>&1; tail -3 "$OUT/tests_det.log"
timeout 200 python3 tools/pending/confined_stream.py --sms ${SMS:-16,33,44,66,132} --cases ${DCASES:-L,F,H} \
  > "$OUT/confined.log" 2>&1; tail -40 "$OUT/confined.log"
timeout 120 python3 benchmarks/bench_mixed.py --cases B,D --page-size 1 \
  --rows ma_split,ma_split_leave0,ma_split_leave33,ma_split_leave44,fi_split,fi_batchattn \
  --json "$OUT/leave_p1.json" > "$OUT/leave_p1.log" 2>&1
grep -A4 "=== summary" "$OUT/leave_p1.log" | cut -c1-330
timeout 120 python3 benchmarks/serve_replay.py --modes split,split_leave0,fold --time-budget-s 80 \
  --json "$OUT/replay.json" --markdown "$OUT/replay.md" > "$OUT/replay.log" 2>&1
tail -22 "$OUT/replay.log" | cut -c1-250
