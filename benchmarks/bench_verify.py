"""Speculative-verify batches: rows of q new tokens (2-16) over long prefixes.

Rows of each case go through
  ma_decode   mixed_attn, decode-class rows on the split-KV decode kernels (decode_max_q=16)
  ma_extend   mixed_attn, the same rows on the extend kernel (decode_max_q=1: the old routing)
  ma_auto     mixed_attn with the launch policy's default decode_max_q
  fi_fa2 / fi_fa3   FlashInfer's paged prefill (causal) over the same rows, same process: its
              decode wrapper takes one query per request, so prefill is its verify path
all timed with CUDA events, L2 flushed before each call, in one process on the same inputs.
Floor = max(KV bytes / read-only bandwidth, FLOPs / bf16 matmul rate), both measured here
(KV bytes: every row's K and V read once; FLOPs: 4 * D * Hq * attended (query, key) pairs).
Each row also shows its max abs difference from ma_extend (same inputs).

Usage: python benchmarks/bench_verify.py [--cases V1,V2,V3] [--sweep] [--page 16] [--markdown out.md]
       [--decode-kv-pack 0|1|2]
"""

import argparse
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "python"))
import common as C  # noqa: E402

K = 1024
# (name, rows, q tokens per row, prefix, Hq, Hkv, D): the three verify batches, then
# the threshold sweep (one shape per GQA group, q from 2 to 16).
CASES = {
    "V1": (64, 4, 8 * K, 32, 8, 128),
    "V2": (32, 8, 32 * K, 32, 8, 128),
    "V3": (8, 16, 4 * K, 32, 8, 128),
    # Head dim 64, where the decode may read two kv heads a CTA (decode_kv_pack): rows of 2 (16
    # pairs of two heads at group 4, one MMA block) and of 4 (two blocks).
    "V4-d64": (64, 2, 8 * K, 32, 8, 64),
    "V5-d64": (64, 4, 8 * K, 32, 8, 64),
}
SWEEP = {f"S{g}q{q}": (32, q, 8 * K, 8 * g if g > 1 else 32, 8 if g > 1 else 32, 128)
         for g in (1, 4, 8) for q in (2, 4, 8, 16)}


def make_case(name, rows, q, prefix, Hq, Hkv, D):
    return C.Case(name, f"{rows} rows x {q} new over {prefix}", Hq, Hkv, D, ((prefix, q),) * rows, ())


def build_ma(step, decode_max_q, decode_kv_pack=0):
    from mixed_attn import MixedAttention
    Hq, D, Hkv = step.q.shape[1], step.q.shape[2], step.k_cache.shape[2]
    w = MixedAttention(Hq, Hkv, D, step.page_size, device=step.device, max_batch=len(step.rows),
                       max_tokens=step.q.shape[0], decode_max_q=decode_max_q,
                       decode_kv_pack=decode_kv_pack if D == 64 else 0)
    w.plan(step.qo_indptr, step.kv_indptr, step.seq_lens)
    out = torch.full_like(step.q, float("nan"))

    def fn():
        w.run(step.q, step.k_cache, step.v_cache, step.kv_indices, out=out)
    return fn, out, w


