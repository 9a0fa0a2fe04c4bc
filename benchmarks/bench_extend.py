"""Micro-benchmark of the CUDA extend kernel against the bf16 matmul rate.

Method: one process; the ceiling is a bf16 8192^3 torch.matmul on random data,
timed the same way in the same run. Each case: one extend row (pages of 16, or 1 for -p1 cases,
scattered at random over a pool of 64 spare pages, random bf16 data: mixed_attn.testing.make_batch
on the GPU), the plan made
once by the real planner, then the kernel alone timed with
triton.testing.do_bench (median, warm-up first) when triton is there, else
CUDA events over 50 launches after 10 warm-up launches.
Two more columns tell a launch-bound time from a kernel-bound one (small cases: P-512 runs in
~25 us, about what a host call of the op costs): "host us", the host's time per call with the GPU
never waited for (200 calls queued back to back), and "kern ms", the GPU time of the call's
kernels from torch.profiler (their summed durations over 20 calls, so launch gaps are out).
Where host us is near ms, the do_bench time is the host's.
FLOPs = 4 * D * Hq * (query, key) pairs attended (causal, no window).
Prints TFLOP/s and the fraction of the matmul rate per case and kernel:
  auto   what launch_extend picks: the warp-specialised sm_90a kernel
         (csrc/cuda/extend/sm90/kernel.cuh) on an H100/H200 build with 90a, else mma.sync;
  s1, s2 the sm_90a kernel with MIXED_ATTN_EXTEND_KV_SPLITS=1 / 2 (auto: the split policy);
  np     the sm_90a kernel with extend_persistent=0: one CTA per (tile, head group) item where
         auto's unsplit launches are persistent (about one CTA per SM serving a share of the items);
  nc     the sm_90a kernel with extend_item_parts=1: the policy without cut items (auto may run
         a persistent launch's costliest items in parts, merged through the arena);
  c2, c3, c4 the sm_90a kernel with every item of a persistent launch in 2 / 3 / 4 parts;
  r128, r192 the sm_90a kernel's 128-row / 192-row shape at head dim 128 (extend_block_rows; auto
         takes 128 rows per step where its estimate finds them faster);
  cp     the sm_90a kernel with extend_tma=0: K/V tiles by cp.async only (auto takes TMA boxes for
         interior tiles of pages of 16 at head dims 128 and 256);
  qcp    the sm_90a kernel with extend_q_tma=0: Q tiles by the producer's 16-byte cp.async copies
         (auto copies a Q tile whose every row is a query by TMA);
  mma    MIXED_ATTN_EXTEND_KERNEL=mma: the portable mma.sync kernel (extend/portable/kernel.cuh);
  triton the Triton oracle's extend (python/mixed_attn/triton_ref.py) on a plan with the
         mma.sync kernel's 128-row tiles (it covers a tile with blocks of at most 128 rows:
         the sm_90a kernel's 192-row tiles would give it a half-empty second block),
         with its time as a ratio to the first kernel's ("triton / auto");
  fa3, fa2 FlashInfer's BatchPrefillWithPagedKVCacheWrapper (backend "fa3" / "fa2") on the same
         batch (same pages, same q), when flashinfer is importable (../shared/peers/README.md):
         the peer the extend half is measured against (issue 13).

The kernel runs through torch.ops.mixed_attn (mixed_attn.testing.OpExtend). Lab path only: with
MA_EXTEND_LIB naming a variant library built by tools/extend_shim.py (tools/sweep_extend.py),
through that library instead.
"""

import argparse
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
from mixed_attn.testing import OpExtend, make_batch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import kernel_us, last_page_lens  # noqa: E402

# name: (new tokens, prefix, Hq, Hkv, D)
CASES = {
    "B": (4096, 4096, 32, 8, 128),
    "D": (1024, 16384, 32, 8, 128),
    "B-d64": (4096, 4096, 32, 8, 64),
    "D-d64": (1024, 16384, 32, 8, 64),
    "B-d256": (4096, 4096, 16, 8, 256),
    "D-d256": (1024, 16384, 16, 8, 256),
    "P": (2048, 0, 32, 8, 128),  # a prefill chunk over no prefix (short tiles)
    "P-512": (512, 0, 32, 8, 128),
    # page size 1 (sglang's default): keys one by one (per-key TMA boxes or cp.async)
    "B-p1": (4096, 4096, 32, 8, 128, 1),
    "B-d64-p1": (4096, 4096, 32, 8, 64, 1),
}



