#!/usr/bin/env bash
# Nsight Compute profile of one extend launch per kernel (case B of bench_extend.py), on the GPU
# machine after scripts/build_inplace.sh. Usage: OUT=dir bash scripts/profile_extend.sh [CASE]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/mixed_attn_out}
CASE=${1:-B}
export PYTHONPATH="$PWD/python"
SECTIONS="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats"
for k in "auto extend_sm90_kernel" "mma extend_kernel"; do
  set -- $k
  timeout 150 ncu --target-processes all -k "regex:$2" -s 2 -c 1 $SECTIONS \
    python3 benchmarks/bench_extend.py --cases "$CASE" --kernels "$1" > "$OUT/ncu_$1.txt" 2>&1
  grep -E "Duration|Throughput|Issue Slots Busy|Eligible|Active Warps|Registers|L2 Hit|Mem Busy|Max Bandwidth|Stall" "$OUT/ncu_$1.txt" | head -40
done