def build_fi(fi, step, backend):
    dev, P = step.device, step.page_size
    Hq, D, Hkv = step.q.shape[1], step.q.shape[2], step.k_cache.shape[2]
    ws = torch.zeros(256 << 20, dtype=torch.uint8, device=dev)
    last = C.last_page_lens(step.kv_indptr, step.seq_lens, P).to(dev)
    w = fi.BatchPrefillWithPagedKVCacheWrapper(ws, "NHD", backend=backend)
    w.plan(step.qo_indptr.to(dev), step.kv_indptr.to(dev), step.kv_indices, last, Hq, Hkv, D, P,
           causal=True, q_data_type=step.q.dtype, kv_data_type=step.k_cache.dtype)
    out = torch.full_like(step.q, float("nan"))

    def fn():
        out.copy_(w.run(step.q, (step.k_cache, step.v_cache)))
    return fn, out, ws


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="V1,V2,V3")
    ap.add_argument("--sweep", action="store_true", help="also the decode_max_q threshold sweep")
    ap.add_argument("--page", type=int, default=16)
    ap.add_argument("--markdown", default=None)
    ap.add_argument("--decode-kv-pack", type=int, default=0,
                    help="the wrapper's decode_kv_pack for the ma_decode / ma_auto rows at head dim 64 (0: policy)")
    args = ap.parse_args(argv)
    dev = torch.device("cuda")
    try:
        import flashinfer as fi
    except Exception as e:  # noqa: BLE001
        fi = None
        print(f"no FlashInfer rows: {C.short_error(e, 80)}")
    ceil = C.measure_ceilings(dev, quick=True)
    bw, mm = ceil["read_tbs"] * 1e12, ceil["matmul_tflops"] * 1e12
    print(f"ceilings: read-only {ceil['read_tbs']:.2f} TB/s, bf16 matmul {ceil['matmul_tflops']:.0f} TFLOP/s")
    names = [n for n in args.cases.split(",") if n]
    table = {**{n: CASES[n] for n in names}, **(SWEEP if args.sweep else {})}
    timer = C.Timer(dev, budget_ms=150, min_reps=10, max_reps=100)
    lines = ["| case | rows x q @prefix | heads | floor ms | ma_decode | ma_extend | ma_auto (q<=) | fi_fa2 | fi_fa3 "
             "| decode / best FI | decode frac of floor | max diff |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, spec in table.items():
        case = make_case(name, *spec)
        step = C.make_step(case, dev, page_size=args.page, seed=len(name))
        rows, q, prefix = spec[0], spec[1], spec[2]
        kv_bytes = rows * (prefix + q) * case.num_kv_heads * case.head_dim * 2 * 2
        floor = max(kv_bytes / bw, case.extend_flops() / mm) * 1e3
        res, outs = {}, {}
        fns = {}
        fns["ma_decode"] = build_ma(step, 16, args.decode_kv_pack)[:2]
        fns["ma_extend"] = build_ma(step, 1)[:2]
        f, o, w_auto = build_ma(step, 0, args.decode_kv_pack)
        fns["ma_auto"] = (f, o)
        if fi is not None:
            for b in ("fa2", "fa3"):
                try:
                    fns[f"fi_{b}"] = build_fi(fi, step, b)[:2]
                except Exception as e:  # noqa: BLE001
                    print(f"{name} fi_{b}: {C.short_error(e, 100)}")
        for k, (fn, out) in fns.items():
            res[k] = timer.time(fn)["ms"]
            outs[k] = out
        ref = outs["ma_extend"].float()
        diff = max((outs[k].float() - ref).abs().max().item() for k in outs)
        fi_best = min([res[k] for k in ("fi_fa2", "fi_fa3") if k in res], default=None)
        cell = lambda k: f"{res[k]:.3f}" if k in res else "-"  # noqa: E731
        ratio = f"{res['ma_decode'] / fi_best:.2f}x" if fi_best else "-"
        lines.append(f"| {name} | {rows} x {q} @{prefix} | {case.shape} | {floor:.3f} | {cell('ma_decode')} | "
                     f"{cell('ma_extend')} | {cell('ma_auto')} ({w_auto.decode_max_q}) | {cell('fi_fa2')} | "
                     f"{cell('fi_fa3')} | {ratio} | {floor / res['ma_decode']:.2f} | {diff:.3g} |")
        print(lines[-1], flush=True)
        del step, fns, outs
        torch.cuda.empty_cache()
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(f"page size {args.page}; read-only {ceil['read_tbs']:.2f} TB/s, "
                                       f"matmul {ceil['matmul_tflops']:.0f} TFLOP/s\n\n{text}\n")


if __name__ == "__main__":
    main()
