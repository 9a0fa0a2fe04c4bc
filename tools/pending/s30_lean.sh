#!/usr/bin/env bash
# Session 30, device call 1 (~8 minutes warm): session 29's decode_lean_copies.patch, then
# decode_page_pairs.patch on top (one page-id fetch for two rows of a thread on one page), each
# against the tree before it on the same machine: bench_decode H / F / L (ours and FlashInfer's) and
# the confined per-SM rate at 16 / 44 SMs; the decode tests after each patch; Nsight Compute's
# instruction count at the end. Carry [".peers", ".device_commit"].
set -uo pipefail
source "$(dirname "$0")/peers_env.sh"
bench() {  # tag
  timeout 90 python3 benchmarks/bench_decode.py --cases H,F,L --policies sm2,fi --json "$OUT/dec_$1.json" \
    > "$OUT/dec_$1.txt" 2>&1; grep -E "^(H|F|L) " "$OUT/dec_$1.txt" | grep -v "max |diff|" | cut -c1-160
  timeout 60 python3 tools/pending/confined_stream.py --decode-only --sms 16,44 --cases H,F --no-fi \
    > "$OUT/conf_$1.txt" 2>&1; grep "ma_dec" "$OUT/conf_$1.txt"
}
tests() {  # tag
  timeout 150 python3 -m pytest -q -x -p no:cacheprovider tests/test_cuda_decode.py tests/test_verify_rows.py \
    tests/test_cuda_decode_narrow.py > "$OUT/tests_$1.txt" 2>&1; tail -3 "$OUT/tests_$1.txt"
}
build_subset
echo "== before"; bench before
git apply tools/pending/decode_lean_copies.patch || exit 1
build_subset; tests lean
echo "== lean"; bench lean
git apply tools/pending/decode_page_pairs.patch || exit 1
build_subset; tests pairs
echo "== pairs"; bench pairs
timeout 60 ncu --clock-control none --kernel-name "regex:decode_split" --launch-skip 2 --launch-count 1 \
  --section SpeedOfLight --section WarpStateStats --section InstructionStats \
  python3 tools/pending/one_decode.py ours H > "$OUT/ncu_pairs.txt" 2>&1 || true
grep -E "Duration|Executed Instructions  |Issued Warp|No Eligible" "$OUT/ncu_pairs.txt"
