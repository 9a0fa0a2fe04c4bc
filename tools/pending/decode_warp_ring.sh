#!/usr/bin/env bash
# Session 35, issues 14 and 15: decode_warp_ring.patch. In the tensor-core decode (one MMA block a
# CTA) and the narrow one, each warp reads only its own 16 keys of every tile, yet the CTA's
# threads copied each tile together and handed it over with a __syncthreads (20% of the stall
# samples on case H, session 29). With the patch each warp copies its own keys and waits on them
# with cp.async.wait_group + __syncwarp: no block barrier in the loop, the warps run apart. ptxas
# (sm_90a): registers equal or fewer (173 -> 171, narrow 166 -> 162), no new spills.
# Predicted: the confined per-SM rate (H, F at 16 / 44 SMs; ~53 / 49 GB/s on an H100) up by
# 5-15%, the whole GPU unchanged at the HBM rate (132 SMs), the overlapped steps (B, E, F) faster
# by the decode's share beside the extend.
#   PHASE=main: main's rows on the in-place build already there (a full build of main in the
#   same call first, e.g. scripts/gpu_check.sh build); PHASE=patch: apply, full build, the same
#   rows, the decode / verify / narrow / graph tests, memcheck and racecheck over the decode's
#   sanitize cases. ~4 and ~8 minutes warm. Carry [".peers", ".device_commit"].
#   PHASE=quick (one call on a fresh machine, ~8 minutes): the lab build (head dims 64/128, no
#   fp8) of main, its confined and decode rows, then the patch's, the decode tests on that build
#   and memcheck / racecheck over the decode's sanitize cases (no whole steps: bench_mixed's
#   cases want the full build).
# Land it if the tests and both sanitizers pass and the confined rate or the steps gain.
set -uo pipefail
source "$(dirname "$0")/peers_env.sh"
T0=$(date +%s)
PHASE=${PHASE:-main}
quick_rows() {  # tag: the confined per-SM rate and the decode against FlashInfer's
  timeout 100 python3 benchmarks/bench_confined.py --decode-only --sms 16,44,132 --cases H,F --no-fi \
    > "$OUT/conf_$1.txt" 2>&1; echo "== $1 confined (rc=$?)"; grep "ma_dec" "$OUT/conf_$1.txt" | sed -E 's/ +/ /g'
  timeout 120 python3 benchmarks/bench_decode.py --cases ${DECODE_CASES:-H,F} --policies sm2,fi > "$OUT/dec_$1.txt" 2>&1
  echo "== $1 decode (rc=$?)"; grep -E "^[A-Z] +(sm2|fi_dec) |sm2 / fi_dec" "$OUT/dec_$1.txt" | sed -E 's/ +/ /g' | cut -c1-150
}
rows() {  # tag: those, with E and K, and the whole steps
  DECODE_CASES=H,F,E,K quick_rows "$1"
  timeout 150 python3 benchmarks/bench_mixed.py --cases ${STEP_CASES:-B,E,F} --rows ma_split,ma_dec,fi_split,fi_batchattn \
    --json "$OUT/step_$1.json" > "$OUT/step_$1.txt" 2>&1
  echo "== $1 step (rc=$?)"; grep -A6 "=== summary" "$OUT/step_$1.txt" | cut -c1-260
}
if [ "$PHASE" = quick ]; then
  rm -rf build; build_subset; quick_rows main
  apply_pending decode_warp_ring.patch
  touch csrc/cuda/decode/*
  build_subset; quick_rows patch
  timeout 150 python3 -m pytest -q -x -p no:cacheprovider tests/test_cuda_decode.py tests/test_verify_rows.py \
    tests/test_cuda_decode_narrow.py > "$OUT/tests_patch.txt" 2>&1
  echo "tests rc=$?"; tail -2 "$OUT/tests_patch.txt"
  GUARD=${GUARD:-470} sanitize_subset 90 tests/test_gpu_sanitize_subset.py -k "decode or verify"
elif [ "$PHASE" = main ]; then
  ls python/mixed_attn/_C*.so > /dev/null 2>&1 || { echo "no build: run scripts/gpu_check.sh build first"; exit 1; }
  rows main
else
  apply_pending decode_warp_ring.patch
  touch csrc/cuda/decode/*  # newer than any object of an earlier build on this machine
  start=$(date +%s)
  bash scripts/build_inplace.sh > "$OUT/build_patch.log" 2>&1 || { tail -30 "$OUT/build_patch.log"; exit 1; }
  echo "build patch: $(( $(date +%s) - start )) s"
  rows patch
  timeout 200 python3 -m pytest -q -x -p no:cacheprovider tests/test_cuda_decode.py tests/test_verify_rows.py \
    tests/test_cuda_decode_narrow.py tests/test_graph_mode.py > "$OUT/tests_patch.txt" 2>&1
  echo "tests rc=$?"; tail -2 "$OUT/tests_patch.txt"
  GUARD=${GUARD:-480} sanitize_subset 120 tests/test_gpu_sanitize_subset.py -k "decode or verify"
fi
echo "total $(( $(date +%s) - T0 )) s"
