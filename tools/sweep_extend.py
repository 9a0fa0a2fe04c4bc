"""Builds several tile shapes of the extend kernel and, for each, runs the tests and the benchmark.

Used to choose the defaults of ExtendTraits (csrc/cuda/extend/portable/kernel.cuh) in one device call:
  python3 tools/sweep_extend.py OUT_DIR [v0,w1,...]   (about 30 s per variant after the build)
Run it after scripts/build_inplace.sh: the test module imports mixed_attn, which needs _C.so.
Each variant is a set of -DMA_EXTEND_D{64,128,256}_{W,MT,BN,ST,QR} flags (warps, m16 tiles per
warp, keys per K/V tile, pipeline stages, Q in registers). The in-loop wgmma variants (pw1, WG),
the per-key TMA boxes (k0) and the diagnostic probes (x1, x2) left the kernels; their numbers
stay in benchmarks/RESULTS.md and the history below.

Measured on an H200 (2026-11-30, one call, median ms of one extend row, bf16, page 16;
B = 4096 new over 4096, D = 1024 new over 16384, Hq/Hkv 32/8; matmul 686-708 TFLOP/s):
  variant  B d128  D d128  B d64  D d64  B d256  D d256   tests
  v0       1.876   1.291   1.141  0.805  2.161   1.533    87 passed  (v0 = the defaults then)
  v1       1.989   1.354   1.100  0.786  2.690   1.898    87 passed
  v2       1.860   1.274   0.973  0.684  2.175   1.543    87 passed  -> head dim 64 default
  w1/w2/w3 (wgmma, first version) failed the tests: ptxas reused the registers of Q (kept
           live across the K/V loop as wgmma A operands) for P; Q now goes through shared
           memory (WgmmaSS). Their times (1.87 / 1.26 ms on B / D at d128) matched v0, so the
           plain wgmma swap alone does not buy speed: the loop is bound elsewhere (softmax,
           the barrier per tile, page-id loads on the critical path: see p0).
Second call (same day): p0 (page ids read a tile ahead) 1.604 / 1.086 ms on B / D at d128, 0.833 /
0.578 at d64, 1.930 / 1.355 at d256, tests passed -> now the default; pw1 (wgmma in the mma.sync
loop, Q in shared memory) passed the tests: 1.678 / 1.133 at d128, 1.608 / 1.123 at d256.
The s* variants time the warp-specialised sm_90a kernel (csrc/cuda/extend/sm90/, shapes in traits.cuh).
"""

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from extend_shim import build_library  # noqa: E402


def shape_flags(d, w, mt, bn, st, qr):
    return [f"-DMA_EXTEND_D{d}_W={w}", f"-DMA_EXTEND_D{d}_MT={mt}", f"-DMA_EXTEND_D{d}_BN={bn}",
            f"-DMA_EXTEND_D{d}_ST={st}", f"-DMA_EXTEND_D{d}_QR={qr}"]


VARIANTS = {
    # mma.sync kernel shapes (extend/portable/kernel.cuh); page-id prefetch is on by default since p0.
    "v0": {},  # the defaults
    "v1": {64: (4, 2, 32, 3, 0), 128: (4, 2, 32, 3, 0), 256: (4, 1, 32, 2, 0)},
    "v2": {64: (4, 2, 64, 3, 0), 128: (4, 2, 64, 2, 0), 256: (8, 1, 32, 3, 0)},
    # warp-specialised sm_90a kernel (extend/sm90/traits.cuh): keys per tile and ring slots per head dim.
    "s0": {},  # its defaults (the same build as v0: launch_extend picks it for b16 caches)
    "s1": {"extra": ["-DMA_SM90_SWIZZLE=1"]},  # 128-byte-swizzled tiles, whole rows per warp copy
    "s2": {"extra": ["-DMA_SM90_OVERLAP=0"]},  # one GEMM at a time in each warpgroup
    "s3": {"extra": ["-DMA_SM90_D64_ST=2", "-DMA_SM90_D128_BN=64", "-DMA_SM90_D128_ST=4"]},
    # three consumer warpgroups (192 query rows per CTA) at head dims 64 and 128 (the default
    # since 2026-11-30: B 1.351 -> 1.047 ms, 45.5% -> 58.6% of the matmul rate) / two
    "w3": {"extra": ["-DMA_SM90_D64_WGS=3", "-DMA_SM90_D128_WGS=3"]},
    "w2": {"extra": ["-DMA_SM90_D64_WGS=2", "-DMA_SM90_D128_WGS=2"]},
    # K/V tiles inside the attended range by TMA (page size a multiple of 16), swizzled layout
    "t0": {"extra": ["-DMA_SM90_TMA=0"]},  # cp.async only (the default before TMA)
}
# bench_extend.py --kernels per variant: mma.sync variants time the mma kernel, sm90 ones the default.
KERNELS = {"v": "mma", "p": "mma", "s": "auto", "w": "auto", "t": "auto", "k": "auto", "x": "auto"}




def main():
    out = sys.argv[1]
    names = sys.argv[2].split(",") if len(sys.argv) > 2 else list(VARIANTS)

    def build(name):
        v = VARIANTS[name]
        flags = [f for d, shape in v.items() if d != "extra" for f in shape_flags(d, *shape)]
        flags += v.get("extra", [])
        try:
            return name, build_library(f"/tmp/sweep_{name}", extra_flags=flags), ""
        except Exception as e:  # noqa: BLE001
            return name, None, str(e)[-3000:]

    with ThreadPoolExecutor(len(names)) as ex:
        libs = list(ex.map(build, names))
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    for name, lib, err in libs:
        print(f"==== {name} {VARIANTS[name]}", flush=True)
        if lib is None:
            print("BUILD FAILED\n" + err, flush=True)
            continue
        env["MA_EXTEND_LIB"] = lib
        # Tests first (a variant that fails them, or hangs, is not timed); probes skip them.
        try:
            if name.startswith("x"):
                raise StopIteration
            r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                                os.path.join(ROOT, "tests/test_cuda_extend.py")], env=env, timeout=90,
                               capture_output=True, text=True)
            log, summary = f"{r.stdout}\n{r.stderr}", (r.stdout.strip().splitlines() or [r.stderr[-500:]])[-1]
            passed = r.returncode == 0
        except subprocess.TimeoutExpired as e:
            log, summary, passed = str(e.stdout), "TIMED OUT after 90 s (hang?)", False
        except StopIteration:
            log, summary, passed = "", "skipped (diagnostic build)", True
        with open(os.path.join(out, "tests.log"), "a") as f:
            f.write(f"==== {name}\n{log}\n")
        print("tests:", summary, flush=True)
        if not passed:
            continue
        kernels = "auto,mma,triton" if name == "s0" and not os.environ.get("SWEEP_CASES") else KERNELS[name[0]]
        try:
            cmd = [sys.executable, os.path.join(ROOT, "benchmarks/bench_extend.py"), "--kernels", kernels]
            if os.environ.get("SWEEP_CASES"):  # e.g. B,D: a shorter run
                cmd += ["--cases", os.environ["SWEEP_CASES"]]
            elif name == "s0":
                cmd += ["--fp8"]
            subprocess.run(cmd + ["--json", os.path.join(out, f"sweep_{name}.json")], env=env, timeout=180)
        except subprocess.TimeoutExpired:
            print("bench TIMED OUT", flush=True)

if __name__ == "__main__":
    main()
