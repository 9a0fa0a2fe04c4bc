#!/usr/bin/env bash
# CI, compile only (no GPU, no CUDA or ROCm torch needed): builds every GPU source
# (csrc/cuda/**/*.cu) through CMakeLists.txt's own arch block, MIXED_ATTN_KERNELS_ONLY=ON, so the
# arch list, the per-arch guards and the glob the wheel build uses are what is checked.
#   cuda: the default wheel arch list (80;86;89;90a;100;120 + PTX of 120 with CUDA >= 12.8), or
#         MIXED_ATTN_CUDA_ARCHS; then, from ptxas' resource usage, for every arch built:
#         the mma.sync extend kernel and the decode kernels have real bodies, and the sm_90a
#         warp-specialised extend kernel has one on sm_90a only (empty elsewhere, as
#         MA_EXTEND_HAS_WGMMA intends).
#   hip:  the same sources as HIP through CMake's HIP language, for gfx90a and gfx942 (gfx940
#         where the toolchain predates gfx942, as Debian's ROCm 5.2 clang 15 does); skipped,
#         saying so, without hipcc / clang / ROCm's CMake packages.
# Usage: bash scripts/check_gpu_build.sh [cuda,hip]   (JOBS, default 2; BUILD_DIR, default build/check)
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-cuda,hip}
JOBS=${JOBS:-2}
BUILD_DIR=${BUILD_DIR:-build/check}
PY=${PYTHON:-python3}
CMAKE=${CMAKE:-$(command -v cmake || echo .venv/bin/cmake)}
NINJA=${NINJA:-$(command -v ninja || echo .venv/bin/ninja)}
# Absolute: CMake runs the make program from its scratch folders too.
CMAKE=$(realpath "$CMAKE"); NINJA=$(realpath "$NINJA")
has() { [[ ",$STEPS," == *",$1,"* ]]; }
status=0
mkdir -p "$BUILD_DIR"

if has cuda; then
  NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  if [ ! -x "$NVCC" ]; then
    echo "check_gpu_build cuda: SKIPPED (no nvcc)"
  else
    start=$(date +%s)
    rm -rf "$BUILD_DIR/cuda"
    "$CMAKE" -S . -B "$BUILD_DIR/cuda" -G Ninja -DCMAKE_MAKE_PROGRAM="$NINJA" \
      -DMIXED_ATTN_KERNELS_ONLY=ON -DMIXED_ATTN_GPU_BACKEND=CUDA -DCMAKE_CUDA_COMPILER="$NVCC" \
      -DMIXED_ATTN_CUDA_ARCHS="${MIXED_ATTN_CUDA_ARCHS:-}" -DCMAKE_CUDA_FLAGS=--resource-usage \
      > "$BUILD_DIR/cuda.configure.log" 2>&1 || { cat "$BUILD_DIR/cuda.configure.log"; exit 1; }
    grep "mixed_attn CUDA archs" "$BUILD_DIR/cuda.configure.log"
    "$NINJA" -C "$BUILD_DIR/cuda" -j"$JOBS" > "$BUILD_DIR/cuda.build.log" 2>&1 || {
      tail -60 "$BUILD_DIR/cuda.build.log"; exit 1; }
    echo "check_gpu_build cuda: compiled $(ls "$BUILD_DIR"/cuda/CMakeFiles/mixed_attn_kernels.dir/csrc/cuda/*.o \
      "$BUILD_DIR"/cuda/CMakeFiles/mixed_attn_kernels.dir/csrc/cuda/**/*.o 2>/dev/null | wc -l) sources" \
      "in $(( $(date +%s) - start )) s"
    "$PY" - "$BUILD_DIR/cuda.build.log" "$BUILD_DIR/cuda.configure.log" <<'EOF' || status=1
import re, sys
log, conf = open(sys.argv[1]).read(), open(sys.argv[2]).read()
archs = re.search(r"mixed_attn CUDA archs \(nvcc [^)]*\): (\S+);", conf).group(1).split(";")
want = {"sm_" + a.split("-")[0] for a in archs if not a.endswith("-virtual")}
regs, cur = {}, None  # (kernel family, sm) -> [registers of each instance]
for line in log.splitlines():
    m = re.search(r"Compiling entry function '(\S+)' for '(sm_\w+)'", line)
    if m:
        name = m.group(1)
        fam = ("extend_sm90" if "extend_sm90_kernel" in name else
               "extend_mma" if "extend_kernel" in name else
               "decode" if "decode" in name else "other")
        cur = (fam, m.group(2))
        continue
    m = re.search(r"Used (\d+) registers", line)
    if m and cur:
        regs.setdefault(cur, []).append(int(m.group(1)))
        cur = None
