#!/usr/bin/env bash
# Session 33, issue 14's A and C (a small extend beside a large decode: 1.007-1.010x / 1.00x
# FlashInfer's BatchAttention on an H100). The extend runs first today and its CTAs hold nearly
# every SM for its ~20 us while the decode waits; the decode's last wave then leaves SMs idle (A:
# 1024 stage-1 CTAs in 264 slots, 3.9 waves). decode_first.patch's decode_first=1 (launch_policy.h;
# bench_mixed row `ma_split_dfirst`) launches the decode's stage 1 first and the extend as its programmatic
# dependent, on the SMs the decode's last wave leaves, where the step's decode rows do not split.
# One full build, then: bench_mixed ma_split / ma_split_dfirst / ma_dec with FlashInfer's rows
# (A, C, H; B, D, K where the extend is large: expected slower; E, F split their rows: the
# request changes nothing there, the control), the decode-first GPU tests (bit-equal to the
# extend-first order, fp64 reference), memcheck and racecheck over the sanitize subset.
# Land the patch if the tests and sanitizers pass (off by default, a policy only if A and C gain).
# ~6 minutes warm. Predicted: A and C within 0.5% of the decode half alone, ~0.98-0.99x FI best.
# Carry [".peers", ".device_commit"].
set -uo pipefail
source "$(dirname "$0")/peers_env.sh"
T0=$(date +%s)
git apply tools/pending/decode_first.patch || { echo "the patch does not apply"; exit 1; }
rm -rf build
start=$(date +%s)
bash scripts/build_inplace.sh > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "build: $(( $(date +%s) - start )) s"
CASES=${CASES:-A,C,H,B,D,K,E,F}
timeout 240 python3 benchmarks/bench_mixed.py --no-plan --no-plot --cases $CASES \
  --rows ma_split,ma_split_dfirst,ma_split_leave0,ma_dec,fi_split,fi_batchattn --json "$OUT/mixed_df.json" \
  > "$OUT/mixed_df.txt" 2>&1
echo "== bench_mixed (rc=$?)"; grep -A12 "^=== summary" "$OUT/mixed_df.txt" | cut -c1-190 | tail -10
python3 - "$OUT/mixed_df.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for c in d["cases"]:
    r = {k: v["ms"] for k, v in c["rows"].items() if v.get("status") == "ok"}
    fi = min((v, k) for k, v in r.items() if k.startswith("fi_"))
    df = c["rows"].get("ma_split_dfirst", {}).get("plan", {}).get("decode_first")
    print(f"{c['name']}: split {r.get('ma_split', 0):.4f}  dfirst {r.get('ma_split_dfirst', 0):.4f} (taken: {df})  "
          f"leave0 {r.get('ma_split_leave0', 0):.4f}  dec {r.get('ma_dec', 0):.4f}  FI {fi[0]:.4f} ({fi[1]})  "
          f"split/FI {r.get('ma_split', 0) / fi[0]:.3f}  dfirst/FI {r.get('ma_split_dfirst', 0) / fi[0]:.3f}")
PY
timeout 200 python3 -m pytest -q -x -p no:cacheprovider tests/test_gpu_pdl.py tests/test_gpu_sanitize_subset.py \
  -k "decode_first" > "$OUT/tests_df.txt" 2>&1; echo "decode-first tests rc=$?"; tail -2 "$OUT/tests_df.txt"
for tool in memcheck racecheck; do
  [ $(( $(date +%s) - T0 )) -gt ${GUARD:-450} ] && { echo "skip $tool (time)"; continue; }
  timeout 90 compute-sanitizer --tool $tool --error-exitcode 9 python3 -m pytest -q -x -p no:cacheprovider \
    tests/test_gpu_sanitize_subset.py -k "decode_first or overlapped" > "$OUT/$tool.txt" 2>&1
  echo "$tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" "$OUT/$tool.txt" | tail -3
done
echo "total $(( $(date +%s) - T0 )) s"
