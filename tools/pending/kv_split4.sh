#!/usr/bin/env bash
# Issue 13, one device call (~6 minutes warm): KV splits of 3 and 4 CTAs a query tile on the sm_90a
# extend (ranks past rank 0's partial slots hand over in turn). Apply tools/pending/kv_split4.patch
# first (git apply). Builds every head dim; runs the cluster-capacity probe (how many clusters of
# 2, 3, 4 extend-sized CTAs fit at once: GPCs hold clusters whole); the forced-split extend tests
# (2, 3, 4, 8->4) and the new hand-over sanitize tests, under memcheck and racecheck (racecheck
# reports the documented st_cluster / cp_async false positive, docs/racecheck_sm90_kv_split.md:
# look for any other kind); then bench_extend with 2, 3, 4 splits on the cases with few long
# tiles. The planner still chooses 1 or 2 (kSm90AutoKvSplits): raise it only where 3 or 4 win,
# and teach the estimate the cluster capacity first.
set -uo pipefail
cd "$(dirname "$0")/../.."
grep -q "sm90_kv_split_slots" csrc/cuda/extend/sm90/traits.cuh || { echo "apply tools/pending/kv_split4.patch first"; exit 1; }
OUT=${OUT:-/tmp/mixed_attn_out}
mkdir -p "$OUT"
export MIXED_ATTN_CUDA_ARCHS=90a PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/python NINJA_JOBS=16
start=$(date +%s)
bash scripts/build_inplace.sh "-DMIXED_ATTN_HEAD_DIMS=64;128;256" "-DCMAKE_CUDA_FLAGS=" "-DCMAKE_CXX_FLAGS=" \
  > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "build: $(( $(date +%s) - start )) s"
nvcc -std=c++17 -arch=sm_90a -o /tmp/cluster_probe tools/cluster_capacity_probe.cu && /tmp/cluster_probe 200 | tee "$OUT/clusters.txt"
status=0
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_extend.py tests/test_gpu_sanitize_subset.py \
  -k "forced_kv_splits or kv_split or sanitize_extend" > "$OUT/tests.log" 2>&1 || status=1
tail -3 "$OUT/tests.log"
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 python3 -m pytest -q -x -p no:cacheprovider \
  tests/test_gpu_sanitize_subset.py -k kv_split > "$OUT/memcheck.log" 2>&1 || status=1
grep -E "ERROR SUMMARY|passed|failed" "$OUT/memcheck.log" | tail -2
timeout 150 compute-sanitizer --tool racecheck python3 -m pytest -q -x -p no:cacheprovider \
  tests/test_gpu_sanitize_subset.py -k "kv_split and bf16" > "$OUT/racecheck.log" 2>&1 || status=1
grep -E "RACECHECK SUMMARY|passed|failed" "$OUT/racecheck.log" | tail -2
grep -E "Race reported between" "$OUT/racecheck.log" | sed 's/ at .*//' | sort | uniq -c | head
timeout 150 python3 benchmarks/bench_extend.py --cases D,D-d64,D-d256,P-512 --fp8 --kernels auto,s2,s3,s4 \
  2>&1 | tail -18 | tee "$OUT/bench.log"
exit $status
