#!/usr/bin/env bash
# One device call (~4 minutes warm): refit_check.py on a build with step_cost.h as committed, then
# on one with step_cost.h as of REF (default HEAD~1: the constants before the refit); only the
# planner recompiles between the two. Writes $OUT/refit_new.json and $OUT/refit_old.json.
# REF's file must be put in place here first: git show REF:csrc/include/mixed_attn/step_cost.h >
# tools/pending/step_cost_old.h (no .git on the device).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/mixed_attn_out}; mkdir -p "$OUT"
[ -f tools/pending/step_cost_old.h ] || { echo "put the old step_cost.h at tools/pending/step_cost_old.h"; exit 1; }
export MIXED_ATTN_CUDA_ARCHS=90a PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/python NINJA_JOBS=16
bash scripts/build_inplace.sh > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
timeout 200 python3 tools/pending/refit_check.py "$OUT/refit_new.json" > "$OUT/refit_new.txt" 2>&1
cp csrc/include/mixed_attn/step_cost.h /tmp/step_cost_new.h
cp tools/pending/step_cost_old.h csrc/include/mixed_attn/step_cost.h
bash scripts/build_inplace.sh > "$OUT/build_old.log" 2>&1 || { tail -30 "$OUT/build_old.log"; exit 1; }
timeout 200 python3 tools/pending/refit_check.py "$OUT/refit_old.json" > "$OUT/refit_old.txt" 2>&1
cp /tmp/step_cost_new.h csrc/include/mixed_attn/step_cost.h
python3 - "$OUT" <<'PY'
import json, sys
o = {r["case"]: r for r in json.load(open(sys.argv[1] + "/refit_old.json"))}
n = {r["case"]: r for r in json.load(open(sys.argv[1] + "/refit_new.json"))}
keys = ("mode", "extend_block_rows", "extend_kv_splits", "extend_ctas", "extend_cut_items", "extend_item_parts")
ratios = []
for i in sorted(n):
    a, b = o[i], n[i]
    ratios.append(b["ms"] / a["ms"])
    print(f"{i:3d} old {a['ms']:.4f} new {b['ms']:.4f} new/old {b['ms'] / a['ms']:.3f}  "
          + " ".join(f"{k}:{a[k]}->{b[k]}" for k in keys if a[k] != b[k]))
ratios.sort()
print(f"new/old: median {ratios[len(ratios) // 2]:.3f}, min {ratios[0]:.3f}, max {ratios[-1]:.3f}, n {len(ratios)}")
PY
