#!/usr/bin/env bash
# Issue 14 (and the decode's fixed cost, issue 15), one device call (~7 minutes warm): programmatic
# dependent launches. Apply tools/pending/pdl.patch here first (git apply). STEP=check: build (every head dim), the whole GPU suite with PDL on (the
# patch's policy default beside the sm_90a extend), tests/test_gpu_pdl.py, memcheck on the
# sanitize subset. STEP=bench: bench_mixed, split with and without PDL in one process, and the
# halves alone, every case (no FlashInfer rows: its head-dim-64/256 modules would compile for
# minutes; this session's FI rows are in RESULTS.md). STEP=all (default): both.
set -uo pipefail
cd "$(dirname "$0")/../.."
grep -q "pdl_allow_dependents" csrc/cuda/common/pdl.cuh 2>/dev/null || { echo "apply tools/pending/pdl.patch first"; exit 1; }
OUT=${OUT:-/tmp/mixed_attn_out}
mkdir -p "$OUT"
export MIXED_ATTN_CUDA_ARCHS=90a PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/python NINJA_JOBS=16
if [ -d .peers/flashinfer ]; then
  export PYTHONPATH="$PWD/.peers:$PYTHONPATH" FLASHINFER_WORKSPACE_BASE=$HOME/fi_ws MAX_JOBS=16
fi
STEP=${STEP:-all}
start=$(date +%s)
bash scripts/build_inplace.sh "-DMIXED_ATTN_HEAD_DIMS=64;128;256" "-DCMAKE_CUDA_FLAGS=" "-DCMAKE_CXX_FLAGS=" \
  > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "build: $(( $(date +%s) - start )) s"
status=0
if [ "$STEP" = check ] || [ "$STEP" = all ]; then
  timeout 330 python3 -m pytest -q -p no:cacheprovider tests --ignore=tests/test_gpu_sources_compile.py \
    > "$OUT/tests.log" 2>&1 || status=1
  tail -4 "$OUT/tests.log"
  grep -E "test_gpu_pdl.*(PASS|FAIL)|FAILED" "$OUT/tests.log" | head -20
  timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 python3 -m pytest -q -x -p no:cacheprovider \
    tests -k "sanitize or pdl" > "$OUT/memcheck.log" 2>&1 || status=1
  grep -E "ERROR SUMMARY|passed|failed" "$OUT/memcheck.log" | tail -3
fi
if [ "$STEP" = bench ] || [ "$STEP" = all ]; then
  timeout 240 python3 benchmarks/bench_mixed.py --cases ${CASES:-A,B,C,D,E,F,G,H,I,J,K,L} \
    --rows ma_split,ma_split_nopdl,ma_ext,ma_dec --markdown "$OUT/pdl_bench.md" \
    > "$OUT/pdl_bench.log" 2>&1 || status=1
  grep -A40 "=== summary" "$OUT/pdl_bench.log" | head -30
  # A copy rate refitted to cp.async would move D-d256 from a KV split to a persistent launch: time both.
  timeout 120 python3 benchmarks/bench_extend.py --cases D-d256,B-d256,D,B --kernels auto,s1,s2 2>&1 | tail -13
fi
exit $status
