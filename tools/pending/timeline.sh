#!/usr/bin/env bash
# Where an sm_90a extend item's fixed cost goes (session 9, not yet run): builds the head-dim-128
# kernels with the timeline stamps (csrc/cuda/extend/sm90/timeline.cuh) and prints the per-item
# phases of P, B, fold64 and P-512, persistent and one CTA per item (tools/sm90_timeline.py).
# Both tile shapes of head dim 128 (192 and 128 rows; session 20: the planner's estimate does not
# yet scale an item's fixed cost with its rows, which this measures). About 3 minutes warm.
# Rebuild without the flag afterwards for anything else.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/timeline}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/python TORCH_CUDA_ARCH_LIST=9.0a MIXED_ATTN_CUDA_ARCHS=90a MAX_JOBS=16
NINJA_JOBS=16 bash scripts/build_inplace.sh "-DMIXED_ATTN_HEAD_DIMS=128" "-DCMAKE_CUDA_FLAGS=-DMA_SM90_TIMELINE=1" \
  > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
timeout 200 python3 tools/sm90_timeline.py --cases ${CASES:-P,B,fold64,P-512} --persistent 1,0 \
  --rows ${ROWS:-192,128} --json "$OUT/timeline.json"
