#!/usr/bin/env bash
# Issue 13, small extends, one device call (~5 minutes warm): do 128-row tiles (two consumer
# warpgroups with the S/PV overlap, -DMA_SM90_D128_WGS=2: a lab build, the planner cuts tiles for
# it) run the short extends faster than the default 192-row tiles? P-512's kernel takes 22.4 us
# against FA3's 13.0 (session 20): its longest item is a 192-row tile over 512 keys plus ~11 us
# of fixed cost. Both builds: bench_extend on the short cases and B / D (the long ones, where 192
# rows copy a third fewer bytes per FLOP), bench_mixed's extend halves of A, C, E, F, J; FA3's
# rows once. Carry [".peers"] for the FA3 rows (optional).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/mixed_attn_out}
mkdir -p "$OUT"
export MIXED_ATTN_CUDA_ARCHS=90a PYTHONUNBUFFERED=1 NINJA_JOBS=16 MAX_JOBS=16
export PYTHONPATH=$PWD/.peers:$PWD/python FLASHINFER_WORKSPACE_BASE=$HOME/fi_ws
fa3=",fa3"; fi_ext=",fi_ext"
[ -d .peers/flashinfer ] || { fa3=""; fi_ext=""; }
for v in "" "-DMA_SM90_D128_WGS=2"; do
  start=$(date +%s)
  bash scripts/build_inplace.sh "-DMIXED_ATTN_HEAD_DIMS=128" "-DCMAKE_CUDA_FLAGS=$v" "-DCMAKE_CXX_FLAGS=$v" \
    > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
  echo "== build flags: ${v:-none} ($(( $(date +%s) - start )) s)"
  timeout 150 python3 benchmarks/bench_extend.py --cases ${EXT_CASES:-P-512,P,B,D} --kernels auto,nc$fa3 \
    2>&1 | tail -$((1 + 4 * 3))
  timeout 150 python3 benchmarks/bench_mixed.py --cases ${CASES:-A,C,E,F,J} --rows ma_ext$fi_ext \
    > "$OUT/mixed${v:+_wgs2}.log" 2>&1
  grep -A8 "=== summary" "$OUT/mixed${v:+_wgs2}.log" | head -10
  fa3=""; fi_ext=""
done
