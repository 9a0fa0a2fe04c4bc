#!/usr/bin/env bash
# One device call (about 8 minutes warm) that validates tools/pending/sm90_fp8_in_place.patch:
# applies it, builds for sm_90a, runs every fp8 test of the GPU suite, memcheck and racecheck on
# the sanitize subset, and times the fp8 extend cases against the merged (staging) numbers of
# benchmarks/RESULTS.md, session 10. Then the whole GPU suite when time is left (FULL=1).
# Usage: here, `git apply tools/pending/sm90_fp8_in_place.patch && bash scripts/device_commit.sh`;
# on the GPU machine (carry .device_commit): bash tools/pending/validate_fp8_in_place.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/fp8_in_place}
mkdir -p "$OUT"
# .git does not travel: apply the patch in the checkout before the call.
grep -q fp8_park_off csrc/cuda/extend/sm90/traits.cuh || {
  echo "apply it first: git apply tools/pending/sm90_fp8_in_place.patch && bash scripts/device_commit.sh"; exit 1; }
export EXTEND_BENCH_ARGS="--cases B,D,B-d64,B-p1,B-d256 --fp8 --kernels auto,mma"
OUT=$OUT bash scripts/gpu_check.sh build || exit 1
export PYTHONPATH=$PWD/python
# The extend tests whole (their fp8 parameter shows as True / False in the ids, which -k fp8
# does not select), then every test whose name says fp8.
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_extend.py > "$OUT/tests_extend.log" 2>&1
tail -3 "$OUT/tests_extend.log"
timeout 200 python3 -m pytest -q -p no:cacheprovider tests -k fp8 --ignore=tests/test_gpu_sources_compile.py \
  > "$OUT/tests_fp8.log" 2>&1
tail -3 "$OUT/tests_fp8.log"
OUT=$OUT bash scripts/gpu_check.sh sanitize,racecheck,extend_bench
if [ -n "${FULL:-}" ]; then
  PYTEST_ARGS="--ignore=tests/test_gpu_sources_compile.py" TEST_TIMEOUT=300 OUT=$OUT/full bash scripts/gpu_check.sh tests
fi
