#!/usr/bin/env bash
# One device call (~2 minutes warm): a step-cost candidate against the committed constants, on the
# steps whose plans it moves. Here first: build with the candidate step_cost.h and with the
# committed one, `python tools/plan_sweep.py dump` each, `diff --cases tools/pending/refit_cases.json`,
# and copy the candidate to tools/pending/step_cost_alt.h (no .git on the device). This call times
# refit_check.py on a build with the committed step_cost.h, then on one with the candidate (only
# the planner recompiles), and prints alt / base per step: a candidate lands only where the plans it
# moves are not slower. Writes $OUT/refit_{base,alt}.{json,txt}.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/mixed_attn_out}; mkdir -p "$OUT"
ALT=tools/pending/step_cost_alt.h
[ -f "$ALT" ] || { echo "put the candidate step_cost.h at $ALT"; exit 1; }
export MIXED_ATTN_CUDA_ARCHS=90a PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/python NINJA_JOBS=16
bash scripts/build_inplace.sh > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
timeout 200 python3 tools/pending/refit_check.py "$OUT/refit_base.json" > "$OUT/refit_base.txt" 2>&1
cp csrc/include/mixed_attn/step_cost.h /tmp/step_cost_base.h
cp "$ALT" csrc/include/mixed_attn/step_cost.h
bash scripts/build_inplace.sh > "$OUT/build_alt.log" 2>&1 || { tail -30 "$OUT/build_alt.log"; exit 1; }
timeout 200 python3 tools/pending/refit_check.py "$OUT/refit_alt.json" > "$OUT/refit_alt.txt" 2>&1
cp /tmp/step_cost_base.h csrc/include/mixed_attn/step_cost.h
python3 tools/pending/refit_check.py --compare "$OUT/refit_base.json" "$OUT/refit_alt.json"
