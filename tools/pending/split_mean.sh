#!/usr/bin/env bash
# Session 36, issues 14 and 15: split_mean.patch prices the decode's waves at the launch's mean
# split (plan.cc's wave rule: waves x (mean + fixed) + longest - mean; for equal splits the same as
# waves x (longest + fixed)). Measured reason: E's rows of 512-16k keys read 2.4% faster at 8 splits
# a row than at the wave rule's 24, its step 3.4% faster (benchmarks/RESULTS.md, session 36). On
# the CPU planner it moves the decode splits of 55 of plan_sweep's 1000 steps (no other field) and
# keeps session 11's equal-length plans; split_mean_cases.json holds those 55 steps (d 64 / 128 /
# 256, one fp8), many of them few mixed-length rows taking more splits. This times them whole
# (refit_check.py) with main's planner, then with the patch's (only the planner recompiles), prints
# patch / main per step (refit_check.py --compare), then bench_decode E / E32 / E256 and bench_mixed E / D / B / F with each.
# ~6 minutes from a fresh machine (the full build first). Carry [".peers", ".device_commit"].
# Land if E gains and the 55 steps are not slower (median <= 1.00, none past 1.03), with the
# planner tests and the GPU suite's decode tests on the patched tree.
set -uo pipefail
source "$(dirname "$0")/peers_env.sh"
T0=$(date +%s)
rows() {  # tag
  timeout 150 python3 tools/pending/refit_check.py "$OUT/mean_$1.json" tools/pending/split_mean_cases.json \
    > "$OUT/mean_$1.txt" 2>&1; echo "== $1 steps (rc=$?)"
  timeout 100 python3 benchmarks/bench_decode.py --cases E,E32,E256 --policies sm2,fi > "$OUT/dec_$1.txt" 2>&1
  echo "== $1 decode (rc=$?)"; grep -E "sm2 splits/row|sm2 / fi_dec" "$OUT/dec_$1.txt" | sed -E 's/ +/ /g' | cut -c1-120
  timeout 120 python3 benchmarks/bench_mixed.py --cases E,D,B,F --rows ma_split,fi_split,fi_batchattn \
    --json "$OUT/step_$1.json" > "$OUT/step_$1.txt" 2>&1
  echo "== $1 step (rc=$?)"; grep -A6 "=== summary" "$OUT/step_$1.txt" | cut -c1-200
}
# The full build (the steps hold head dims 64-256 and an fp8 cache; incremental where one is there).
bash scripts/build_inplace.sh > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "build: $(( $(date +%s) - T0 )) s"
rows main
apply_pending split_mean.patch
bash scripts/build_inplace.sh > "$OUT/build_patch.log" 2>&1 || { tail -30 "$OUT/build_patch.log"; exit 1; }
rows patch
python3 tools/pending/refit_check.py --compare "$OUT/mean_main.json" "$OUT/mean_patch.json"
echo "total $(( $(date +%s) - T0 )) s"
