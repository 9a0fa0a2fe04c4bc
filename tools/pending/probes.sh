#!/usr/bin/env bash
# Session 12's two standalone GPU checks, not yet run, in one go (about 30 s on a warm machine,
# no build of the package needed): the bit-level e4m3 -> bf16 widening against the conversions
# (tools/check_e4m3_bf16_bits.cu: must print 0 mismatches before fp8_bf16_bit_widen.patch is
# applied), then what a small CTA streams beside a big one that is idle, FMA-, MMA- or
# shared-memory-busy (tools/coresident_stream_probe.cu; docs/overlap_design.md, "Session 12").
# Usage on the GPU machine: bash tools/pending/probes.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
export PATH=/usr/local/cuda/bin:$PATH
OUT=${OUT:-/tmp/probes}
mkdir -p "$OUT"
nvcc -std=c++17 -O3 -I csrc/include -I csrc -DMA_CUDA -gencode=arch=compute_90a,code=sm_90a \
  -o /tmp/check_e4m3 tools/check_e4m3_bf16_bits.cu && /tmp/check_e4m3 | tee "$OUT/check_e4m3.txt"
nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -o /tmp/stream_probe tools/coresident_stream_probe.cu \
  && timeout 60 /tmp/stream_probe | tee "$OUT/stream_probe.txt"
