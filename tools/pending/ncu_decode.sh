#!/usr/bin/env bash
# Issue 14 / 15, one device call (~3 minutes warm): Nsight Compute on one launch of our decode's
# stage 1 and of FlashInfer's tensor-core decode on bench_decode's case (CASE, default H). The
# confined probe (session 29) found ours streams ~42 GB/s an SM however few SMs it has, FlashInfer's
# 58-70 and a plain read 69-135: this says what holds ours (warps an SM, issue slots, stalls).
# Carry [".peers", ".device_commit"]. Writes <who>.txt (details page) and ours_sass.csv under $OUT.
set -uo pipefail
source "$(dirname "$0")/peers_env.sh"
CASE=${CASE:-H}
build_subset
SECTIONS="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
  --section Occupancy --section LaunchStats --section InstructionStats"
profile() {  # who kernel-regex [extra]
  start=$(date +%s)
  timeout 150 ncu --clock-control none --kernel-name "regex:$2" --launch-skip 2 --launch-count 1 $SECTIONS \
    ${3:-} -f -o "/tmp/$1" python3 tools/pending/one_decode.py "$1" "$CASE" > "$OUT/$1_ncu.log" 2>&1
  echo "== $1: rc=$? ($(( $(date +%s) - start )) s)"; tail -2 "$OUT/$1_ncu.log"
  ncu --import "/tmp/$1.ncu-rep" --page details > "$OUT/$1.txt" 2>&1
  grep -E " Name|Duration|Warp Cycles Per Issued|Issued Warp|Issue Slots Busy|No Eligible|Active Warps Per|Eligible Warps|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Size|Grid Size|Dynamic Shared|Executed Instructions  |Memory Throughput|DRAM Throughput|Compute \(SM\)|Block Limit" "$OUT/$1.txt" | head -40
}
profile ours "decode_split" "--section SourceCounters --import-source no"
ncu --import /tmp/ours.ncu-rep --page source --csv --print-source sass > "$OUT/ours_sass.csv" 2>/dev/null
python3 tools/ncu_stalls.py "$OUT/ours_sass.csv" --top 10
profile fi "BatchPrefill|BatchDecode"
exit 0
