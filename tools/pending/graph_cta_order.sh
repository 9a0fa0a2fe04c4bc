#!/usr/bin/env bash
# Session 34: graph_cta_order.patch (issue 15: graph-safe decode plans 1.3-3.1% behind the
# deterministic plan of the same decode shape after graph_find_owner: H 0.7263 vs 0.7170 ms, F
# 0.2060 vs 0.2023, G 0.7370 vs 0.7149, K 0.3773 vs 0.3720 on an H100). Normal plans launch
# (split, head block, row) grids, so a row's kv heads run side by side and read each page (which
# holds every kv head's keys of its tokens) together; graph-safe plans launched (slot, head block),
# so a row's kv heads ran a wave apart, each reading its head's slice of every page. The patch
# launches graph-safe plans as a 1-D grid of slots x head blocks, head blocks fastest
# (load_cta_split_view in decode/common.cuh; every stage-1 kernel).
# Main, then the patch, on one machine: bench_decode's graph rows beside sm2 / det4096 / FI; the
# patch's graph, decode, verify and wrapper tests; memcheck and racecheck over the decode's sanitize
# cases. ~7 minutes warm. Carry [".peers", ".device_commit"].
# Predicted: G's graph row (8 kv heads, 64 KB pages) within 1% of det4096, H's within 0.5%; F (one
# kv head: the same order before and after) unchanged.
set -uo pipefail
source "$(dirname "$0")/peers_env.sh"
T0=$(date +%s)
CASES=${CASES:-H,F,G,K,L}
bench() {  # tag
  timeout 150 python3 benchmarks/bench_decode.py --cases $CASES --policies sm2,det4096,graph,graph_replay,fi,paged \
    > "$OUT/bench_$1.txt" 2>&1; echo "== $1 (rc=$?)"
  grep -E "(sm2|det4096|graph|graph_replay|fi_dec|paged) +(splits|[0-9])|/ (fi_dec|paged)" "$OUT/bench_$1.txt" \
    | sed -E 's/splits.row<= *//; s/ TB.s.*read / read /; s/ +/ /g' | head -40
}
# PHASE=main: main's rows only, on the in-place build already there (built by
# scripts/gpu_check.sh build in the same call); PHASE=patch: the patch only (main's rows from an
# earlier call); default both, main built first.
PHASE=${PHASE:-both}
if [ "$PHASE" != patch ]; then
  if [ "$PHASE" = both ] || ! ls python/mixed_attn/_C*.so > /dev/null 2>&1; then
    rm -rf build
    start=$(date +%s)
    bash scripts/build_inplace.sh > "$OUT/build_main.log" 2>&1 || { tail -30 "$OUT/build_main.log"; exit 1; }
    echo "build main: $(( $(date +%s) - start )) s"
  fi
  bench main
  [ "$PHASE" = main ] && exit 0
fi
apply_pending graph_cta_order.patch
start=$(date +%s)
bash scripts/build_inplace.sh > "$OUT/build_patch.log" 2>&1 || { tail -30 "$OUT/build_patch.log"; exit 1; }
echo "build patch: $(( $(date +%s) - start )) s"
bench patch
timeout 200 python3 -m pytest -q -x -p no:cacheprovider tests/test_graph_mode.py tests/test_cuda_decode.py \
  tests/test_verify_rows.py tests/test_cuda_decode_narrow.py tests/test_gpu_wrapper.py \
  > "$OUT/tests_patch.txt" 2>&1; echo "tests rc=$?"; tail -2 "$OUT/tests_patch.txt"
sanitize_subset 150 tests/test_gpu_sanitize_subset.py -k "decode or graph or verify"
echo "total $(( $(date +%s) - T0 )) s"
