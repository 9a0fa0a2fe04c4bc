#!/usr/bin/env bash
# Issues 14 and 15, one device call (~5 minutes warm; wants an H200). Here first:
# `bash tools/setup_peers.sh "64 128"`; the call carries [".peers"].
# 1. The steps still above FlashInfer's BatchAttention (session 26, H200: A 1.03x, C 1.02x,
#    F 1.08x): the planner shapes the extend launch for the extend alone (F: cut items to 132 CTAs;
#    A: the 128-row shape, 128 CTAs), so the decode stage 1, the extend's programmatic dependent,
#    finds no SM free until the extend's CTAs leave (F's step = decode + the whole extend half).
#    bench_mixed's opt-in rows shape it by hand: uncut (F: 86 CTAs), 192-row tiles (A: 88), one
#    CTA per item, and extend_leave_sms=22..110 (the persistent extend on all SMs but N; the
#    plans at N = 22 / 44 / 66 on an H200's description: A 192-row tiles on 88 / 88 / 66 CTAs,
#    F 110 CTAs with 24 items cut / 86 uncut / 66 uncut, K on 110 / 88 / 66). A row that beats
#    ma_split says the plan should count the decode half that follows (plan.cc steps 3, 3c, 3e:
#    a planner rule choosing N). Large N trades a longer extend for a decode streaming beside it
#    from the start: it pays where N SMs alone come near the HBM rate (2 CTAs an SM, 96 KB rings
#    each). extend_leave_sms is new (session 26): its GPU test runs first.
# 2. V5-d64 (64 rows of 4 queries at head dim 64): paired 0.312 ms against one head a CTA 0.292
#    in session 26's one run on the H200 (the H100: 0.392 / 0.391); V4-d64 paired 0.94x. Twice,
#    alternating, to see whether pairing a row that needs two MMA blocks loses.
set -uo pipefail
source "$(dirname "$0")/peers_env.sh"
[ -n "${SKIP_BUILD:-}" ] || build_subset
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_gpu_pdl.py 2>&1 | tail -3
timeout 300 python3 benchmarks/bench_mixed.py --cases ${CASES:-A,C,F,K} \
  --rows ma_split,ma_split_nc,ma_split_r128,ma_split_r192,ma_split_np,ma_split_leave22,ma_split_leave44,ma_split_leave66,ma_split_leave88,ma_split_leave110,fi_batchattn \
  --markdown "$OUT/step_launch.md" > "$OUT/step_launch.log" 2>&1
grep -A8 "=== summary" "$OUT/step_launch.log" | head -10
for rep in 1 2; do for pack in 1 0; do
  timeout 100 python3 benchmarks/bench_verify.py --cases V4-d64,V5-d64 --decode-kv-pack $pack 2>&1 \
    | grep -E "^\| V" | awk '!seen[$0]++' | sed "s/^/rep=$rep pack=$pack /"
done; done
