#!/usr/bin/env bash
# Issue 15, one device call (~5 minutes warm): how many decode CTAs an SM, last chosen on
# 2026-11-30 (4 warps, 96 KB ring, 2 CTAs an SM) before the wave-filling splits and the narrow
# kernel. F (MQA, 128 rows @8k) is at 76-78% of the read-only floor with 256 CTAs of 2 MB each,
# one wave: each SM streams ~27 GB/s of the ~35 it needs. The wide kernel keeps 3 stages of
# 16 keys x its warps (96 KB at head dim 128), so smaller CTAs are narrow-kernel lab builds
# (MA_DECODE_NARROW_WARPS / _RING_KB; the narrow kernel serves <= 8 (query, head) pairs a CTA:
# F, H, L, G): 4 warps x 64 KB (3 an SM), 2 warps x 48 KB (4 an SM). Policies: the default plan,
# the narrow kernel planned for waves of 2, 3, 4 CTAs an SM. Not a patch: lab builds of main.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/mixed_attn_out}
mkdir -p "$OUT"
export MIXED_ATTN_CUDA_ARCHS=90a PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/python NINJA_JOBS=16
VARIANTS=${VARIANTS:-"none;-DMA_DECODE_NARROW_RING_KB=64;-DMA_DECODE_NARROW_WARPS=2 -DMA_DECODE_NARROW_RING_KB=48"}
IFS=';' read -ra list <<<"$VARIANTS"
for v in "${list[@]}"; do
  [ "$v" = none ] && v=""
  start=$(date +%s)
  bash scripts/build_inplace.sh "-DMIXED_ATTN_HEAD_DIMS=${HEAD_DIMS:-128;256}" "-DCMAKE_CUDA_FLAGS=$v" "-DCMAKE_CXX_FLAGS=" \
    > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
  echo "== build flags: ${v:-none} ($(( $(date +%s) - start )) s)"
  # The default build also times the deterministic and graph-safe plans (issue 15: within 3% of
  # the default policy).
  pol=sm2,narrow,narrow_sm3,narrow_sm4
  [ -z "$v" ] && pol=sm2,narrow,narrow_sm3,narrow_sm4,det2048,det4096,det8192,graph
  # The whole table into $OUT too (session 20 lost the first build's rows past the output window).
  timeout 200 python3 benchmarks/bench_decode.py --cases ${CASES:-F,H,L,G,F-p1} \
    --policies $pol 2>&1 | tee "$OUT/decode_${#v}.log" | grep -vE "^\s*$" | tail -44
done
