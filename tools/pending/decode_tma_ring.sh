#!/usr/bin/env bash
# The decode's K/V ring filled by the TMA engine (decode_tma_ring.patch, on top of
# decode_v_ldmatrix.patch, with its lab flag MA_DECODE_TMA set to 1 here) against main: the
# confined per-SM rate (H, F at 16 / 44 / 132 SMs: main ~50-52 GB/s an SM on an H100, FlashInfer's
# cp.async decode 63-70, bulk copies 160), the decode tests on the TMA build (every 16-bit case of
# a page size that is a multiple of 16 takes the new ring), bench_decode H / F / L with FlashInfer, then memcheck and racecheck over the
# sanitize subset while time is left (GUARD seconds, default 420). ~7 minutes warm.
# SKIP_MAIN=1 when main's rate was measured on this machine already (s31_decode.sh).
# Carry [".peers", ".device_commit"].
set -uo pipefail
source "$(dirname "$0")/peers_env.sh"
T0=$(date +%s)
SMS=${SMS:-16,44,132}
conf() {  # tag
  timeout 100 python3 benchmarks/bench_confined.py --decode-only --sms $SMS --cases H,F --no-fi \
    > "$OUT/conf_$1.txt" 2>&1; grep "ma_dec" "$OUT/conf_$1.txt" || tail -5 "$OUT/conf_$1.txt"
}
touch csrc/cuda/decode/* csrc/cuda/arch/* csrc/cuda/extend/sm90/* csrc/torch/*
if [ "${SKIP_MAIN:-0}" = 0 ]; then build_subset; echo "== main"; conf main; fi
git apply tools/pending/decode_v_ldmatrix.patch && git apply tools/pending/decode_tma_ring.patch \
  || { echo "the patches do not apply"; exit 1; }
sed -i 's/^#define MA_DECODE_TMA 0$/#define MA_DECODE_TMA 1/' csrc/cuda/decode/tc_common.cuh
grep -q '^#define MA_DECODE_TMA 1$' csrc/cuda/decode/tc_common.cuh || { echo "the flag is not set"; exit 1; }
build_subset
# A hang (an mbarrier phase never completing) shows as the timeout.
timeout 150 python3 -m pytest -q -x -p no:cacheprovider tests/test_cuda_decode.py tests/test_verify_rows.py \
  tests/test_cuda_decode_narrow.py > "$OUT/tests_tma.txt" 2>&1; echo "tests rc=$?"; tail -3 "$OUT/tests_tma.txt"
echo "== tma"; conf tma
# The whole-GPU decode against FlashInfer's on the TMA build (page size 16: the new ring; -p1: the
# plain ring, as a check that nothing else moved).
timeout 100 python3 benchmarks/bench_decode.py --cases H,F,L,H-p1 --policies sm2,fi > "$OUT/bench_decode_tma.txt" 2>&1
grep -v "kernels:" "$OUT/bench_decode_tma.txt" | tail -14
for tool in memcheck racecheck; do
  [ $(( $(date +%s) - T0 )) -gt ${GUARD:-420} ] && { echo "skip $tool (time)"; continue; }
  timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 python3 -m pytest -q -x -p no:cacheprovider \
    tests/test_gpu_sanitize_subset.py tests/test_cuda_decode.py -k "sanitize" > "$OUT/$tool.txt" 2>&1
  echo "$tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" "$OUT/$tool.txt" | tail -3
done
echo "total $(( $(date +%s) - T0 )) s"
