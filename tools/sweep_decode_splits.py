"""Issue 15: how the split-KV decode's time depends on its split length, per case, against the
split the planner picks (policy sm2) and FlashInfer's tensor-core decode, same process.

Each split length c is planned through the SM-aware policy with min_split_tokens = c and a CTA
target too large to matter, so every row of more than c keys gets ceil(keys / c) splits of equal
length (row_splits) and the kernel is the default one (a deterministic plan would bound the
kernel variant by decode_max_q). Times: CUDA events, median of 50 after 10 warm-up calls, the merge
included; floor = K/V bytes / the read-only ceiling measured first. GPU only:
    PYTHONPATH=python python3 tools/sweep_decode_splits.py [--cases H,L,...] [--json out.json]
"""

import argparse
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_decode import ceilings, flashinfer_decode, time_ms  # noqa: E402
from mixed_attn.plan_info import field  # noqa: E402
from mixed_attn.testing import OpPlan, make_batch, op_forward  # noqa: E402

# (decode rows' contexts, Hq, Hkv, D, page)
CASES = {
    "H": ([4096] * 128, 32, 8, 128, 16),  # bench_decode H
    "L": ([32768] * 32, 32, 8, 128, 16),  # bench_decode L (bench_mixed D's decode half)
    "F": ([8192] * 128, 8, 1, 128, 16),  # MQA
    "G": ([4096] * 64, 16, 8, 256, 16),
    "L2": ([131072] * 2, 32, 8, 128, 16),  # bench_mixed L: few long rows
    "I8": ([131072] * 8, 32, 8, 128, 16),  # bench_mixed I's decode half
    "E96": (None, 32, 8, 128, 16),  # bench_mixed E's decode half: 96 rows, U(512..16k)
    "H-p1": ([4096] * 128, 32, 8, 128, 1),
}
CHUNKS = [256, 512, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 32768, 65536]


def contexts(name):
    seqs = CASES[name][0]
    if seqs is None:
        g = torch.Generator().manual_seed(5)
        seqs = torch.randint(512, 16385, (96,), generator=g).tolist()
    return seqs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    _, read_bw = ceilings()
    print(f"read-only ceiling {read_bw / 1e12:.3f} TB/s", flush=True)
    results = []
    for name in args.cases.split(","):
        _, hq, hkv, d, page = CASES[name]
        seqs = contexts(name)
        b = make_batch([1] * len(seqs), [s - 1 for s in seqs], hq, hkv, d, page, device="cuda", spare_pages=0)
        kv_bytes = sum(seqs) * hkv * d * 2 * 2
        floor_ms = kv_bytes / read_bw * 1e3
        out = torch.empty_like(b.q)
        lse = torch.empty(b.q.shape[0], hq, device="cuda")
        runs = [("sm2", dict(ctas_per_sm=2))]
        runs += [(f"c{c}", dict(min_split_tokens=c, ctas_per_sm=1 << 20, max_splits_per_row=-(-max(seqs) // c)))
                 for c in CHUNKS if c < max(seqs)]
        for label, kw in runs:
            plan = OpPlan(b.qo_indptr, b.kv_indptr, b.seq_lens, page, hq, hkv, d, **kw)
            slots = max(plan.num_partials, 1)
            po = torch.empty(slots, hq, d, device="cuda")
            pl = torch.empty(slots, hq, device="cuda")
            ms = time_ms(lambda: op_forward(plan, b.q, b.k_cache, b.v_cache, b.kv_indices, out, lse, None, po, pl))
            ctas = field(plan.info, "num_partials") * hkv  # one-query rows: a CTA per (slot, kv head)
            r = dict(case=name, run=label, max_splits=plan.max_splits, ctas=ctas, ms=ms, of_floor=floor_ms / ms)
            results.append(r)
            print(f"{name:5s} {label:7s} splits<={plan.max_splits:4d} ctas {ctas:6d} {ms:.4f} ms "
                  f"{floor_ms / ms:.1%} of floor", flush=True)
        fn, why = flashinfer_decode(b.q, b.k_cache, b.v_cache, b.kv_indices, b.kv_indptr, b.seq_lens, page,
                                    torch.empty_like(b.q))
        if fn is not None:
            ms = time_ms(fn)
            results.append(dict(case=name, run="fi_dec", ms=ms, of_floor=floor_ms / ms))
            print(f"{name:5s} fi_dec  {ms:.4f} ms {floor_ms / ms:.1%} of floor", flush=True)
        else:
            print(f"{name:5s} fi_dec not measured: {why}", flush=True)
        b = out = None  # free the cache before the next case
        torch.cuda.empty_cache()
    if args.json:
        Path(args.json).write_text(json.dumps(dict(read_bw=read_bw, results=results), indent=1))


if __name__ == "__main__":
    main()
