#!/usr/bin/env bash
# Session 30, device call (~4 minutes warm): decode_page_list_prefetch.patch (each decode CTA
# asks L2 for its split's page list before its first copies: session 29's Nsight Compute had 17%
# of the stalls on a page id fetched a tile ahead) against main on one machine: the confined
# per-SM rate at 16 / 44 SMs (H, F),
# the decode tests with the patch, bench_decode H / F / L with FlashInfer after, and Nsight
# Compute's instruction count and top stall sites of each (main's is the first count of the lean
# decode alone: session 30 profiled only lean + page pairs). Few files come back: keep $OUT small.
# Carry [".peers", ".device_commit"].
set -uo pipefail
source "$(dirname "$0")/peers_env.sh"
conf() {  # tag
  timeout 60 python3 tools/pending/confined_stream.py --decode-only --sms 16,44 --cases H,F --no-fi \
    > "$OUT/conf_$1.txt" 2>&1; grep "ma_dec" "$OUT/conf_$1.txt"
}
prof() {  # tag
  timeout 120 ncu --clock-control none --kernel-name "regex:decode_split" --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section InstructionStats --section SourceCounters \
    --import-source no -f -o "/tmp/ncu_$1" python3 tools/pending/one_decode.py ours H > /dev/null 2>&1
  ncu --import "/tmp/ncu_$1.ncu-rep" --page details 2>/dev/null | grep -E "Duration|Executed Instructions  |Issued Warp|No Eligible"
  ncu --import "/tmp/ncu_$1.ncu-rep" --page source --csv --print-source sass > "/tmp/sass_$1.csv" 2>/dev/null
  python3 tools/ncu_stalls.py "/tmp/sass_$1.csv" --top 8 2>&1 | head -40
}
build_subset
echo "== main"; conf main; prof main
git apply tools/pending/decode_page_list_prefetch.patch || exit 1
build_subset
timeout 150 python3 -m pytest -q -x -p no:cacheprovider tests/test_cuda_decode.py tests/test_verify_rows.py \
  > "$OUT/tests_prefetch.txt" 2>&1; tail -1 "$OUT/tests_prefetch.txt"
echo "== prefetch"; conf prefetch; prof prefetch
timeout 90 python3 benchmarks/bench_decode.py --cases H,F,L --policies sm2,fi --json "$OUT/dec_prefetch.json" \
  > "$OUT/dec_prefetch.txt" 2>&1; grep -E "^(H|F|L) +(sm2|fi_dec) " "$OUT/dec_prefetch.txt" | cut -c1-120
