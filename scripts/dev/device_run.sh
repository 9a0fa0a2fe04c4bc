#!/usr/bin/env bash
# One device call: load (or build) the shim, tests, micro-benchmark, memcheck.
# Usage on the device machine: bash scripts/dev/device_run.sh [pytest -k expr]
set -o pipefail
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$OUT/smi.txt" 2>&1
if ! python3 -c "import ctypes; ctypes.CDLL('build/libdecode_shim.so')" 2>/dev/null; then
  echo "prebuilt shim unusable here: building"; rm -f build/libdecode_shim.so
  python3 -c "import sys; sys.path.insert(0,'scripts/dev'); import decode_driver as d; d.build('build/libdecode_shim.so')" 2>&1 | tee "$OUT/build.log" || exit 1
fi
export MA_REQUIRE_CUDA_DECODE=1
timeout ${TEST_TIMEOUT:-150} python3 -m pytest -q --maxfail=30 tests/test_cuda_decode.py ${1:+-k "$1"} 2>&1 | tee "$OUT/tests.log" | tail -40
timeout ${BENCH_TIMEOUT:-100} python3 benchmarks/bench_decode.py 2>&1 | tee "$OUT/bench.log"
for v in $VARIANTS; do
  echo "== variant $v"
  MA_DECODE_SHIM=build/$v.so timeout 60 python3 benchmarks/bench_decode.py --policies sm2,sm4bal,det2048 2>&1 | tee "$OUT/bench_$v.log"
done
if [ -n "$PORTABLE" ]; then
  MIXED_ATTN_DECODE_PORTABLE=1 timeout 40 python3 -m pytest -q tests/test_cuda_decode.py -k "test_dtypes or test_windows_cap_sinks" 2>&1 | tee "$OUT/portable.log" | tail -5
fi
if [ -n "$SANITIZE" ]; then
  timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 python3 scripts/dev/sanitize_decode.py > "$OUT/memcheck.log" 2>&1
  echo "memcheck rc=$?"; tail -5 "$OUT/memcheck.log"
fi
