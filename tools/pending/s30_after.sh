#!/usr/bin/env bash
# Session 30, device call 2 (~6 minutes warm): with decode_lean_copies.patch and
# decode_page_pairs.patch applied (incremental build on the warm machine of s30_lean.sh):
# memcheck and racecheck over the decode / verify sanitize tests, then the whole step B, D, E, F
# (the decode beside the extend should gain most: its per-SM rate) against FlashInfer's rows.
# Carry [".peers", ".device_commit"].
set -uo pipefail
source "$(dirname "$0")/peers_env.sh"
git apply tools/pending/decode_lean_copies.patch && git apply tools/pending/decode_page_pairs.patch || exit 1
build_subset
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 python3 -m pytest -q -x -p no:cacheprovider \
  tests -k "sanitize and (decode or verify)" > "$OUT/memcheck.log" 2>&1; echo "memcheck rc=$?"; tail -2 "$OUT/memcheck.log"
timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 python3 -m pytest -q -x -p no:cacheprovider \
  tests -k "sanitize and (decode or verify)" > "$OUT/racecheck.log" 2>&1; echo "racecheck rc=$?"
grep -E "RACECHECK SUMMARY|passed|failed" "$OUT/racecheck.log" | tail -3
timeout 200 python3 benchmarks/bench_mixed.py --cases ${CASES:-B,D,E,F} \
  --rows ma_split,ma_split_leave0,fi_split,fi_batchattn \
  --json "$OUT/step_after.json" > "$OUT/step_after.txt" 2>&1
grep -A7 "=== summary" "$OUT/step_after.txt" | cut -c1-300
