#!/usr/bin/env bash
# Session 36, issues 14 and 15: the data for a decode split model that knows the step. On an H100
# (benchmarks/RESULTS.md, session 36) E's decode alone reads 2.7% faster with 3-8 splits a row than
# with the wave rule's 24 (and its step 3.4% faster), while D's step is 4% faster with 4 splits a
# row than with 1 (one wave of 32k-key CTAs, two thirds of which wait for the extend's SMs) and
# B / F / K / L lose 3-4% to that. This times the decode alone over three batches of mixed lengths
# (E, E32, E256) and the equal-length ones (H, F, L) at every sm2_min* floor, and the steps B, D,
# E, F with the finer / coarser rows, on the in-place build (else the lab build). ~3 minutes warm.
# Carry [".peers", ".device_commit"]. A model to fit on it: the decode alone as its bytes plus a
# CTA's fixed cost, with the wave rule's longest-split tail only where the launch is a wave or two
# of equal CTAs; beside the extend, overlapped_step_us over the chunk candidates at the real slots.
set -uo pipefail
source "$(dirname "$0")/peers_env.sh"
T0=$(date +%s)
ls python/mixed_attn/_C*.so > /dev/null 2>&1 || build_subset
timeout 240 python3 benchmarks/bench_decode.py --cases E,E32,E256,H,F,L --phases \
  --policies sm2,sm2_min1024,sm2_min2048,sm2_min4096,sm2_min6144,fi > "$OUT/split_decode.txt" 2>&1
echo "bench_decode rc=$?"
grep -E "splits/row|kernels" "$OUT/split_decode.txt" | sed -E 's/ +/ /g' | cut -c1-170
timeout 200 python3 benchmarks/bench_mixed.py --cases ${STEP_CASES:-D,E,B,F} \
  --rows ma_split,ma_split_cps4,ma_split_cps8,ma_split_cps16,ma_split_min2048,ma_split_min4096,fi_split,fi_batchattn \
  --json "$OUT/split_step.json" > "$OUT/split_step.txt" 2>&1
echo "bench_mixed rc=$?"; grep -A8 "=== summary" "$OUT/split_step.txt" | cut -c1-300
echo "total $(( $(date +%s) - T0 )) s"
