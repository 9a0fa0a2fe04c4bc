#!/usr/bin/env bash
# Issue 15, one device call (~5 minutes warm; wants an H200), after step_launch.sh's V5-d64 rows
# agree with session 26's (paired 1.13x FlashInfer, one head 1.05x). Applies
# pair_one_block.patch: a step planned on its own rows pairs two kv heads a decode CTA only where
# both heads' pairs fit one MMA block (<= 8 a head); past that one head a CTA fills its block and
# the paired CTA does twice the MMA work per cached byte (each query zero in the other head's
# half). Graph-safe and deterministic launch bounds keep the 4-block rule. plan_sweep: 7 of 500
# plans differ (decode_kv_pack, decode_cta_blocks), no launch decision. Then: the planner and
# verify-row tests on the GPU, V4-d64 / V5-d64 (V5 should take one head: ~0.292 ms), K (unchanged:
# one-token rows still pair). Here first: `bash tools/setup_peers.sh "64 128"`; carry [".peers"].
set -uo pipefail
source "$(dirname "$0")/peers_env.sh"
git apply tools/pending/pair_one_block.patch || { echo "pair_one_block.patch does not apply"; exit 1; }
start=$(date +%s)
bash scripts/build_inplace.sh "-DMIXED_ATTN_HEAD_DIMS=64" > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "build: $(( $(date +%s) - start )) s"
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_launch_policy.py tests/test_verify_rows.py \
  tests/test_cuda_decode.py -k "64 or pack or verify" 2>&1 | tail -3
for rep in 1 2; do
  timeout 100 python3 benchmarks/bench_verify.py --cases V4-d64,V5-d64 2>&1 \
    | grep -E "^\| V" | awk '!seen[$0]++' | sed "s/^/patched rep=$rep /"
done
timeout 100 python3 benchmarks/bench_decode.py --cases K --policies sm2,pack1,fi 2>&1 | grep -E "ms |/ fi_dec"
