#!/usr/bin/env bash
# Issue 13, one device call (~7 minutes warm): where the bf16 sm_90a extend loses to FA3. Lab
# builds at head dim 128 (HEAD_DIMS another list, e.g. 256 with CASES=B-d256,D-d256), each timed
# on CASES (default B, D, B-p1) with bench_extend.run_case; the first build also times FlashInfer's
# FA3 rows in the same process when .peers is carried. Lab flags need their patch applied here
# first (tools/pending/README.md; off by default). VARIANTS overrides the list (';'-separated flag
# sets; "none" = the default build).
set -uo pipefail
cd "$(dirname "$0")/../.."
export MIXED_ATTN_CUDA_ARCHS=90a PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/python NINJA_JOBS=16
if [ -d .peers/flashinfer ]; then
  export PYTHONPATH="$PWD/.peers:$PYTHONPATH" FLASHINFER_WORKSPACE_BASE=$HOME/fi_ws MAX_JOBS=16
fi
VARIANTS=${VARIANTS:-"none;-DMA_LAB_NO_KV_COPY;-DMA_SM90_D128_BN=64 -DMA_SM90_D128_ST=4;-DMA_SM90_D128_WGS=2;-DMA_SM90_D128_WGS=2 -DMA_SM90_D128_BN=64 -DMA_SM90_D128_ST=4"}
CASES=${CASES:-B,D,B-p1}
first=1
IFS=';' read -ra list <<<"$VARIANTS"
for v in "${list[@]}"; do
  [ "$v" = none ] && v=""
  start=$(date +%s)
  # The planner cuts tiles by launch_policy.h's MA_SM90_D*_WGS: the C++ side gets the same flags.
  bash scripts/build_inplace.sh -DMIXED_ATTN_HEAD_DIMS=${HEAD_DIMS:-128} "-DCMAKE_CUDA_FLAGS=$v" "-DCMAKE_CXX_FLAGS=$v" \
    >/dev/null 2>&1 || { tail -20 build.log; exit 1; }
  echo "== build flags: ${v:-none} ($(( $(date +%s) - start )) s)"
  FIRST=$first CASES=$CASES BUILD_FLAGS="$v" python3 - <<'PY'
import os, sys
sys.path.insert(0, os.path.join(os.getcwd(), "benchmarks"))
import bench_extend as be
lib = be.OpExtend()
# A build without the TMA path needs plans without TMA (bench_extend's cp kernel: extend_tma=0).
kernels = ["cp" if "-DMA_SM90_TMA=0" in os.environ["BUILD_FLAGS"] else "auto"]
if os.environ["FIRST"] == "1":
    print(f"bf16 matmul {be.matmul_tflops():.1f} TFLOP/s", flush=True)
    if kernels == ["auto"]:
        kernels.append("tma")  # the same build with TMA copies (on request only since session 17)
    try:  # the carried .peers copy (the machine's own `flashinfer` module has no such wrapper)
        import flashinfer
        if hasattr(flashinfer, "BatchPrefillWithPagedKVCacheWrapper"):
            kernels.append("fa3")
    except ImportError:
        pass
for name in os.environ["CASES"].split(","):
    ext, prefix, hq, hkv, d, *page = be.CASES[name]
    for k in kernels:
        ms, tf, *_ = be.run_case(lib, name, ext, prefix, hq, hkv, d, page_size=page[0] if page else 16, kernel=k)
        print(f"{name:6s} {k:5s} {ms:.3f} ms {tf:6.1f} TFLOP/s", flush=True)
PY
  first=0
done
