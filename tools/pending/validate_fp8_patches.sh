#!/usr/bin/env bash
# Issue 13, one device call (~8 minutes warm): validates sm90_fp8_hd256.patch and
# portable_fp8_batched_widen.patch (apply both here first). Full build (every head dim, sm_90a),
# the extend GPU tests, memcheck and racecheck on the extend sanitize tests, then the fp8 rows of
# bench_extend on both kernels. Logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/mixed_attn_out}; mkdir -p "$OUT"
export MIXED_ATTN_CUDA_ARCHS=90a PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/python NINJA_JOBS=16
start=$(date +%s)
bash scripts/build_inplace.sh "-DCMAKE_CUDA_FLAGS=" "-DCMAKE_CXX_FLAGS=" -UMIXED_ATTN_HEAD_DIMS \
  > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "build $(( $(date +%s) - start )) s"
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_extend.py tests/test_verify_rows.py \
  > "$OUT/tests.log" 2>&1; echo "tests rc=$?"; tail -3 "$OUT/tests.log"
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 python3 -m pytest -q -x -p no:cacheprovider \
  tests/test_gpu_sanitize_subset.py -k "extend_schedule" > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|passed|failed" "$OUT/memcheck.log" | tail -3
timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 python3 -m pytest -q -x -p no:cacheprovider \
  tests/test_gpu_sanitize_subset.py -k "extend_schedule and fp8" > "$OUT/racecheck.log" 2>&1
echo "racecheck rc=$?"; grep -E "RACECHECK SUMMARY|ERROR SUMMARY|passed|failed" "$OUT/racecheck.log" | tail -3
timeout 120 python3 benchmarks/bench_extend.py --cases B,D,B-d256,D-d256 --fp8 --kernels auto,mma 2>&1 | tail -20
