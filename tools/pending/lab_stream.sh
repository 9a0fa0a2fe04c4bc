#!/usr/bin/env bash
# Issue 14, one device call (~4 minutes warm): can an extend CTA stream a decode half's bytes from
# HBM beside its own K/V copies without slowing (csrc/cuda/extend/sm90/lab_stream.cuh,
# tools/lab_stream_probe.py)? The default build's B / D first (the lab build's producer spills
# more: its copies = 0 row must match them), then the lab build's rows at 0..6 copies per tile.
# NONBLOCK=1 [SLOTS=4 KB=8]: session 20's variant (see lab_stream.cuh), about 4 minutes too.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/mixed_attn_out}
mkdir -p "$OUT"
export MIXED_ATTN_CUDA_ARCHS=90a PYTHONUNBUFFERED=1 NINJA_JOBS=16 PYTHONPATH=$PWD/python
build() {
  local start=$(date +%s)
  bash scripts/build_inplace.sh "-DMIXED_ATTN_HEAD_DIMS=128" "-DCMAKE_CUDA_FLAGS=$1" "-DCMAKE_CXX_FLAGS=$1" \
    > "$OUT/build$2.log" 2>&1 || { tail -30 "$OUT/build$2.log"; exit 1; }
  echo "build$2: $(( $(date +%s) - start )) s"
}
build "" _default
timeout 120 python3 benchmarks/bench_extend.py --cases B,D --kernels auto 2>&1 | tail -3
if [ -z "${NONBLOCK:-}" ]; then
  build "-DMA_SM90_LAB_STREAM=1" _lab
  timeout 300 python3 tools/lab_stream_probe.py --cases ${CASES:-B,D} --copies ${COPIES:-0,1,2,3,4,6} 2>&1 \
    | tee "$OUT/lab_stream.log"
else
  # Session 20's variant (NONBLOCK=1): the producer never waits on its own stream; a ring of
  # SLOTS x KB (default 4 x 8 KB); the bytes streamed are the kernel's own count.
  build "-DMA_SM90_LAB_STREAM=1 -DMA_SM90_LAB_STREAM_SLOTS=${SLOTS:-4} -DMA_SM90_LAB_STREAM_KB=${KB:-8}" _lab
  timeout 300 python3 tools/lab_stream_probe.py --nonblock --kb ${KB:-8} --cases ${CASES:-B,D} \
    --copies ${COPIES:-0,1,2,4,8,16} 2>&1 | tee "$OUT/lab_stream_nonblock.log"
fi
