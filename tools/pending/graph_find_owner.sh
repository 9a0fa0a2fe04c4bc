#!/usr/bin/env bash
# Session 33: graph_find_owner.patch (issue 15: graph-safe decode launches 1-3% slower than the
# same plan run eagerly: H 0.7302 vs det4096 0.7172 ms, G 0.7436 vs 0.7224, F 0.2058 vs 0.2017 on
# an H100). A graph-safe stage-1 CTA found its decode row by a binary search of the split offsets
# (log2(rows) dependent loads before its first copy) and the merge, always launched in a bucket
# that may split, looked up every row; the patch guesses the row (x * rows / slots: exact when
# rows hold equal slots), reads the slot count beside the row count, and lets the merge exit on
# the counts when every row holds one slot; the KV save finds a token's row the same way.
# Main, then the patch, on one machine: bench_decode's graph rows beside sm2 / det4096 / FI;
# the patch's graph, decode, verify and wrapper tests; memcheck and racecheck over the sanitize
# subset. ~7 minutes warm. Carry [".peers", ".device_commit"]. The bench rows include the paged-read
# ceiling (bench_decode's `paged`): issue 15's question whether F's 85% of the read floor is its
# 4 KB scattered pages' cost.
# Predicted: graph and graph_replay within 0.5% of det4096 (the same decode shape) on H, F, G, K.
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
rm -rf build
start=$(date +%s)
bash scripts/build_inplace.sh > "$OUT/build_main.log" 2>&1 || { tail -30 "$OUT/build_main.log"; exit 1; }
echo "build main: $(( $(date +%s) - start )) s"
bench main
git apply tools/pending/graph_find_owner.patch || { echo "the patch does not apply"; exit 1; }
start=$(date +%s)
bash scripts/build_inplace.sh > "$OUT/build_patch.log" 2>&1 || { tail -30 "$OUT/build_patch.log"; exit 1; }
echo "build patch: $(( $(date +%s) - start )) s"
bench patch
timeout 200 python3 -m pytest -q -x -p no:cacheprovider tests/test_graph_mode.py tests/test_cuda_decode.py \
  tests/test_verify_rows.py tests/test_cuda_decode_narrow.py tests/test_gpu_wrapper.py tests/test_find_owner.py \
  > "$OUT/tests_patch.txt" 2>&1; echo "tests rc=$?"; tail -2 "$OUT/tests_patch.txt"
for tool in memcheck racecheck; do
  [ $(( $(date +%s) - T0 )) -gt ${GUARD:-450} ] && { echo "skip $tool (time)"; continue; }
  timeout 90 compute-sanitizer --tool $tool --error-exitcode 9 python3 -m pytest -q -x -p no:cacheprovider \
    tests -k "sanitize" > "$OUT/$tool.txt" 2>&1
  echo "$tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" "$OUT/$tool.txt" | tail -3
done
echo "total $(( $(date +%s) - T0 )) s"
