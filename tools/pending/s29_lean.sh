#!/usr/bin/env bash
# Session 29, device call 4 (~5 minutes warm): decode_lean_copies.patch (the decode ring's copies
# with less address math: byte strides in DecodeConsts, unsigned 32 x 64-bit multiply-adds, the
# power-of-two page size's own loop, no pointer select for masked keys; O rescaled only where a
# row's max moved), against the tree without it on the same machine: bench_decode (ours and
# FlashInfer's) and the confined per-SM rate, before and after; the decode tests after; Nsight
# Compute's instruction count after. Carry [".peers", ".device_commit"].
set -uo pipefail
source "$(dirname "$0")/peers_env.sh"
bench() {  # tag
  timeout 90 python3 benchmarks/bench_decode.py --cases H,F --policies sm2,fi --json "$OUT/dec_$1.json" \
    > "$OUT/dec_$1.txt" 2>&1; grep -E "^(H|F) " "$OUT/dec_$1.txt" | grep -v "max |diff|" | cut -c1-160
  timeout 60 python3 tools/pending/confined_stream.py --decode-only --sms 16,44 --cases H,F --no-fi \
    > "$OUT/conf_$1.txt" 2>&1; grep "ma_dec" "$OUT/conf_$1.txt"
}
build_subset
echo "== before"; bench before
git apply tools/pending/decode_lean_copies.patch || patch -p1 < tools/pending/decode_lean_copies.patch
build_subset
timeout 150 python3 -m pytest -q -x -p no:cacheprovider tests/test_cuda_decode.py tests/test_verify_rows.py \
  tests/test_cuda_decode_narrow.py > "$OUT/tests_lean.txt" 2>&1; tail -3 "$OUT/tests_lean.txt"
echo "== after"; bench after
timeout 60 ncu --clock-control none --kernel-name "regex:decode_split" --launch-skip 2 --launch-count 1 \
  --section SpeedOfLight --section WarpStateStats --section InstructionStats \
  python3 tools/pending/one_decode.py ours H > "$OUT/ncu_after.txt" 2>&1 || true
grep -E "Duration|Executed Instructions  |Issued Warp|No Eligible" "$OUT/ncu_after.txt"
