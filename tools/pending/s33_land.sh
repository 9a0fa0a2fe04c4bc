#!/usr/bin/env bash
# Session 33: decode_v_ldmatrix.patch + decode_whole_tiles.patch (both applied in the tree the call
# carries) before landing: the full build from an empty build folder (a warm machine's folder keeps
# the lab builds' cmake flags), the whole GPU suite, memcheck and racecheck over the decode's
# sanitize tests, the confined rate (H, F at 16 / 44 SMs) and bench_decode H / F / L / H-p1 with
# FlashInfer. ~7 minutes warm. Carry [".peers", ".device_commit"].
set -uo pipefail
source "$(dirname "$0")/peers_env.sh"
T0=$(date +%s)
rm -rf build
start=$(date +%s)
bash scripts/build_inplace.sh > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "build: $(( $(date +%s) - start )) s"
timeout 330 python3 -m pytest -q -p no:cacheprovider tests --ignore=tests/test_gpu_sources_compile.py \
  > "$OUT/tests.log" 2>&1; echo "tests rc=$? ($(( $(date +%s) - T0 )) s)"; tail -4 "$OUT/tests.log"
for tool in memcheck racecheck; do
  timeout 90 compute-sanitizer --tool $tool --error-exitcode 9 python3 -m pytest -q -x -p no:cacheprovider \
    tests -k "sanitize and (decode or verify)" > "$OUT/$tool.txt" 2>&1
  echo "$tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" "$OUT/$tool.txt" | tail -3
done
timeout 60 python3 benchmarks/bench_confined.py --decode-only --sms 16,44 --cases H,F --no-fi \
  > "$OUT/conf.txt" 2>&1; grep "ma_dec" "$OUT/conf.txt" || tail -5 "$OUT/conf.txt"
timeout 100 python3 benchmarks/bench_decode.py --cases H,F,L,H-p1 --policies sm2,fi > "$OUT/bench_decode.txt" 2>&1
grep -E "sm2 / fi_dec|sm2  " "$OUT/bench_decode.txt" | tail -8
echo "total $(( $(date +%s) - T0 )) s"
