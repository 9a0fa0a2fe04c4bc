#!/usr/bin/env bash
# Issue 15 / 14, one device call (~5 minutes warm; wants an H200): head dim 64's decode with two
# kv heads a stage-1 CTA (decode_kv_pack, f746036) against one head a CTA and FlashInfer's decode,
# same process; K-pair (K's bytes as 4 kv heads of 128) for what the paired read should reach;
# K over an fp8 cache (paired by the policy since session 25) against one head a CTA;
# bench_verify's head-dim-64 verify rows, one head a CTA and the policy's; then bench_mixed's K step (ours split and its extend half, FlashInfer's split and
# BatchAttention). Here first: `bash tools/setup_peers.sh "64 128"`; the call carries [".peers"].
# Sessions 23 and 25 measured it on an H100 only (benchmarks/RESULTS.md, "Session 25"): K paired
# 0.942x FlashInfer's decode, one head 0.969x; the H200 is the machine this is for.
set -uo pipefail
source "$(dirname "$0")/peers_env.sh"
if [ -z "${SKIP_BUILD:-}" ]; then
  start=$(date +%s)
  bash scripts/build_inplace.sh "-DMIXED_ATTN_HEAD_DIMS=64;128" > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
  echo "build: $(( $(date +%s) - start )) s"
fi
# K / K-p1 under the default, graph-safe (eager and replayed) and deterministic plans, each paired
# (the policy's) and one head a CTA (*_p1 / pack1); K-pair and H for reference.
timeout 200 python3 benchmarks/bench_decode.py --cases K,K-p1 \
  --policies sm2,pack1,graph,graph_p1,graph_replay,graph_replay_p1,det4096,det4096_p1,fi \
  --json "$OUT/decode.json" 2>&1 | grep -v -i triton | tee "$OUT/decode.log" | grep -E "ms |/ fi_dec|not run"
timeout 100 python3 benchmarks/bench_decode.py --cases K-pair,H --policies sm2,fi --json "$OUT/decode_ref.json" 2>&1 \
  | grep -v -i triton | tee "$OUT/decode_ref.log" | grep -E "ceilings|ms |/ fi_dec"
# fp8: ours only (FlashInfer's fp8 decode module is not prebuilt: ~100 s of JIT).
timeout 60 python3 benchmarks/bench_decode.py --cases K-fp8 --policies sm2,pack1 2>&1 | grep -v -i triton \
  | tee "$OUT/decode_fp8.log" | tail -4
# Verify rows at head dim 64 (rows of 2 and 4 pair under the policy: one and two MMA blocks); one
# head a CTA (--decode-kv-pack 1) against the policy's choice.
for pack in 1 0; do
  timeout 120 python3 benchmarks/bench_verify.py --cases V4-d64,V5-d64 --decode-kv-pack $pack 2>&1 \
    | grep -E "^\| V" | awk '!seen[$0]++' | sed "s/^/pack=$pack /"
done
[ "${MIXED:-1}" = 0 ] && exit 0  # bench_mixed's K step in a call of its own
timeout 200 python3 benchmarks/bench_mixed.py --cases K --rows ma_split,ma_ext,fi_split,fi_ext,fi_batchattn \
  --markdown "$OUT/mixed_k.md" > "$OUT/mixed_k.log" 2>&1
grep -A6 "=== summary" "$OUT/mixed_k.log" | head -8
