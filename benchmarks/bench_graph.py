"""Decode steps replayed from a CUDA graph, as a serving engine runs them, and plan() host cost.

    python3 benchmarks/bench_graph.py [--rows 1,8,32,128,256] [--ctx 1024,8192] [--markdown F]

Method. One bucket per row count (a graph-safe MixedAttention with max_batch = rows, a
decode-only bucket: max_extend_tokens = 0), 32/8 heads, head dim 128, bf16, page 16, every row at
the same context. Capture run() once after a plan of short rows, re-plan the measured step, replay:
the time is the median over 20 rounds of 10 back-to-back replays (CUDA events; the L2 is not
flushed between replays, which favours the smaller steps equally for both). FlashInfer's row is
BatchDecodeWithPagedKVCacheWrapper(use_cuda_graph=True, use_tensor_cores=True) with its fixed
index buffers, captured and replayed the same way, on the same q, cache and page table. The floor
is the KV bytes of the step over the read-only bandwidth measured in the same process. The host
cost of plan() (wrapper and bare op) is the median of 2000 calls after warm-up, for 1 and 256 rows.
"""

import argparse
import os
import statistics
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import mixed_attn  # noqa: E402
from common import measure_ceilings  # noqa: E402
from mixed_attn.testing import make_batch  # noqa: E402

HQ, HKV, D, PAGE = 32, 8, 128, 16


def replay_ms(g, rounds=20, per_round=10):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(3):
        g.replay()
    times = []
    for _ in range(rounds):
        start.record()
        for _ in range(per_round):
            g.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / per_round)
    return statistics.median(times)


def capture(fn):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    torch.cuda.synchronize()
    return g


def step_inputs(rows, ctx, seed):
    """`rows` decode rows at context `ctx`, pages scattered over 8 spare ones (on the GPU)."""
    b = make_batch([1] * rows, [ctx - 1] * rows, HQ, HKV, D, PAGE, device="cuda", seed=seed,
                   spare_pages=8)
    return b.q, b.k_cache, b.v_cache, b.kv_indices, b.qo_indptr, b.kv_indptr, b.seq_lens


def bench_ours(rows, ctx, q, kc, vc, kv_indices, qo, kvp, seq):
    w = mixed_attn.MixedAttention(HQ, HKV, D, PAGE, device="cuda", max_batch=rows, max_tokens=rows,
                                  cuda_graph=True, max_extend_tokens=0)
    out = torch.empty_like(q)
    short = torch.full((rows,), 100, dtype=torch.int32)
    w.plan(qo, kvp, short)  # capture with another step: the replays must follow the re-plan
    g = capture(lambda: w.run(q, kc, vc, kv_indices, out=out))
    w.plan(qo, kvp, seq)
    ms = replay_ms(g)
    # Correctness of the replayed step against an eager run of a normal wrapper.
    eager = mixed_attn.MixedAttention(HQ, HKV, D, PAGE, device="cuda", max_batch=rows, max_tokens=rows)
    eager.plan(qo, kvp, seq)
    ref = eager.run(q, kc, vc, kv_indices)
    g.replay()
    torch.cuda.synchronize()
    err = ((out.float() - ref.float()).norm() / ref.float().norm()).item()
    return ms, err


def bench_flashinfer(rows, ctx, q, kc, vc, kv_indices, qo, kvp, seq):
    import flashinfer

    ws = torch.zeros(128 << 20, dtype=torch.uint8, device="cuda")
    indptr_buf = torch.zeros(rows + 1, dtype=torch.int32, device="cuda")
    indices_buf = torch.zeros(kv_indices.numel(), dtype=torch.int32, device="cuda")
    last_buf = torch.zeros(rows, dtype=torch.int32, device="cuda")
    w = flashinfer.BatchDecodeWithPagedKVCacheWrapper(
        ws, "NHD", use_cuda_graph=True, use_tensor_cores=True, paged_kv_indptr_buffer=indptr_buf,
        paged_kv_indices_buffer=indices_buf, paged_kv_last_page_len_buffer=last_buf)
    last = ((seq - 1) % PAGE + 1).to(torch.int32)
    indices_buf.copy_(kv_indices)
    w.plan(kvp, kv_indices, last, HQ, HKV, D, PAGE, data_type=torch.bfloat16, q_data_type=torch.bfloat16)
    out = torch.empty_like(q)
    g = capture(lambda: w.run(q, (kc, vc), out=out))
    ms = replay_ms(g)
    return ms