bad = []
for sm in sorted(want):
    row = {fam: regs.get((fam, sm), []) for fam in ("extend_mma", "extend_sm90", "decode")}
    print(f"  {sm:7s} " + "  ".join(f"{fam}: {len(r)} kernels, regs {min(r) if r else '-'}-{max(r) if r else '-'}"
                                    for fam, r in row.items()))
    # A real attention kernel needs far more than a handful of registers; an empty body
    # (a guard that compiled the code out) uses <= 8.
    if not row["extend_mma"] or min(row["extend_mma"]) <= 16:
        bad.append(f"{sm}: the mma.sync extend kernel is missing or empty")
    if not row["decode"] or max(row["decode"]) <= 16:
        bad.append(f"{sm}: the decode kernels are missing or empty")
    sm90 = row["extend_sm90"]
    if sm == "sm_90a" and (not sm90 or min(sm90) <= 16):
        bad.append("sm_90a: the warp-specialised extend kernel is missing or empty")
    if sm != "sm_90a" and sm90 and max(sm90) > 16:
        bad.append(f"{sm}: the sm_90a-only extend kernel has a body ({max(sm90)} registers)")
for b in bad:
    print("FAIL", b)
print("check_gpu_build cuda: per-arch kernel bodies", "FAILED" if bad else "ok")
sys.exit(1 if bad else 0)
EOF
  fi
fi

if has hip; then
  HIP_CLANG=${HIP_CLANG:-}
  if [ -z "$HIP_CLANG" ]; then
    for c in /opt/rocm/llvm/bin/clang++ /usr/lib/llvm-*/bin/clang++; do
      [ -x "$c" ] && HIP_CLANG=$c && break
    done
  fi
  if ! command -v hipcc >/dev/null 2>&1 || [ -z "$HIP_CLANG" ]; then
    echo "check_gpu_build hip: SKIPPED (no hipcc / HIP clang)"
  else
    # Debian's ROCm keeps its files under /usr rather than /opt/rocm: tell clang and CMake.
    hip_flags=""
    if [ ! -d /opt/rocm ] && [ -d /usr/lib/x86_64-linux-gnu/amdgcn/bitcode ]; then
      # --hip-version as hipcc passes it: without it clang 15 misreads the version as 3.5 and
      # leaves out its HIP runtime wrapper header (__host__, __device__, ...).
      hip_ver=$(hipcc --version 2>/dev/null | sed -n 's/^HIP version: \([0-9.]*\).*/\1/p')
      hip_flags="--rocm-path=/usr --rocm-device-lib-path=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode"
      hip_flags+="${hip_ver:+ --hip-version=$hip_ver}"
      export amd_comgr_ROOT=${amd_comgr_ROOT:-/usr/lib/x86_64-linux-gnu/cmake/amd_comgr}
    fi
    echo '__global__ void k() {}' > "$BUILD_DIR/probe.hip"
    archs="gfx90a;gfx942"
    if ! HIP_PLATFORM=amd hipcc -x hip --offload-arch=gfx942 --cuda-device-only -c "$BUILD_DIR/probe.hip" \
         -o /dev/null >/dev/null 2>&1; then
      archs="gfx90a;gfx940"
      echo "check_gpu_build hip: this toolchain has no gfx942: building gfx940 (same CDNA3 ISA) instead"
    fi
    start=$(date +%s)
    rm -rf "$BUILD_DIR/hip"
    if HIP_PLATFORM=amd "$CMAKE" -S . -B "$BUILD_DIR/hip" -G Ninja -DCMAKE_MAKE_PROGRAM="$NINJA" \
         -DMIXED_ATTN_KERNELS_ONLY=ON -DMIXED_ATTN_GPU_BACKEND=HIP -DMIXED_ATTN_HIP_ARCHS="$archs" \
         -DCMAKE_HIP_COMPILER="$HIP_CLANG" -DCMAKE_HIP_FLAGS="$hip_flags" \
         > "$BUILD_DIR/hip.configure.log" 2>&1; then
      grep "mixed_attn HIP archs" "$BUILD_DIR/hip.configure.log"
      "$NINJA" -C "$BUILD_DIR/hip" -j"$JOBS" > "$BUILD_DIR/hip.build.log" 2>&1 || {
        tail -60 "$BUILD_DIR/hip.build.log"; status=1; }
      echo "check_gpu_build hip: $( [ $status = 0 ] && echo ok || echo FAILED ) in $(( $(date +%s) - start )) s"
    else
      tail -30 "$BUILD_DIR/hip.configure.log"
      echo "check_gpu_build hip: SKIPPED (CMake's HIP language is not usable with this ROCm install)"
    fi
  fi
fi
exit $status
