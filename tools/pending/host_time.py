"""The op's host time per call (session 26's queue, item 3), on the GPU machine.

bench_extend's "host us" had ours at 55-65 us a call on P-512 against FlashInfer's FA3 run at
41, and P-512's median (48 us) is that host time, not its 15 us of kernels. bench_extend calls
through the test harness (mixed_attn.testing.OpExtend.run: arena slices and a
torch.cuda.stream context a call), not through what an engine calls. Here, on one extend row of
512 new tokens (P-512) and on a decode batch of 64 rows at 1k, each callable's host time per
call (median of 500, the calls queued back to back, so the GPU never blocks the host):

  harness     OpExtend.run (what bench_extend times)
  wrapper     MixedAttention.run(q, k_cache, v_cache, kv_indices, out=out)
  op          torch.ops.mixed_attn.forward(*args) on a prebuilt argument tuple
  op_default  the same through the resolved overload (torch.ops.mixed_attn.forward.default)
  fi          FlashInfer's run on the same inputs (FA3 prefill / tensor-core decode)

then torch.profiler's CPU-side table for 100 wrapper calls (where the host time goes: the op's
own time, the runtime calls under it). Prints markdown.
"""

import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
from common import host_time_us, last_page_lens  # noqa: E402

from mixed_attn import MixedAttention  # noqa: E402
from mixed_attn.testing import OpExtend, make_batch  # noqa: E402


def gpu_us(fn, n=50):
    fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    # One long kernel first: the launches queue behind it, so the span is the GPU's time.
    torch.cuda._sleep(int(2e8))
    s.record()
    for _ in range(n):
        fn()
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) / n * 1e3


def callables(name, ext, prefix, rows, Hq=32, Hkv=8, D=128, page=16):
    b = make_batch([ext] * rows, [prefix] * rows, Hq, Hkv, D, page, device="cuda", seed=0, spare_pages=64)
    q, kc, vc, idx = b.q, b.k_cache, b.v_cache, b.kv_indices
    out = torch.empty_like(q)
    w = MixedAttention(Hq, Hkv, D, page, device="cuda", max_batch=rows, max_tokens=q.shape[0])
    w.plan(b.qo_indptr, b.kv_indptr, b.seq_lens)
    fns = {"wrapper": lambda: w.run(q, kc, vc, idx, out=out)}
    args = (q, None, None, kc, vc, idx, w.plan_meta, w.plan_info, w.partial_out, w.partial_lse, out, None, None,
            w.sm_scale, w.logit_cap, w.window_left, 1.0, 1.0)
    fns["op"] = lambda: torch.ops.mixed_attn.forward(*args)
    op = torch.ops.mixed_attn.forward.default
    fns["op_default"] = lambda: op(*args)
    if ext > 1:
        lib = OpExtend()
        info, meta = lib.plan(b.qo_indptr, b.kv_indptr, b.seq_lens, page, Hq, Hkv, D)
        fns["harness"] = lambda: lib.run(info, meta, q, kc, vc, idx, out)
    try:
        import flashinfer as fi

        ws = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
        last = last_page_lens(b.kv_indptr, b.seq_lens, page).cuda()
        kvp = b.kv_indptr.cuda()
        fo = torch.empty_like(q)
        if ext > 1:
            fw = fi.BatchPrefillWithPagedKVCacheWrapper(ws, "NHD", backend="fa3")
            fw.plan(b.qo_indptr.cuda(), kvp, idx, last, Hq, Hkv, D, page, causal=True, q_data_type=q.dtype,
                    kv_data_type=kc.dtype)
        else:
            fw = fi.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD", use_tensor_cores=True)
            fw.plan(kvp, idx, last, Hq, Hkv, D, page, q_data_type=q.dtype, kv_data_type=kc.dtype)
        fns["fi"] = lambda: fw.run(q, (kc, vc), out=fo)
    except Exception as e:  # noqa: BLE001 - the peer row is optional
        print(f"{name}: no FlashInfer row ({type(e).__name__}: {e})")
    return fns, w, (q, kc, vc, idx, out)


def main():
    print(f"device: {torch.cuda.get_device_name(0)}")
    print("| case | callable | host us / call | GPU us / call |")
    print("|---|---|---:|---:|")
    keep = {}
    for name, ext, prefix, rows in (("P-512", 512, 0, 1), ("decode 64x1k", 1, 1024, 64)):
        fns, w, t = callables(name, ext, prefix, rows)
        keep[name] = (w, t)
        for label, fn in fns.items():
            print(f"| {name} | {label} | {host_time_us(fn, reps=500):.1f} | {gpu_us(fn):.1f} |", flush=True)
    from torch.profiler import ProfilerActivity, profile

    for name, (w, (q, kc, vc, idx, out)) in keep.items():
        for _ in range(20):
            w.run(q, kc, vc, idx, out=out)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(100):
                w.run(q, kc, vc, idx, out=out)
            torch.cuda.synchronize()
        print(f"\n### {name}: torch.profiler, 100 wrapper calls (CPU side)\n")
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=14))


if __name__ == "__main__":
    main()
