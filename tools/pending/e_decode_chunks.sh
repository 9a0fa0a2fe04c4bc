#!/usr/bin/env bash
# Session 34, issue 14's E: the step needs its decode half at ~96% of the read-only floor (H's
# rows reach it), it measured 93% (1.151 ms of 3.447 GB on an H100). The planner cuts E's 96 rows
# of 512-16k keys into up to 24 chunks of ~700 keys (9968 stage-1 CTAs, 1246 partial slots: 20 MB
# of partials written and merged), picked by a wave-cost model that is flat (within 1.3%) from
# 704 to 2048 keys a chunk. This times bench_decode's E (the same lengths) with the default plan
# against splits of at least 1024 / 1408 / 2048 keys (sm2_min*: same kernel), FlashInfer's decode
# and the paged-read ceiling, with --phases (stage 1 and the merge apart). Uses the in-place build
# already on the machine (run after a full build of main, e.g. scripts/gpu_check.sh build,tests),
# else builds. ~2 minutes warm. Carry [".peers", ".device_commit"].
# If a larger chunk wins by > 1%: the wave rule's per-CTA fixed cost (plan.cc kCtaFixedKeys = 64)
# or a cost for the partials' bytes, refitted on these rows and session 11's split sweep.
set -uo pipefail
source "$(dirname "$0")/peers_env.sh"
ls python/mixed_attn/_C*.so > /dev/null 2>&1 || build_subset
timeout 300 python3 benchmarks/bench_decode.py --cases E,H --phases \
  --policies sm2,sm2_min1024,sm2_min1408,sm2_min2048,fi,paged > "$OUT/e_chunks.txt" 2>&1
echo "bench_decode rc=$?"
grep -E "^(E|H) " "$OUT/e_chunks.txt" | sed -E 's/ +/ /g' | cut -c1-200 | head -40
