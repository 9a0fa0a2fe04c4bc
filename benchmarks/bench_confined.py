"""How fast one SM streams when only N SMs run the work (issues 14 and 15), on the GPU.

    python benchmarks/bench_confined.py [--sms 16,33,44,66,132] [--cases L,F,H] [--no-fi] [--decode-only]

(tools/pending/confined_stream.py until session 30; its tables are benchmarks/RESULTS.md's
sessions 29 and 30.)

Why. A split step that leaves N SMs to the decode (plan.cc step 3f) runs the decode's stage 1 on
those N SMs beside the extend; session 27's steps imply 23-47 GB/s an SM there, while the decode
alone on every SM needs ~24 (H100) / ~35 (H200) an SM to reach the HBM rate, which it misses on
the H200 (D, E, F behind FlashInfer's decode). Whether that per-SM rate is the kernel's (bytes in
flight a CTA) or the SM's is what this measures, apart from the extend: a holder kernel takes
every SM but N (one CTA an SM with the opt-in maximum of shared memory, so no CTA that needs
shared memory fits beside it; it spins until released), then on a second stream the workload
runs on the N SMs left, timed by CUDA events, and a flag releases the holder.

Workloads, each as GB/s an SM and TB/s in all: a streaming read (one 16-byte load a thread, the
ceiling's kernel in common.py, with its SMs counted by %smid so the confinement is checked), a
streaming read by bulk copies (the TMA engine: a few chunks in flight a CTA, BULK_SHAPES), our
decode half (the default plan of bench_decode's case), FlashInfer's tensor-core decode on the
same inputs (when flashinfer imports).
"""

import argparse
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
sys.path.insert(0, os.path.join(ROOT, "python"))
from bench_decode import CASES, flashinfer_decode, make_case  # noqa: E402

from mixed_attn.testing import OpPlan, op_forward  # noqa: E402

HOLD_SRC = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

// One CTA an SM (the opt-in maximum of shared memory each), spinning until *release is set, at
// most ~2 s (a lost release must not hang the GPU). *started counts the CTAs resident.
__global__ void hold_kernel(volatile int* release, int* started, int* timed_out) {
  extern __shared__ char smem[];
  if (threadIdx.x == 0) {
    smem[0] = 0;
    atomicAdd(started, 1);
    const long long t0 = clock64();
    while (*release == 0) {
      __nanosleep(1000);
      if (clock64() - t0 > 4000000000LL) { atomicAdd(timed_out, 1); break; }
    }
  }
}

// One thread waits until `want` holder CTAs are resident (so the workload cannot take their SMs).
__global__ void wait_kernel(volatile int* started, int want) {
  const long long t0 = clock64();
  while (*started < want && clock64() - t0 < 4000000000LL) __nanosleep(500);
}

// Sets *release from the GPU (on the workload's stream, after it), so the holder stops.
__global__ void release_kernel(int* release) {
  *reinterpret_cast<volatile int*>(release) = 1;
  __threadfence_system();
}

// A streaming read by bulk copies (the TMA engine's cp.async.bulk, no tensor map): one thread a
// CTA keeps `stages` chunks of `chunk` bytes in flight into shared memory, each completing on its
// own mbarrier; the bytes are touched once (a byte a chunk) so nothing is dead.
__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__global__ void bulk_read_kernel(const char* src, long long bytes_per_cta, int chunk, int stages, int* sink) {
  extern __shared__ __align__(128) char smem[];
  unsigned long long* bars = reinterpret_cast<unsigned long long*>(smem);
  char* buf = smem + 128;
  if (threadIdx.x != 0) return;
  for (int s = 0; s < stages; ++s) asm volatile("mbarrier.init.shared.b64 [%0], 1;" ::"r"(smem_addr(&bars[s])));
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  const char* base = src + blockIdx.x * bytes_per_cta;
  const long long n = bytes_per_cta / chunk;
  auto issue = [&](long long i) {
    const int s = int(i % stages);
    asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;" ::"r"(smem_addr(&bars[s])), "r"(chunk) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 ::"r"(smem_addr(buf + size_t(s) * chunk)), "l"(base + i * chunk), "r"(chunk), "r"(smem_addr(&bars[s]))
                 : "memory");
  };
  for (long long i = 0; i < n && i < stages; ++i) issue(i);
  int sum = 0;
  for (long long i = 0; i < n; ++i) {
    const int s = int(i % stages);
    const unsigned phase = unsigned(i / stages) & 1u;
    asm volatile("{\n .reg .pred p;\n WAIT_%=:\n mbarrier.try_wait.parity.shared.b64 p, [%0], %1;\n @!p bra WAIT_%=;\n}"
                 ::"r"(smem_addr(&bars[s])), "r"(phase) : "memory");
    sum += buf[size_t(s) * chunk];
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    if (i + stages < n) issue(i + stages);
  }
  if (sum == 0x7fffffff) *sink = sum;
}

