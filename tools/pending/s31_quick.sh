#!/usr/bin/env bash
# The short form of s31_decode.sh for a session with one call's device time: the confined per-SM
# rate (H, F at 16 / 44 / 132 SMs) of main and of each decode patch, the decode tests only for
# the ldmatrix patch (the one that moves data differently); stops starting variants past 500 s.
# Carry [".peers", ".device_commit"].
set -uo pipefail
source "$(dirname "$0")/peers_env.sh"
T0=$(date +%s)
conf() {  # tag
  timeout 90 python3 benchmarks/bench_confined.py --decode-only --sms 16,44,132 --cases H,F --no-fi \
    > "$OUT/conf_$1.txt" 2>&1; echo "== $1"; grep "ma_dec" "$OUT/conf_$1.txt"
}
APPLIED=""
variant() {  # tag patch...
  local tag=$1; shift
  [ $(( $(date +%s) - T0 )) -gt ${GUARD:-500} ] && { echo "skip $tag (time)"; return; }
  for a in $APPLIED; do git apply -R "tools/pending/$a" || { echo "cannot reverse $a"; exit 1; }; done
  APPLIED=""
  for p in "$@"; do
    git apply "tools/pending/$p" || { echo "$p does not apply"; return; }
    APPLIED="$p $APPLIED"
  done
  build_subset
  if [ "$tag" = ldmatrix ]; then
    timeout 120 python3 -m pytest -q -x -p no:cacheprovider tests/test_cuda_decode.py tests/test_verify_rows.py \
      tests/test_cuda_decode_narrow.py > "$OUT/tests_$tag.txt" 2>&1; tail -1 "$OUT/tests_$tag.txt"
  fi
  conf "$tag"
}
touch csrc/cuda/decode/* csrc/cuda/arch/* csrc/torch/*
build_subset
conf main
for v in ${VARIANTS:-u32 ldmatrix prefetch whole}; do
  case $v in
    ldmatrix) variant ldmatrix decode_v_ldmatrix.patch ;;
    u32) variant u32 decode_u32_strides.patch ;;
    prefetch) variant prefetch decode_page_list_prefetch.patch ;;
    whole) variant whole decode_whole_tiles.patch ;;
    combo) variant combo decode_v_ldmatrix.patch decode_u32_strides.patch ;;
  esac
done
echo "total $(( $(date +%s) - T0 )) s"
