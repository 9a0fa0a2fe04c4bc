#!/usr/bin/env bash
# Issue 15 / 14 on an H200 (the machine the issues' goals were set on; nothing since session 26
# ran on one): the lean decode (session 30) against FlashInfer's decode at page sizes 16 and 1,
# the deterministic policy beside the default, then the whole step A-K against FlashInfer's rows
# with the leave rows the leave model's refit needs (`python tools/leave_model.py <JSON>` here
# afterwards). ~8 minutes warm. Carry [".peers", ".device_commit"].
set -uo pipefail
source "$(dirname "$0")/peers_env.sh"
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || echo "NOT AN H200: rows are for the H100 tables"
# A warm machine keeps the last call's build, whose objects may be newer than this tree's copied
# sources (session 30's "before" run reused the patched objects): rebuild what differs.
touch csrc/cuda/decode/* csrc/cuda/arch/* csrc/torch/*
build_subset
timeout 150 python3 benchmarks/bench_decode.py --cases H,L,F,K,H-p1,L-p1,F-p1,K-p1 --policies sm2,det2048,fi \
  --json "$OUT/decode.json" > "$OUT/decode.txt" 2>&1
grep -E "sm2 / fi_dec|^[A-Z](-p1)? +(sm2|det2048|fi_dec) " "$OUT/decode.txt" | cut -c1-130
timeout 300 python3 benchmarks/bench_mixed.py --cases ${CASES:-B,D,E,F,K,A,C,H} \
  --rows ma_split,ma_split_leave0,ma_split_leave33,ma_split_leave44,ma_split_leave55,fi_split,fi_batchattn \
  --json "$OUT/step.json" > "$OUT/step.txt" 2>&1
grep -A11 "=== summary" "$OUT/step.txt" | cut -c1-300