void bulk_read(torch::Tensor src, torch::Tensor sink, int64_t ctas, int64_t chunk, int64_t stages, int64_t stream_ptr) {
  const long long per_cta = src.numel() * src.element_size() / ctas;
  const int smem = 128 + int(chunk * stages);
  cudaFuncSetAttribute(bulk_read_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  bulk_read_kernel<<<int(ctas), 32, size_t(smem), reinterpret_cast<cudaStream_t>(stream_ptr)>>>(
      static_cast<const char*>(src.data_ptr()), per_cta, int(chunk), int(stages), sink.data_ptr<int>());
}

void hold(torch::Tensor flags, int64_t ctas, int64_t smem, int64_t stream_ptr) {
  int* f = flags.data_ptr<int>();
  cudaFuncSetAttribute(hold_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  hold_kernel<<<int(ctas), 32, size_t(smem), reinterpret_cast<cudaStream_t>(stream_ptr)>>>(f, f + 1, f + 2);
}

void wait_started(torch::Tensor flags, int64_t want, int64_t stream_ptr) {
  wait_kernel<<<1, 1, 0, reinterpret_cast<cudaStream_t>(stream_ptr)>>>(flags.data_ptr<int>() + 1, int(want));
}

void release(torch::Tensor flags, int64_t stream_ptr) {
  release_kernel<<<1, 1, 0, reinterpret_cast<cudaStream_t>(stream_ptr)>>>(flags.data_ptr<int>());
}
"""
HOLD_DECL = ("void hold(torch::Tensor flags, int64_t ctas, int64_t smem, int64_t stream_ptr);\n"
             "void wait_started(torch::Tensor flags, int64_t want, int64_t stream_ptr);\n"
             "void release(torch::Tensor flags, int64_t stream_ptr);\n"
             "void bulk_read(torch::Tensor src, torch::Tensor sink, int64_t ctas, int64_t chunk, int64_t stages, "
             "int64_t stream_ptr);")
# Bulk-copy read shapes: (chunk KB, stages): 64 KB a CTA (3 an SM), 96 KB (2), 128 KB and 192 KB (1).
BULK_SHAPES = ((16, 4), (16, 6), (32, 4), (16, 12))

_READ = None


def read_kernel():
    """The streaming read of common.py, each program also writing the SM it ran on."""
    global _READ, tl
    if _READ is None:
        import triton
        import triton.language as tl

        @triton.jit
        def stream_read_smid(x_ptr, out_ptr, sm_ptr, BLOCK: tl.constexpr, ITERS: tl.constexpr):
            pid = tl.program_id(0).to(tl.int64)
            acc = tl.zeros([BLOCK], dtype=tl.float32)
            base = pid * BLOCK * ITERS
            for i in range(ITERS):
                acc += tl.load(x_ptr + base + i * BLOCK + tl.arange(0, BLOCK))
            tl.store(out_ptr + pid, tl.sum(acc, axis=0))
            smid = tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r,r", [pid.to(tl.int32)], dtype=tl.int32,
                                             is_pure=True, pack=1)
            tl.store(sm_ptr + pid, smid)

        _READ = stream_read_smid
    return _READ


def confined_ms(ext, n_free, num_sms, smem, fn, reps):
    """Mean ms of fn() over `reps` calls with every SM but n_free held."""
    flags = torch.zeros(3, dtype=torch.int32, device="cuda")
    side = torch.cuda.Stream()
    main = torch.cuda.current_stream()
    held = num_sms - n_free
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    if held > 0:
        ext.hold(flags, held, smem, side.cuda_stream)
        ext.wait_started(flags, held, main.cuda_stream)
    e0.record(main)
    for _ in range(reps):
        fn()
    e1.record(main)
    ext.release(flags, main.cuda_stream)  # after the workload
    torch.cuda.synchronize()
    f = flags.tolist()
    if held > 0 and (f[1] != held or f[2] != 0):
        raise RuntimeError(f"holder: {f[1]} of {held} CTAs started, {f[2]} timed out")
    return e0.elapsed_time(e1) / reps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sms", default="16,33,44,66,132", help="SMs left free (the workload's)")
    ap.add_argument("--cases", default="L,F,H", help="bench_decode cases")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--no-fi", action="store_true")
    ap.add_argument("--decode-only", action="store_true", help="only the decodes (no streaming reads)")
    args = ap.parse_args()
    from torch.utils.cpp_extension import load_inline

    ext = load_inline("ma_hold", cpp_sources=HOLD_DECL, cuda_sources=HOLD_SRC,
                      functions=["hold", "wait_started", "release", "bulk_read"], extra_cuda_cflags=["-O2"],
                      verbose=False)
    props = torch.cuda.get_device_properties(0)
    num_sms = props.multi_processor_count
    smem = props.shared_memory_per_block_optin
    print(f"{props.name}: {num_sms} SMs, holder CTAs of {smem} bytes of shared memory", flush=True)
    # Lazy module loading loads a kernel at its first launch and may wait for the running kernels
    # to finish first: a first launch while the holder spins deadlocks until its timeout (the
    # first run of this script: all holder CTAs timed out). So every kernel launched while the
    # holder runs is launched once before: the holder's (released at once), and each workload.
    warm = torch.zeros(3, dtype=torch.int32, device="cuda")
    ext.release(warm, torch.cuda.current_stream().cuda_stream)
    ext.hold(warm, 1, smem, torch.cuda.current_stream().cuda_stream)
    ext.wait_started(warm, 1, torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    sms = [int(s) for s in args.sms.split(",")]

    rows = []
    if not args.decode_only:
        rows += stream_rows(ext, sms, num_sms, smem, args.reps)
    decode_rows(ext, sms, num_sms, smem, args, rows)

    print("\n| workload | SMs free | SMs used | ms | TB/s | GB/s an SM |")
    print("|---|---:|---:|---:|---:|---:|")
    for w, n, used, nbytes, ms in rows:
        tbs = nbytes / (ms * 1e-3) / 1e12
        print(f"| {w} | {n} | {used if used is not None else '-'} | {ms:.4f} | {tbs:.3f} | {tbs * 1e3 / n:.1f} |")


def stream_rows(ext, sms, num_sms, smem, reps):
    """The streaming reads (16-byte loads; bulk copies) on N SMs."""
    # The streaming read: 1 GiB of fp32, 8 warps a program, 4096 floats x 8 iterations each.
    x = torch.randn(1 << 28, device="cuda")
    BLOCK, ITERS = 4096, 8
    grid = x.numel() // (BLOCK * ITERS)
    part = torch.empty(grid, device="cuda")
    smids = torch.empty(grid, dtype=torch.int32, device="cuda")
    kern = read_kernel()
    read = lambda: kern[(grid,)](x, part, smids, BLOCK=BLOCK, ITERS=ITERS, num_warps=8)  # noqa: E731
    read()
    rows = []
    for n in sms:
        ms = confined_ms(ext, n, num_sms, smem, read, reps)
        used = int(torch.unique(smids).numel())
        rows.append(("read", n, used, x.numel() * 4, ms))
    sink = torch.zeros(1, dtype=torch.int32, device="cuda")
    for kb, stages in BULK_SHAPES:
        bulk = lambda: ext.bulk_read(x, sink, 1024, kb << 10, stages, torch.cuda.current_stream().cuda_stream)  # noqa
        bulk()
        for n in sms:
            rows.append((f"bulk read {kb} KB x {stages}", n, None, x.numel() * 4,
                         confined_ms(ext, n, num_sms, smem, bulk, reps)))
    x = part = smids = None
    torch.cuda.empty_cache()
    return rows


def decode_rows(ext, sms, num_sms, smem, args, rows):
    """Our decode and FlashInfer's on bench_decode's cases on N SMs, appended to rows."""
    for name in args.cases.split(","):
        c = CASES[name]
        b = make_case(**c)
        kc, vc = b.k_cache, b.v_cache
        kv_bytes = int(b.seq_lens.sum()) * c["Hkv"] * c["D"] * 2 * kc.element_size()
        out = torch.empty_like(b.q)
        lse = torch.empty(b.q.shape[0], c["Hq"], device="cuda")
        plan = OpPlan(b.qo_indptr, b.kv_indptr, b.seq_lens, c.get("page", 16), c["Hq"], c["Hkv"], c["D"],
                      kv_dtype=kc.dtype, ctas_per_sm=2)
        slots = max(plan.num_partials, 1)
        po = torch.empty(slots, c["Hq"], c["D"], device="cuda")
        pl = torch.empty(slots, c["Hq"], device="cuda")
        ours = lambda: op_forward(plan, b.q, kc, vc, b.kv_indices, out, lse, None, po, pl)  # noqa: E731
        ours()
        fi = None
        if not args.no_fi:
            fi_out = torch.empty_like(b.q)
            fi, why = flashinfer_decode(b.q, kc, vc, b.kv_indices, b.kv_indptr, b.seq_lens, c.get("page", 16), fi_out)
            if fi is None:
                print(f"{name}: FlashInfer not run ({why})", flush=True)
            else:
                fi()
        for n in sms:
            rows.append((f"ma_dec {name}", n, None, kv_bytes, confined_ms(ext, n, num_sms, smem, ours, args.reps)))
            if fi is not None:
                rows.append((f"fi_dec {name}", n, None, kv_bytes, confined_ms(ext, n, num_sms, smem, fi, args.reps)))
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
