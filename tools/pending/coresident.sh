#!/usr/bin/env bash
# Issue 14 experiment (session 9, not yet run): can a decode CTA stream beside an extend CTA on
# the same SM? docs/overlap_design.md has the register / shared-memory budget. Builds a lab
# variant (the sm_90a extend at head dim 128 with two consumer warpgroups of 192 registers and
# 136 registers a thread at launch = 52 K a CTA, 165 KB of shared memory; the tensor-core decode
# with 2 warps and a 48 KB ring = 11-13 K registers), checks it computes right, then times the
# split step serial and with its halves on two streams (extend first), and the kernel timeline.
# One device call, about 5 minutes on a warm machine (the build is ~70 s). Usage on the GPU
# machine: bash tools/pending/coresident.sh   (carry .peers for FlashInfer's rows)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/coresident}
mkdir -p "$OUT"
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
# The budget rule itself, on spin kernels (tools/coresidency_probe.cu), before the real kernels.
if [ -z "${SKIP_PROBE:-}" ]; then
  nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -o /tmp/coresidency_probe tools/coresidency_probe.cu \
    && /tmp/coresidency_probe | tee "$OUT/probe.txt"
  el probe
fi
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/python TORCH_CUDA_ARCH_LIST=9.0a MIXED_ATTN_CUDA_ARCHS=90a MAX_JOBS=16
[ -d .peers/flashinfer ] && export PYTHONPATH=$PWD/.peers:$PYTHONPATH FLASHINFER_WORKSPACE_BASE=$HOME/fi_ws
# The planner cuts tiles for the consumer warpgroups: MA_SM90_D128_WGS goes to C++ and CUDA alike.
EXT="-DMA_SM90_D128_WGS=2 -DMA_SM90_D128_MAXNREG=136 -DMA_SM90_D128_PREGS2=24 -DMA_SM90_D128_CREGS2=192"
# The decode capped at 200 registers (5 CTAs of 64 threads an SM): 12.8 K registers beside the
# extend CTA's 52.2 K (uncapped it takes 187-241, which leaves no room on the SM).
DEC=${DEC:-"-DMA_DECODE_WARPS=2 -DMA_DECODE_RING_KB=48 -DMA_DECODE_MIN_CTAS_PER_SM=5"}
NINJA_JOBS=16 bash scripts/build_inplace.sh "-DMIXED_ATTN_HEAD_DIMS=128" "-DCMAKE_CXX_FLAGS=-DMA_SM90_D128_WGS=2" \
  "-DCMAKE_CUDA_FLAGS=$EXT $DEC" > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
el built
timeout 120 python3 -m pytest -q -x -p no:cacheprovider tests/test_cuda_extend.py tests/test_cuda_decode.py \
  -k "128 and not fp8" 2>&1 | tail -3
el tests
timeout 150 python3 benchmarks/bench_mixed.py --cases B,D,E,A --rows ma_split,ma_ext,ma_dec,ma_2s_ext1,ma_2s_dec1 \
  --no-plan --no-plot --json "$OUT/coresident.json" > "$OUT/coresident.log" 2>&1
grep -E "^[A-L] |ma_split |ma_ext |ma_dec |ma_2s" "$OUT/coresident.log" | head -40
el bench
# The same rows on the default kernels (head dim 128 only), same machine, for the comparison.
[ -n "${SKIP_DEFAULT:-}" ] && exit 0
NINJA_JOBS=16 bash scripts/build_inplace.sh "-DMIXED_ATTN_HEAD_DIMS=128" "-DCMAKE_CXX_FLAGS=" "-DCMAKE_CUDA_FLAGS=" \
  > "$OUT/build_default.log" 2>&1 || { tail -30 "$OUT/build_default.log"; exit 1; }
timeout 150 python3 benchmarks/bench_mixed.py --cases B,D,E,A --rows ma_split,ma_ext,ma_dec,ma_2s_ext1,ma_2s_dec1 \
  --no-plan --no-plot --json "$OUT/default.json" > "$OUT/default.log" 2>&1
grep -E "^[A-L] |ma_split |ma_ext |ma_dec |ma_2s" "$OUT/default.log" | head -40
el default
