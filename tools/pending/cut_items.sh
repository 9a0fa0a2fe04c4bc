#!/usr/bin/env bash
# Issue 13, one device call (~7 minutes warm): cut items (a persistent launch's costliest items in
# parts, merged through the arena: extend/sm90/cut_merge.cuh). Builds every head dim; the extend
# GPU tests of the cut variants and the two cut tests; memcheck and racecheck on the cut tests;
# then bench_extend: auto (the policy, cutting where its estimate gains) against nc (the same
# without cuts) and forced parts, on the cases of docs/extend_work_balance.md.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/mixed_attn_out}
mkdir -p "$OUT"
export MIXED_ATTN_CUDA_ARCHS=90a PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/python NINJA_JOBS=16
start=$(date +%s)
bash scripts/build_inplace.sh "-DMIXED_ATTN_HEAD_DIMS=${HEAD_DIMS:-64;128;256}" "-DCMAKE_CUDA_FLAGS=" "-DCMAKE_CXX_FLAGS=" \
  > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "build: $(( $(date +%s) - start )) s"
status=0
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  timeout 240 python3 -m pytest -q -x -p no:cacheprovider tests/test_cuda_extend.py -k "cut" > "$OUT/tests.log" 2>&1 || status=1
  tail -3 "$OUT/tests.log"; grep -E "^FAILED|Error" "$OUT/tests.log" | head -10
  timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 python3 -m pytest -q -x -p no:cacheprovider \
    tests/test_cuda_extend.py -k "cut_items or cuts_items" > "$OUT/memcheck.log" 2>&1 || status=1
  grep -E "ERROR SUMMARY|passed|failed" "$OUT/memcheck.log" | tail -2
  timeout 150 compute-sanitizer --tool racecheck python3 -m pytest -q -x -p no:cacheprovider \
    tests/test_cuda_extend.py -k "cuts_items" > "$OUT/racecheck.log" 2>&1 || status=1
  grep -E "RACECHECK SUMMARY|passed|failed" "$OUT/racecheck.log" | tail -2
  grep -E "Race reported between" "$OUT/racecheck.log" | sed 's/ at .*//' | sort | uniq -c | head
fi
timeout 200 python3 benchmarks/bench_extend.py --cases ${CASES:-B,D,B-d256,D-d256,B-d64,D-d64,P,P-512} \
  --kernels ${KERNELS:-auto,nc,c2,c3} 2>&1 | tee "$OUT/bench.log" | tail -40
exit $status