def host_plan_us(rows, graph):
    w = mixed_attn.MixedAttention(HQ, HKV, D, PAGE, device="cuda", max_batch=rows,
                                  max_tokens=rows, cuda_graph=graph,
                                  **({"max_extend_tokens": 0} if graph else {}))
    qo = torch.arange(rows + 1, dtype=torch.int32)
    kvp = torch.arange(rows + 1, dtype=torch.int32) * 64
    seq = torch.full((rows,), 1000, dtype=torch.int32)
    meta = torch.empty(w.plan_meta.numel(), dtype=torch.int32)

    def timed(fn, n=2000):
        for _ in range(200):
            fn()
        ts = []
        for _ in range(n):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        torch.cuda.synchronize()
        return statistics.median(ts) * 1e6

    wrapper_us = timed(lambda: w.plan(qo, kvp, seq))
    op_us = timed(lambda: torch.ops.mixed_attn.plan(qo, kvp, seq, meta, w._config))
    return wrapper_us, op_us


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", default="1,8,32,128,256")
    ap.add_argument("--ctx", default="1024,8192")
    ap.add_argument("--no-flashinfer", action="store_true")
    ap.add_argument("--markdown", default=None)
    args = ap.parse_args()
    ceil = measure_ceilings(torch.device("cuda"), quick=True, log=lambda *a: None)
    read_tbs = ceil["read_tbs"] if isinstance(ceil, dict) and "read_tbs" in ceil else None
    print(f"device: {torch.cuda.get_device_name()}  ceilings: {ceil}")
    have_fi = False
    if not args.no_flashinfer:
        try:
            import flashinfer  # noqa: F401
            have_fi = True
        except Exception as e:  # noqa: BLE001
            print(f"flashinfer not importable: {e}")
    lines = ["| rows | context | KV MB | floor µs | mixed_attn replay µs | of floor | FlashInfer replay µs "
             "| ours / FI | rel err vs eager |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for ctx in [int(x) for x in args.ctx.split(",")]:
        for rows in [int(x) for x in args.rows.split(",")]:
            inputs = step_inputs(rows, ctx, seed=rows * 100003 + ctx)
            kv_bytes = rows * ctx * HKV * D * 2 * 2
            floor_us = kv_bytes / (read_tbs * 1e12) * 1e6 if read_tbs else float("nan")
            ms, err = bench_ours(rows, ctx, *inputs)
            fi_ms = float("nan")
            if have_fi:
                try:
                    fi_ms = bench_flashinfer(rows, ctx, *inputs)
                except Exception as e:  # noqa: BLE001
                    print(f"flashinfer failed at {rows} x {ctx}: {type(e).__name__}: {str(e)[:200]}")
            line = (f"| {rows} | {ctx} | {kv_bytes / 1e6:.1f} | {floor_us:.1f} | {ms * 1e3:.1f} | "
                    f"{floor_us / (ms * 1e3):.0%} | {fi_ms * 1e3:.1f} | {ms / fi_ms:.2f} | {err:.1e} |")
            print(line, flush=True)
            lines.append(line)
            del inputs
            torch.cuda.empty_cache()
    lines += ["", "| plan() host cost | rows | wrapper µs | bare op µs |", "|---|---:|---:|---:|"]
    for graph in (False, True):
        for rows in (1, 256):
            wus, ous = host_plan_us(rows, graph)
            line = f"| {'graph bucket' if graph else 'normal'} | {rows} | {wus:.1f} | {ous:.1f} |"
            print(line, flush=True)
            lines.append(line)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
