"""The main job: one mixed serving step through mixed_attn, on the GPU when there is one.

    python -m mixed_attn.demo [--rows-decode N] [--extend-len N] [--context N]

Builds a paged bf16 KV cache with pages scattered at random, a step of one chunked-prefill row plus
running decode rows (Llama-3-8B attention geometry: 32 q heads, 8 kv heads, head dim 128), plans
it, runs it in split and fold mode, checks the result against the fp64 reference on a few rows,
and prints what ran and how long it took.
"""

import argparse
import logging
import time

import torch

import mixed_attn
from mixed_attn import MixedAttention
from mixed_attn.reference import reference_forward
from mixed_attn.testing import batch_indptrs, make_batch


def time_call(fn, device, iters):
    fn()  # warm-up
    if device.type == "cuda":
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / iters
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - t0) * 1e3 / iters


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    gpu = torch.cuda.is_available() and mixed_attn.has_cuda_kernels()
    ap.add_argument("--rows-decode", type=int, default=128 if gpu else 8)
    ap.add_argument("--extend-len", type=int, default=512 if gpu else 48)
    ap.add_argument("--context", type=int, default=4096 if gpu else 300)
    ap.add_argument("--page-size", type=int, default=16)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    device = torch.device("cuda" if gpu else "cpu")
    if gpu:
        print(f"device: {torch.cuda.get_device_name()} (CUDA kernels)")
    else:
        why = "no CUDA GPU" if not torch.cuda.is_available() else "this build has no CUDA kernels"
        print(f"device: CPU ({why}): running the CPU implementation on a small step")
    Hq, Hkv, D = (32, 8, 128) if gpu else (8, 2, 128)
    ext = [args.extend_len] + [1] * args.rows_decode
    pre = [args.context // 2] + [args.context - 1] * args.rows_decode
    b = make_batch(ext, pre, Hq, Hkv, D, args.page_size, device=device, seed=0)
    print(f"step: 1 extend row ({args.extend_len} new tokens over {args.context // 2} cached) + "
          f"{args.rows_decode} decode rows at {args.context} context; Hq/Hkv/D {Hq}/{Hkv}/{D}, "
          f"page size {args.page_size}, bf16, {b.k_cache.shape[0]} pages")

    results = {}
    for mode in ("split", "fold"):
        w = MixedAttention(Hq, Hkv, D, args.page_size, device=device, max_batch=len(ext),
                           max_tokens=b.q.shape[0], mode=mode)
        t0 = time.perf_counter()
        w.plan(b.qo_indptr, b.kv_indptr, b.seq_lens)
        plan_us = (time.perf_counter() - t0) * 1e6
        kc, vc = b.k_cache.clone(), b.v_cache.clone()
        out = torch.empty_like(b.q)
        w.run(b.q, kc, vc, b.kv_indices, k=b.k, v=b.v, out=out)
        ms = time_call(lambda: w.run(b.q, kc, vc, b.kv_indices, out=out), device, 20 if gpu else 1)
        results[mode] = (out, ms)
        print(f"  {mode:5s}: path={w.last_path}, decode rows={w.num_decode_rows}, "
              f"plan {plan_us:.0f} us, attention {ms:.3f} ms per layer")

    # Check a few rows (the extend row and two decode rows) against the fp64 reference.
    check = [0, 1, len(ext) - 1]
    sub_qo, sub_kv, sub_seq = batch_indptrs([ext[i] for i in check], [pre[i] for i in check],
                                            args.page_size, tensors=True)
    rows_q = [slice(int(b.qo_indptr[i]), int(b.qo_indptr[i + 1])) for i in check]
    kv_sel = torch.cat([b.kv_indices[int(b.kv_indptr[i]): int(b.kv_indptr[i + 1])] for i in check])
    ref_out, *_ = reference_forward(
        torch.cat([b.q[r] for r in rows_q]).cpu(), torch.cat([b.k[r] for r in rows_q]).cpu(),
        torch.cat([b.v[r] for r in rows_q]).cpu(), b.k_cache.cpu(), b.v_cache.cpu(),
        sub_qo, sub_seq, sub_kv, kv_sel.cpu(), args.page_size)
    got = torch.cat([results["split"][0][r] for r in rows_q]).double().cpu()
    err = ((got - ref_out).norm() / ref_out.norm()).item()
    print(f"check vs fp64 reference (3 rows): relative error {err:.2e} "
          f"({'ok' if err < 1e-2 else 'TOO LARGE'})")
    split_ms, fold_ms = results["split"][1], results["fold"][1]
    print(f"split dispatch: {split_ms:.3f} ms, fold: {fold_ms:.3f} ms "
          f"({fold_ms / split_ms:.1f}x)")
    return 0 if err < 1e-2 else 1


if __name__ == "__main__":
    raise SystemExit(main())
