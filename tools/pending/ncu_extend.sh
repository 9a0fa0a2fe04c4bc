#!/usr/bin/env bash
# Issue 13, one device call (~5 minutes warm): Nsight Compute on one launch of the bf16 sm_90a
# extend kernel and of FlashInfer's FA3 prefill (when .peers is carried) on the same case
# (CASE, default B), for where the copies' 14-16% goes (RESULTS.md, sessions 12 and 15: leaving
# the K/V copies out takes B from 0.85 to 0.73 ms, a deeper ring buys nothing). Writes under $OUT:
# <who>.txt (details page: speed of light, warp states, scheduler, memory, occupancy) and
# ours_sass.csv (the source page: stall samples per SASS instruction).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/mixed_attn_out}; mkdir -p "$OUT"
CASE=${CASE:-B}
export MIXED_ATTN_CUDA_ARCHS=90a PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/python NINJA_JOBS=16
if [ -d .peers/flashinfer ]; then
  export PYTHONPATH="$PWD/.peers:$PYTHONPATH" FLASHINFER_WORKSPACE_BASE=$HOME/fi_ws MAX_JOBS=16
fi
start=$(date +%s)
bash scripts/build_inplace.sh -DMIXED_ATTN_HEAD_DIMS=128 ${FLAGS:+"-DCMAKE_CUDA_FLAGS=$FLAGS"} \
  ${FLAGS:+"-DCMAKE_CXX_FLAGS=$FLAGS"} > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "== build ($(( $(date +%s) - start )) s)"
cat > /tmp/one_case.py <<'PY'
import os, sys
sys.path.insert(0, os.path.join(os.getcwd(), "benchmarks"))
import torch
import bench_extend as be
kernel, name = sys.argv[1], sys.argv[2]
ext, prefix, hq, hkv, d, *page = be.CASES[name]
fn = be.case_fn(be.OpExtend(), ext, prefix, hq, hkv, d, page_size=page[0] if page else 16, kernel=kernel)
for _ in range(3):  # ncu profiles the third launch
    fn()
torch.cuda.synchronize()
PY
SECTIONS="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
  --section MemoryWorkloadAnalysis_Tables --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis"
profile() {  # who kernel regex
  start=$(date +%s)
  timeout 200 ncu --clock-control none --kernel-name "regex:$3" --launch-skip 2 --launch-count 1 $SECTIONS \
    ${4:-} -f -o "/tmp/$1" python3 /tmp/one_case.py "$2" "$CASE" > "$OUT/$1_ncu.log" 2>&1
  echo "== $1: rc=$? ($(( $(date +%s) - start )) s)"; tail -3 "$OUT/$1_ncu.log"
  ncu --import "/tmp/$1.ncu-rep" --page details > "$OUT/$1.txt" 2>&1
  grep -E "Duration|Warp Cycles Per Issued|Issued Warp|No Eligible|Stall|Achieved Occupancy|Registers Per|Shared Memory Config|L2 Hit|Mem Busy|Max Bandwidth|DRAM Throughput|Compute \(SM\)" "$OUT/$1.txt" | head -40
}
profile ours auto "extend_sm90_kernel" "--section SourceCounters --import-source no"
ncu --import /tmp/ours.ncu-rep --page source --csv --print-source sass > "$OUT/ours_sass.csv" 2>/dev/null
python3 tools/ncu_stalls.py "$OUT/ours_sass.csv" --top 8
[ -d .peers/flashinfer ] && profile fa3 fa3 "[Pp]refill|[Aa]ttention"
exit 0
