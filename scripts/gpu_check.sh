#!/usr/bin/env bash
# One device call on the GPU machine: build in place, run the GPU tests, a compute-sanitizer
# subset and the benchmarks, writing every log under $OUT. Usage:
#   bash scripts/gpu_check.sh [STEPS]      STEPS: comma list of build,tests,sanitize,racecheck,
#                                          bench,decode_bench,extend_bench,graph_bench,plan_bench,
#                                          extend_sweep,replay,transformers
#                                          (default: build,tests,sanitize,bench,replay)
# PYTEST_ARGS narrows the tests (e.g. "-k decode"; default: all but the source-compile tests, which
# CI runs and which take a minute of device time); BENCH_ARGS is passed to bench_mixed.py;
# TF_BENCH_ARGS is passed to bench_transformers.py (the transformers generate_batch benchmark);
# SWEEP_VARIANTS names the extend_sweep variants (default s0,w3; see tools/sweep_extend.py).
# The full suite takes about 3.5 minutes on the H200 (TEST_TIMEOUT, default 400 s).
# MIXED_ATTN_COMMIT names the commit in the benchmark tables (.git does not travel); unset, it is
# read from .device_commit (run scripts/device_commit.sh here first and carry that file along).
set -uo pipefail
cd "$(dirname "$0")/.."
if [ -z "${MIXED_ATTN_COMMIT:-}" ] && [ -f .device_commit ]; then
  export MIXED_ATTN_COMMIT="$(cat .device_commit)"
fi
OUT=${OUT:-/tmp/mixed_attn_out}
mkdir -p "$OUT"
STEPS=${1:-build,tests,sanitize,bench,replay}
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD/python" TORCH_CUDA_ARCH_LIST="9.0a"
# FlashInfer for the benchmarks' peer rows, when the call carries it as .peers
# (../shared/peers/README.md); its JIT cache goes to FLASHINFER_WORKSPACE_BASE.
if [ -d .peers/flashinfer ]; then
  export PYTHONPATH="$PWD/.peers:$PYTHONPATH" FLASHINFER_WORKSPACE_BASE=${FLASHINFER_WORKSPACE_BASE:-$HOME/fi_ws}
  export MAX_JOBS=${MAX_JOBS:-16}
fi
# The H200 needs sm_90a only; the default arch list (six archs) would build six times as long.
export MIXED_ATTN_CUDA_ARCHS=${MIXED_ATTN_CUDA_ARCHS:-90a}
has() { [[ ",$STEPS," == *",$1,"* ]]; }
status=0

if has build; then
  nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > "$OUT/gpu.txt" 2>&1
  start=$(date +%s)
  NINJA_JOBS=${NINJA_JOBS:-16} bash scripts/build_inplace.sh > "$OUT/build.log" 2>&1 || {
    cp build.log "$OUT/build_full.log" 2>/dev/null; tail -40 "$OUT/build.log"; exit 1; }
  echo "build: $(( $(date +%s) - start )) s"
fi
if has tests; then
  timeout ${TEST_TIMEOUT:-400} python3 -m pytest -q -p no:cacheprovider tests \
    ${PYTEST_ARGS:---ignore=tests/test_gpu_sources_compile.py} \
    > "$OUT/tests.log" 2>&1 || status=1
  tail -15 "$OUT/tests.log"
fi
# The sanitizer steps read the tests' results through compute-sanitizer's exit code only: without
# a build in place every test fails to import and the summary says "0 errors" (session 21).
if { has sanitize || has racecheck; } && ! ls python/mixed_attn/_C*.so >/dev/null 2>&1; then
  echo "sanitize/racecheck: no python/mixed_attn/_C*.so (add the build step)"; exit 1
fi
if has sanitize; then
  timeout ${SANITIZE_TIMEOUT:-180} compute-sanitizer --tool memcheck --error-exitcode 9 python3 -m pytest -q -x \
    -p no:cacheprovider tests -k "sanitize" > "$OUT/sanitize.log" 2>&1 || status=1
  grep -E "ERROR SUMMARY|passed|failed" "$OUT/sanitize.log" | tail -5
fi
if has racecheck; then
  timeout ${SANITIZE_TIMEOUT:-180} compute-sanitizer --tool racecheck --error-exitcode 9 python3 -m pytest -q -x \
    -p no:cacheprovider tests -k "sanitize" > "$OUT/racecheck.log" 2>&1 || status=1
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" "$OUT/racecheck.log" | tail -5
fi
if has bench && [ -f benchmarks/bench_mixed.py ]; then
  timeout ${BENCH_TIMEOUT:-300} python3 benchmarks/bench_mixed.py ${BENCH_ARGS:-} \
    --json "$OUT/bench.json" --markdown "$OUT/bench.md" --png "$OUT/bench.png" \
    > "$OUT/bench.log" 2>&1 || status=1
  tail -40 "$OUT/bench.log"
fi
for kernel in decode extend graph; do
  if has "${kernel}_bench" && [ -f "benchmarks/bench_${kernel}.py" ]; then
    args_var="${kernel^^}_BENCH_ARGS"  # DECODE_BENCH_ARGS / EXTEND_BENCH_ARGS
    timeout 240 python3 "benchmarks/bench_${kernel}.py" ${!args_var:-} \
      > "$OUT/bench_${kernel}.log" 2>&1 || status=1
    tail -25 "$OUT/bench_${kernel}.log"
  fi
done
if has plan_bench && [ -f benchmarks/bench_plan_host.py ]; then
  # MixedAttention.plan() host cost per step (issue 12: <= 10 us at 1 and 256 rows), with its parts;
  # then the same on a CPU wrapper of this host (no copy, no event: the difference is their cost).
  for dev in cuda cpu; do
    timeout ${PLAN_BENCH_TIMEOUT:-240} python3 benchmarks/bench_plan_host.py --device $dev --breakdown \
      ${PLAN_BENCH_ARGS:-} --markdown "$OUT/bench_plan_host_$dev.md" > "$OUT/bench_plan_host_$dev.log" 2>&1 \
      || status=1
    cat "$OUT/bench_plan_host_$dev.log"
  done
fi
if has extend_sweep; then
  # Needs the extension built (the test module imports mixed_attn).
  mkdir -p "$OUT/sweep"
  timeout ${SWEEP_TIMEOUT:-300} python3 tools/sweep_extend.py "$OUT/sweep" ${SWEEP_VARIANTS:-s0,w3} \
    > "$OUT/sweep.log" 2>&1 || status=1
  grep -E "====|tests:| auto | mma " "$OUT/sweep.log" | head -40
fi
if has replay && [ -f benchmarks/serve_replay.py ]; then
  timeout ${REPLAY_TIMEOUT:-150} python3 benchmarks/serve_replay.py ${REPLAY_ARGS:-} \
    --markdown "$OUT/replay.md" > "$OUT/replay.log" 2>&1 || status=1
  tail -20 "$OUT/replay.log"
fi
if has transformers && [ -f benchmarks/bench_transformers.py ]; then
  # generate_batch of a random-weight 2.3B Llama-style model: paged|mixed_attn vs paged|sdpa,
  # served tokens/s, TTFT and the bf16 token-identity check, as markdown.
  timeout ${TF_TIMEOUT:-480} python3 benchmarks/bench_transformers.py ${TF_BENCH_ARGS:-} \
    --markdown "$OUT/bench_transformers.md" --json "$OUT/bench_transformers.json" \
    > "$OUT/bench_transformers.log" 2>&1 || status=1
  grep -v -i "warn" "$OUT/bench_transformers.log" | tail -30
fi
exit $status
