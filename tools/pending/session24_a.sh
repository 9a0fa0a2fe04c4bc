#!/usr/bin/env bash
# One device call (~9 minutes warm) for the two pending patches: here first
#   git apply tools/pending/kv_pack_blocks.patch tools/pending/epilogue_16b_stores.patch
#   bash tools/setup_peers.sh "64 128"; bash scripts/device_commit.sh   (carry [".peers", ".device_commit"])
# then: build; the GPU tests the patches touch (verify rows incl. two kv heads over 1/2/4 blocks,
# graph mode, the out-view test and test_features over every extend variant); memcheck -k sanitize;
# bench_extend P-512 / B against FA3 (the epilogue: P-512 was 1.59x FA3 on the H200, session 22);
# decode_pack.sh without bench_mixed (K / K-p1 paired vs one head under sm2 / graph / det, fp8, verify d64).
# Not in it: the full GPU suite and racecheck (a second call: gpu_check.sh tests + racecheck_sites.sh).
cd "$(dirname "$0")/../.."; OUT=${OUT:-/tmp/mixed_attn_out}; mkdir -p $OUT
# Build, the touched tests and memcheck through gpu_check.sh's own steps (logs: build.log, tests.log, sanitize.log).
PYTEST_ARGS="tests/test_cuda_extend.py::test_out_views_give_a_contiguous_outs_bits tests/test_verify_rows.py tests/test_graph_mode.py tests/test_cuda_extend.py::test_features" \
  TEST_TIMEOUT=170 SANITIZE_TIMEOUT=70 bash scripts/gpu_check.sh build,tests,sanitize
ls python/mixed_attn/_C*.so >/dev/null 2>&1 || exit 1
export PYTHONPATH=$PWD/.peers:$PWD/python FLASHINFER_WORKSPACE_BASE=$HOME/fi_ws MAX_JOBS=16 PYTHONUNBUFFERED=1
timeout 80 python3 benchmarks/bench_extend.py --cases P-512,B --kernels auto,fa3 2>&1 | grep -v -i triton > $OUT/extend.log; grep -E "^\||ceil|matmul" $OUT/extend.log | tail -8
MIXED=0 SKIP_BUILD=1 bash tools/pending/decode_pack.sh
