#!/usr/bin/env bash
# Issue 13, one device call (~5 minutes warm): where the sm_90a extend's time goes, by lab builds that
# leave a part of the producer's work out (tools/pending/sm90_lab_leave_out.patch; the results are
# wrong where a part is left out: timing only). Prints bench_extend.run_case times for each build.
#   git apply tools/pending/sm90_lab_leave_out.patch   (here, before the call; revert after)
#   run: bash tools/pending/leave_out.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
export MIXED_ATTN_CUDA_ARCHS=90a PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/python NINJA_JOBS=16
for v in "" "-DMA_LAB_NO_KV_COPY" "-DMA_LAB_FP8_NO_WIDEN" "-DMA_LAB_FP8_NO_COPY" \
         "-DMA_LAB_FP8_NO_WIDEN -DMA_LAB_FP8_NO_COPY"; do
  bash scripts/build_inplace.sh -DMIXED_ATTN_HEAD_DIMS=128 "-DCMAKE_CUDA_FLAGS=$v" >/dev/null 2>&1 || { tail -20 build.log; exit 1; }
  echo "== build flags: ${v:-none}"
  python3 - <<'PY'
import os, sys
sys.path.insert(0, os.path.join(os.getcwd(), "benchmarks"))
import bench_extend as be
lib = be.OpExtend()
for name in ("B", "D", "B-p1"):
    for fp8 in (False, True):
        ms, tf, *_ = be.run_case(lib, name, *be.CASES[name], fp8=fp8, kernel="auto")
        print(f"{name:5s} fp8={int(fp8)} {ms:.3f} ms {tf:6.1f} TFLOP/s", flush=True)
PY
done
