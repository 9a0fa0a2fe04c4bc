#!/usr/bin/env bash
# Issue 14, session 12: the narrow decode (2 warps, a 48 KB ring, 104 registers) beside the lab
# extend of session 11 (2 consumer warpgroups, 136 registers a thread at launch, setmaxnreg
# 24 / 192): 3 x 136 + 104 = 512, the co-residency rule. Builds that (head dim 128 only), runs the
# narrow tests on it, times B, D, E, A serial and on two streams next to FlashInfer's serial step,
# then traces when each half runs (tools/trace_two_streams.py). About 3 minutes warm.
# Usage on the GPU machine: bash tools/pending/coresident_narrow.sh   (carry .peers)
# Afterwards rebuild with the default flags (scripts/build_inplace.sh "-DMIXED_ATTN_HEAD_DIMS=64;128;256"
# "-DCMAKE_CXX_FLAGS=" "-DCMAKE_CUDA_FLAGS="), with MIXED_ATTN_CUDA_ARCHS=90a, or the build takes
# every arch (~8 minutes).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/coresident_narrow}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/python TORCH_CUDA_ARCH_LIST=9.0a MIXED_ATTN_CUDA_ARCHS=90a MAX_JOBS=16
[ -d .peers/flashinfer ] && export PYTHONPATH=$PWD/.peers:$PYTHONPATH FLASHINFER_WORKSPACE_BASE=$HOME/fi_ws
EXT="-DMA_SM90_D128_WGS=2 -DMA_SM90_D128_MAXNREG=${EXTR:-136} -DMA_SM90_D128_PREGS2=24 -DMA_SM90_D128_CREGS2=192"
DEC=${DEC:-"-DMA_DECODE_NARROW_WARPS=2 -DMA_DECODE_NARROW_RING_KB=48 -DMA_DECODE_NARROW_MAXNREG=104"}
NINJA_JOBS=16 bash scripts/build_inplace.sh "-DMIXED_ATTN_HEAD_DIMS=128" "-DCMAKE_CXX_FLAGS=-DMA_SM90_D128_WGS=2" \
  "-DCMAKE_CUDA_FLAGS=$EXT $DEC" > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
el built
timeout 90 python3 -m pytest -q -x -p no:cacheprovider tests/test_cuda_decode_narrow.py -k "128 and not fp8" 2>&1 | tail -2
el tests
export MIXED_ATTN_DECODE_KERNEL=tensor_core_narrow
if [ -z "${SKIP_BENCH:-}" ]; then
  timeout 200 python3 benchmarks/bench_mixed.py --cases B,D,E,A --rows ma_split,ma_ext,ma_dec,ma_2s_ext1,fi_split \
    --no-plan --no-plot --json "$OUT/coresident.json" > "$OUT/coresident.log" 2>&1
  grep -E "^[A-L] |ma_split |ma_ext |ma_dec |ma_2s|fi_split " "$OUT/coresident.log" | head -40
  el bench
fi
timeout 100 python3 tools/trace_two_streams.py B,E,D 2>&1 | tail -8
el trace
