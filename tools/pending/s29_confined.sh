#!/usr/bin/env bash
# Session 29, device call 2 (~5 minutes warm, ~9 on an H200): confined_stream.py (fixed: every
# kernel launched beside the holder is launched once before, since a lazily loaded first launch
# waits for the holder). Carry [".peers", ".device_commit"].
set -uo pipefail
source "$(dirname "$0")/peers_env.sh"
build_subset
timeout 300 python3 benchmarks/bench_confined.py --sms ${SMS:-16,33,44,66,132} --cases ${DCASES:-L,F,H} \
  > "$OUT/confined.txt" 2>&1; tail -60 "$OUT/confined.txt"
# Issue 14's TTFT question: is split's TTFT p95 above fold's on poisson (+7% in call 1, session 28's
# +25%) the same on other draws of the trace? Four seeds, burst and poisson, split and fold.
for seed in 1 2 3 4; do
  timeout 60 python3 benchmarks/serve_replay.py --traces burst,poisson --modes split,fold --seed $seed \
    --json "$OUT/replay_s$seed.json" > "$OUT/replay_s$seed.txt" 2>&1
  echo "seed $seed"; grep -A4 "^split relative to fold" "$OUT/replay_s$seed.txt" | tail -2
done
# On an H200 only (the leave model's refit; the H100's rows are session 28's): the policy's
# extend_leave_sms against its neighbours and FlashInfer, cases B, D, E, F, K.
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  timeout 240 python3 benchmarks/bench_mixed.py --cases ${CASES:-B,D,E,F,K} \
    --rows ma_split,ma_split_leave0,ma_split_leave33,ma_split_leave44,ma_split_leave55,fi_split,fi_batchattn \
    --json "$OUT/leave_h200.json" > "$OUT/leave_h200.txt" 2>&1
  grep -A9 "=== summary" "$OUT/leave_h200.txt" | cut -c1-300
fi
