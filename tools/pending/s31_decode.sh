#!/usr/bin/env bash
# Four decode patches, each against main on one machine (~4 minutes warm each; lab build, head dims
# 64/128, no fp8): the confined per-SM rate at 16 / 44 SMs (H, F), the decode tests with the
# patch, and Nsight Compute's instruction count and top stall sites (main's is the lean decode's
# first count: session 30 profiled only lean + page pairs).
#   decode_page_list_prefetch.patch: each decode CTA asks L2 for its split's page list before
#     its first copies (session 29: 17% of the stall samples on a page id fetched a tile ahead).
#   decode_v_ldmatrix.patch: 16-bit V reaches P.V's MMA by ldmatrix.trans (no byte permutes,
#     4 registers a load instead of 16), with a swizzle that keeps every read conflict-free
#     (checked by enumerating the phases; fp8 keeps its path, the epilogue maps both layouts).
#   decode_whole_tiles.patch: a tile wholly inside the split's visible keys fetches its page ids
#     and issues its copies without the per-row range tests (fewer instructions, but 13 KB more
#     code in the default variant, as the page pairs that measured slower: if this one is slower
#     too, code size is the suspect).
#   decode_u32_strides.patch: the caches' page / slot byte strides as 32-bit numbers (a row's
#     address two 32 x 32 -> 64-bit multiply-adds instead of four instructions each), forward
#     refusing a cache whose strides pass 2^32 bytes (tests/test_bad_input.py's new case).
# Land a patch whose tests pass and whose confined rate gains; before landing, the full build
# and GPU suite (fp8, head dim 256) and memcheck / racecheck over the decode sanitize tests.
# Carry [".peers", ".device_commit"]. Few files come back: keep $OUT small.
# QUICK=1, for a session with one call's device time: the confined rate alone (also at 132 SMs),
# no Nsight Compute, the decode tests only for the ldmatrix patch (the one that moves data
# differently), all four patches by default, and no variant started past GUARD seconds (500).
set -uo pipefail
source "$(dirname "$0")/peers_env.sh"
QUICK=${QUICK:-0}
T0=$(date +%s)
SMS=16,44; [ "$QUICK" = 1 ] && SMS=16,44,132
conf() {  # tag
  timeout 90 python3 benchmarks/bench_confined.py --decode-only --sms $SMS --cases H,F --no-fi \
    > "$OUT/conf_$1.txt" 2>&1; grep "ma_dec" "$OUT/conf_$1.txt"
}
prof() {  # tag
  [ "$QUICK" = 1 ] && return
  timeout 120 ncu --clock-control none --kernel-name "regex:decode_split" --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section InstructionStats --section SourceCounters \
    --import-source no -f -o "/tmp/ncu_$1" python3 tools/pending/one_decode.py ours H > /dev/null 2>&1
  ncu --import "/tmp/ncu_$1.ncu-rep" --page details 2>/dev/null | grep -E "Duration|Executed Instructions  |Issued Warp|No Eligible"
  ncu --import "/tmp/ncu_$1.ncu-rep" --page source --csv --print-source sass > "/tmp/sass_$1.csv" 2>/dev/null
  python3 tools/ncu_stalls.py "/tmp/sass_$1.csv" --top 8 2>&1 | head -30
}
APPLIED=""  # the patches in the tree now (.git does not travel: the previous ones are reversed)
variant() {  # tag patch...
  local tag=$1; shift
  [ "$QUICK" = 1 ] && [ $(( $(date +%s) - T0 )) -gt ${GUARD:-500} ] && { echo "skip $tag (time)"; return; }
  for a in $APPLIED; do git apply -R "tools/pending/$a" || { echo "cannot reverse $a"; exit 1; }; done
  APPLIED=""
  for p in "$@"; do
    git apply "tools/pending/$p" || { echo "$p does not apply"; return; }
    APPLIED="$p $APPLIED"  # reversed last-first
  done
  build_subset
  if [ "$QUICK" = 0 ] || [ "$tag" = ldmatrix ]; then
    timeout 150 python3 -m pytest -q -x -p no:cacheprovider tests/test_cuda_decode.py tests/test_verify_rows.py \
      tests/test_cuda_decode_narrow.py > "$OUT/tests_$tag.txt" 2>&1; tail -1 "$OUT/tests_$tag.txt"
  fi
  echo "== $tag"; conf "$tag"
}
# VARIANTS: which of them this call runs (~3.5 minutes each warm, main ~2.5: two calls, e.g.
# VARIANTS="ldmatrix u32" then VARIANTS="whole prefetch" with PROFILE_MAIN=0).
# A warm machine keeps the last call's build, whose objects may be newer than this tree's copied
# sources (session 30's "before" run reused the patched objects): rebuild what differs.
touch csrc/cuda/decode/* csrc/cuda/arch/* csrc/torch/*
build_subset
echo "== main"; conf main; [ "${PROFILE_MAIN:-1}" = 1 ] && prof main
DEFAULT_VARIANTS="ldmatrix u32"; [ "$QUICK" = 1 ] && DEFAULT_VARIANTS="u32 ldmatrix prefetch whole"
for v in ${VARIANTS:-$DEFAULT_VARIANTS}; do
  case $v in
    ldmatrix) variant ldmatrix decode_v_ldmatrix.patch; prof ldmatrix ;;
    u32) variant u32 decode_u32_strides.patch; prof u32 ;;
    prefetch) variant prefetch decode_page_list_prefetch.patch ;;
    whole) variant whole decode_whole_tiles.patch; prof whole ;;
    combo) variant combo decode_v_ldmatrix.patch decode_u32_strides.patch ;;  # both, if each gains
  esac
done
echo "total $(( $(date +%s) - T0 )) s"
