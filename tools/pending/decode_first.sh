#!/usr/bin/env bash
# Session 34, issue 14's A and C: decode_first (launch_policy.h; plan.cc step 3g), the policy's
# choice by default (-1). Run on the tree with it applied (not a patch). One full build, then
# bench_mixed's default row (the policy) beside decode_first=0 / =1 and FlashInfer's rows (A, C
# take it; J, B, D, K, G must not lose: the policy leaves them extend-first; E, F split their rows),
# the whole GPU suite, memcheck and racecheck over the decode-first / overlapped sanitize cases.
# ~8 minutes warm. Carry [".peers", ".device_commit"].
set -uo pipefail
source "$(dirname "$0")/peers_env.sh"
T0=$(date +%s)
rm -rf build
start=$(date +%s)
bash scripts/build_inplace.sh > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "build: $(( $(date +%s) - start )) s"
CASES=${CASES:-A,C,J,B,D,K,E,F,G}
timeout 200 python3 benchmarks/bench_mixed.py --no-plan --no-plot --cases $CASES \
  --rows ma_split,ma_split_efirst,ma_split_dfirst,ma_dec,fi_split,fi_batchattn --json "$OUT/mixed_df.json" \
  > "$OUT/mixed_df.txt" 2>&1
echo "== bench_mixed (rc=$?)"
python3 - "$OUT/mixed_df.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for c in d["cases"]:
    r = {k: v["ms"] for k, v in c["rows"].items() if v.get("status") == "ok"}
    fi = min((v, k) for k, v in r.items() if k.startswith("fi_"))
    took = {k: c["rows"].get(k, {}).get("plan", {}).get("decode_first") for k in ("ma_split", "ma_split_dfirst")}
    print(f"{c['name']}: policy {r.get('ma_split', 0):.4f} (decode_first {took['ma_split']})  efirst {r.get('ma_split_efirst', 0):.4f}  "
          f"dfirst {r.get('ma_split_dfirst', 0):.4f} ({took['ma_split_dfirst']})  dec {r.get('ma_dec', 0):.4f}  "
          f"FI {fi[0]:.4f} ({fi[1]})  policy/FI {r.get('ma_split', 0) / fi[0]:.3f}  efirst/FI {r.get('ma_split_efirst', 0) / fi[0]:.3f}  "
          f"dfirst/FI {r.get('ma_split_dfirst', 0) / fi[0]:.3f}")
PY
timeout 330 python3 -m pytest -q -p no:cacheprovider tests > "$OUT/tests_all.txt" 2>&1
echo "GPU suite rc=$?"; tail -3 "$OUT/tests_all.txt"; grep -E "^FAILED" "$OUT/tests_all.txt" | head -10
sanitize_subset 60 tests/test_gpu_sanitize_subset.py -k "decode_first or overlapped"
echo "total $(( $(date +%s) - T0 )) s"