def bench_ms(fn):
    try:
        import triton.testing

        return triton.testing.do_bench(fn, warmup=100, rep=400, return_mode="median")
    except ImportError:
        for _ in range(10):
            fn()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times = []
        for _ in range(50):
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        return sorted(times)[len(times) // 2]


def host_us(fn, n=200):
    """Host time per call, the GPU never waited for (the queue holds far more than n launches)."""
    import time

    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(n):
        fn()
    took = time.perf_counter() - start
    torch.cuda.synchronize()
    return took / n * 1e6


def matmul_tflops(n=8192):
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    ms = bench_ms(lambda: a @ b)
    return 2 * n**3 / ms / 1e9


def flashinfer_extend(b, backend, page_size, hq, hkv, d, q_dtype, kv_dtype):
    """FlashInfer's paged prefill over the same extend row: a callable that runs it."""
    import flashinfer

    dev = b.q.device
    last = last_page_lens(b.kv_indptr, b.seq_lens, page_size).to(dev)
    ws = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
    w = flashinfer.BatchPrefillWithPagedKVCacheWrapper(ws, "NHD", backend=backend)
    w.plan(b.qo_indptr.to(dev), b.kv_indptr.to(dev), b.kv_indices.to(dev), last, hq, hkv, d, page_size, causal=True,
           q_data_type=q_dtype, kv_data_type=kv_dtype)
    out = torch.empty_like(b.q)
    return lambda: w.run(b.q, (b.k_cache, b.v_cache), out=out)


def case_fn(lib, ext, prefix, hq, hkv, d, page_size=16, q_dtype=torch.bfloat16, fp8=False, kernel="auto"):
    """A callable that runs `kernel` once on the case's batch (made here, on the GPU)."""
    kv_dtype = torch.float8_e4m3fn if fp8 else q_dtype
    b = make_batch([ext], [prefix], hq, hkv, d, page_size, dtype=q_dtype, kv_dtype=kv_dtype, device="cuda",
                   seed=0, spare_pages=64)
    q, k_cache, v_cache, kv_indices = b.q, b.k_cache, b.v_cache, b.kv_indices
    out = torch.empty_like(q)
    # The kernel choice goes into the plan: its tile size follows the kernel that will run (192
    # query rows on the sm_90a kernel at head dims 64/128, 128 on the mma.sync one).
    request = {}
    if kernel in ("mma", "triton"):  # triton: on the 128-row tiles it is tuned for
        request = {"extend_kernel": 1}
    elif kernel in ("s1", "s2"):
        request = {"extend_kv_splits": int(kernel[1])}
    elif kernel == "np":
        request = {"extend_persistent": 0}
    elif kernel == "nc":  # the policy without cut items (extend_item_parts=1)
        request = {"extend_item_parts": 1}
    elif kernel in ("c2", "c3", "c4"):  # every item of a persistent launch in 2 / 3 / 4 parts
        request = {"extend_item_parts": int(kernel[1])}
    elif kernel in ("r128", "r192"):
        request = {"extend_block_rows": int(kernel[1:])}
    elif kernel == "cp":
        request = {"extend_tma": 0}
    elif kernel == "qcp":  # Q by cp.async (the policy: by TMA where every row is a query)
        request = {"extend_q_tma": 0}
    elif kernel == "tma":  # on request only (the policy copies K/V by cp.async)
        request = {"extend_tma": 1}
    if kernel in ("fa3", "fa2"):
        fn = flashinfer_extend(b, kernel, page_size, hq, hkv, d, q_dtype, kv_dtype)
    else:
        info, meta = lib.plan(b.qo_indptr, b.kv_indptr, b.seq_lens, page_size, hq, hkv, d, kv_fp8=fp8,
                              **request)
        if kernel == "triton":
            from mixed_attn.triton_ref import triton_extend

            fn = lambda: triton_extend(q, k_cache, v_cache, kv_indices, meta, info, out)  # noqa: E731
        else:
            fn = lambda: lib.run(info, meta, q, k_cache, v_cache, kv_indices, out)  # noqa: E731
    return fn


def run_case(lib, name, ext, prefix, hq, hkv, d, page_size=16, q_dtype=torch.bfloat16, fp8=False,
             kernel="auto"):
    fn = case_fn(lib, ext, prefix, hq, hkv, d, page_size, q_dtype, fp8, kernel)
    fn()
    torch.cuda.synchronize()
    ms = bench_ms(fn)
    pairs = sum(prefix + i + 1 for i in range(ext))
    flops = 4 * d * hq * pairs
    return ms, flops / ms / 1e9, host_us(fn), sum(kernel_us(fn).values()) / 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--fp8", action="store_true", help="also time the fp8-cache variant of each case")
    ap.add_argument("--json", default=None, help="write the rows here as JSON")
    ap.add_argument("--kernels", default="auto,mma,triton",
                    help="comma list of auto, s1, s2, np, nc, c2-c4, r128, r192, cp, tma, mma, triton, fa3, fa2")
    args = ap.parse_args()
    kernels = args.kernels.split(",")
    if os.environ.get("MA_EXTEND_LIB"):  # lab path: a variant library built by tools/extend_shim.py
        sys.path.insert(0, os.path.join(ROOT, "tools"))
        from extend_shim import ExtendLib

        lib = ExtendLib(os.environ["MA_EXTEND_LIB"])
    else:
        lib = OpExtend()
    props = torch.cuda.get_device_properties(0)
    mm = matmul_tflops()
    print(f"device: {props.name}, {props.multi_processor_count} SMs; bf16 8192^3 matmul {mm:.1f} TFLOP/s")
    rows = []
    for name in args.cases.split(","):
        ext, prefix, hq, hkv, d, *page = CASES[name]
        page_size = page[0] if page else 16
        variants = [False, True] if args.fp8 else [False]
        for fp8 in variants:
            first_ms = None
            for kernel in kernels:
                if kernel == "tma" and (fp8 or page_size % 16):
                    continue  # TMA copies need pages of a multiple of 16 slots and a 16-bit cache
                ms, tf, host, kern = run_case(lib, name, ext, prefix, hq, hkv, d, page_size=page_size, fp8=fp8,
                                              kernel=kernel)
                first_ms = first_ms or ms
                label = name + ("-fp8" if fp8 else "")
                rows.append((label, kernel, ext, prefix, f"{hq}/{hkv}/{d}", ms, tf, tf / mm, ms / first_ms, host,
                             kern))
                print(f"{label:10s} {kernel:6s} {ms:8.3f} ms {tf:7.1f} TFLOP/s {tf / mm:6.1%} of mm "
                      f"host {host:6.1f} us kern {kern:8.4f} ms", flush=True)
    print(f"{'case':10s} {'kernel':6s} {'new':>6s} {'prefix':>7s} {'Hq/Hkv/D':>10s} {'ms':>8s} {'TFLOP/s':>8s} "
          f"{'of mm':>6s} {'/' + kernels[0]:>7s} {'host us':>8s} {'kern ms':>8s}")
    for label, kernel, ext, prefix, shape, ms, tf, frac, ratio, host, kern in rows:
        print(f"{label:10s} {kernel:6s} {ext:6d} {prefix:7d} {shape:>10s} {ms:8.3f} {tf:8.1f} {frac:6.1%} "
              f"{ratio:6.2f}x {host:8.1f} {kern:8.4f}")
    if args.json:
        import json

        with open(args.json, "w") as f:
            json.dump(dict(matmul_tflops=mm, rows=[dict(case=r[0], kernel=r[1], new=r[2], prefix=r[3], shape=r[4],
                                                        ms=r[5], tflops=r[6], frac_matmul=r[7],
                                                        time_over_first_kernel=r[8], host_us=r[9],
                                                        kernel_ms=r[10])
                                                   for r in rows]), f, indent=1)


if __name__ == "__main__":
    main()
