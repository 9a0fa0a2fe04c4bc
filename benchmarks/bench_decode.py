"""Split-KV decode micro-benchmark: time per case as a fraction of the memory floor.

Method. One process, one GPU. Ceilings measured first, in the same process:
  copy  = 2 * bytes / time of a device-to-device copy of a 2 GiB bf16 buffer
          (read + write bytes, the figure baselines.md calls copy bandwidth),
  read  = bytes / time of a read-only streaming kernel (16-byte loads) over 4 GiB.
Each case: random bf16 q and paged KV cache (mixed_attn.testing.make_batch: page 16, pages
scattered by a random permutation, drawn on the GPU), one plan (host planner, the policy named in the row), then
the op timed by common.Timer, the harness bench_mixed uses: CUDA events around each call, the
calls queued without a host synchronisation between them and each one behind a 256 MB L2 flush,
median over ~200 ms of calls. So a row's time is the GPU's (its kernels and the gaps between
them), not the host's dispatch of the call: until session 22 this script synchronised after
every call, and the host's time to reach the first launch (28-70 us, which a captured graph
does not pay) was inside every row, ours and FlashInfer's alike. The flush also keeps calls
apart: a programmatic (PDL) launch cannot start inside the previous call's merge.
KV bytes = sum over decode rows of seq_len * Hkv * D * 2 (K and V) * the cache element's bytes (2, fp8 1).
floor = KV bytes / ceiling; the printed fractions are floor / time (1.0 = at
the ceiling). The merge kernel, when the plan splits rows, is inside the time.
The `paged` row is a third ceiling, the case's own: a Triton kernel that reads this case's K
and V pages once, in the rows' order, with no attention math (common.paged_read_fn): pages of a
few KB scattered over a pool, where the read-only ceiling streams one buffer. "X / paged" is a
policy's time over it (issue 15: how much of F's distance to the read floor its pages alone cost).

Measured on an H200 (2026-12-04, session 22, this timing; default policy sm2; floor/time against
read-only; FlashInfer's tensor-core decode in the same call; benchmarks/RESULTS.md):
  H  128 rows @4k, 32/8/128:  0.4923 ms  0.936   FI 0.4960 (ours 0.993x)
  L   32 rows @32k, 32/8/128: 0.9576 ms  0.962   FI 0.9649 (0.992x)
  F  128 rows @8k,  8/1/128:  0.1437 ms  0.801   FI 0.1455 (0.988x)
  G   64 rows @4k, 16/8/256:  0.5006 ms  0.919   FI 0.4987 (1.004x)
  K  128 rows @4k, 32/8/64:   0.2950 ms  0.780   FI 0.2739 (1.077x)
Session 23 (H100 only, f746036): K with two kv heads a stage-1 CTA (decode_kv_pack, the head-dim-64
default since) 0.941x FlashInfer's decode, one head a CTA (policy pack1) 0.970x, same call.
--flush read flushes the L2 by reading instead of writing (common.Timer's flush_kind).

With --phases, each of our rows also prints its kernels' mean GPU times (torch.profiler over 20
calls: stage 1, the merge) and what the CUDA-event time holds beyond their sum (launch gaps,
ramp-up and tail between them): where a case's distance to its floor goes (issue 15: F). With
PDL the merge waits inside stage 1's time: read the phases from the *_nopdl rows.

Usage: python benchmarks/bench_decode.py [--cases H,L,F,G] [--policies sm2,det2048] [--phases]
       [--json out.json]
"""

import argparse
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "python"))
from common import (  # noqa: E402
    ALL_CASES, Timer, uniform_lens, kernel_us, last_page_lens, measure_ceilings, paged_read_fn)
from mixed_attn.plan_info import field  # noqa: E402
from mixed_attn.testing import OpPlan, make_batch, op_forward  # noqa: E402

try:
    from mixed_attn.triton_ref import triton_decode  # noqa: E402
except Exception as e:  # noqa: BLE001  (no triton: the oracle's rows are left out)
    print(f"no Triton oracle rows: {e}")
    triton_decode = None

CASES = {
    "H": dict(rows=128, seq=4096, Hq=32, Hkv=8, D=128),
    "L": dict(rows=32, seq=32768, Hq=32, Hkv=8, D=128),  # 32 rows at 32k
    "F": dict(rows=128, seq=8192, Hq=8, Hkv=1, D=128),
    "G": dict(rows=64, seq=4096, Hq=16, Hkv=8, D=256),
    "K": dict(rows=128, seq=4096, Hq=32, Hkv=8, D=64),  # bench_mixed K's decode half (head dim 64)
    # K's bytes and queries as 4 kv heads of 128: what K's stage-1 CTA over two adjacent kv heads
    # reads (256 contiguous bytes a key instead of 128) and computes, for comparison (issue 15).
    "K-pair": dict(rows=128, seq=4096, Hq=32, Hkv=4, D=128),
    # K over an fp8 (e4m3) cache: the policy reads one kv head a CTA there (pairing unmeasured).
    "K-fp8": dict(rows=128, seq=4096, Hq=32, Hkv=8, D=64, kv="fp8"),
    # page size 1 (sglang's default): every key its own page
    "H-p1": dict(rows=128, seq=4096, Hq=32, Hkv=8, D=128, page=1),
    "L-p1": dict(rows=32, seq=32768, Hq=32, Hkv=8, D=128, page=1),
    "F-p1": dict(rows=128, seq=8192, Hq=8, Hkv=1, D=128, page=1),
    "K-p1": dict(rows=128, seq=4096, Hq=32, Hkv=8, D=64, page=1),
    # bench_mixed E's decode half: 96 rows of 512-16k keys (the same lengths), which the planner
    # splits in up to 24 chunks of ~700 keys (9968 CTAs); the sm2_min* rows time larger chunks
    # (issue 14: E's step needs this half at ~96% of the read floor, it measured 93%).
    "E": dict(rows=96, seq=next(c for c in ALL_CASES if c.name == "E").decode_seq_lens, Hq=32, Hkv=8, D=128),
    # More batches of mixed lengths for the split model (session 36: E's 38 waves of ~700-key
    # CTAs read 2.7% slower than 3-8 splits a row; the wave rule prices every wave at the longest
    # split): fewer and longer rows, and many short ones.
    "E32": dict(rows=32, seq=uniform_lens(32, 1024, 32 * 1024, seed=36), Hq=32, Hkv=8, D=128),
    "E256": dict(rows=256, seq=uniform_lens(256, 256, 8 * 1024, seed=37), Hq=32, Hkv=8, D=128),
}
POLICIES = [
    ("sm2", dict(ctas_per_sm=2)),  # the planner's default
    # The default plan with splits of at least N keys (its wave rule then picks among larger
    # chunks only): case E's chunk (~700 keys, 9968 CTAs) against larger ones, same kernel.
    *[(f"sm2_min{n}", dict(ctas_per_sm=2, min_split_tokens=n)) for n in (1024, 1408, 2048, 4096, 6144)],
    # Ordinary launches: with PDL (the default on 9.0+) the merge starts while stage 1 runs and
    # waits inside it, so --phases gives it stage 1's time; these rows time the phases apart.
    ("sm2_nopdl", dict(ctas_per_sm=2, pdl=False)),
    # One kv head a stage-1 CTA where the policy reads two (head dim 64: decode_kv_pack).
    ("pack1", dict(ctas_per_sm=2, decode_kv_pack=1)),
    ("pack2", dict(ctas_per_sm=2, decode_kv_pack=2)),  # two kv heads a CTA wherever the kernel can
    ("narrow_nopdl", dict(ctas_per_sm=2, decode_backend="tensor_core_narrow", pdl=False)),
    # The two tensor-core stage-1 kernels forced (the default plan picks one of them): queries on
    # the MMA's M side (wide), or keys there with <= 8 (query, head) pairs a CTA (narrow).
    ("wide", dict(ctas_per_sm=2, decode_backend="tensor_core")),
    ("narrow", dict(ctas_per_sm=2, decode_backend="tensor_core_narrow")),
    ("det4096n", dict(deterministic=True, fixed_split_tokens=4096, decode_backend="tensor_core_narrow")),
    ("sm1", dict(ctas_per_sm=1)),
    # Waves of 3 or 4 CTAs an SM, for lab builds whose decode CTAs are small enough
    # (tools/pending/decode_ring.sh).
    ("sm3", dict(ctas_per_sm=3)),
    ("narrow_sm3", dict(ctas_per_sm=3, decode_backend="tensor_core_narrow")),
    ("narrow_sm4", dict(ctas_per_sm=4, decode_backend="tensor_core_narrow")),
    ("sm4", dict(ctas_per_sm=4)),
    ("det2048", dict(deterministic=True, fixed_split_tokens=2048)),
    ("det4096", dict(deterministic=True, fixed_split_tokens=4096)),
    ("det8192", dict(deterministic=True, fixed_split_tokens=8192)),
    # A graph-safe plan (what a captured CUDA graph replays), run eagerly: the launch geometry of
    # the bucket (max_batch = the case's rows), the policy's decode_max_q bound.
    ("graph", dict(cuda_graph=True)),
    # The same plan captured in a CUDA graph and timed as replays (common.Timer, graph=True): what
    # the event time holds beyond the kernels when one graph launch replaces the op's launches.
    ("graph_replay", dict(cuda_graph=True)),
    # The graph-safe and deterministic plans with one kv head a CTA (head dim 64), against the
    # policy's pairing of them (launches of up to 4 MMA blocks pair).
    ("graph_p1", dict(cuda_graph=True, decode_kv_pack=1)),
    ("graph_replay_p1", dict(cuda_graph=True, decode_kv_pack=1)),
    ("det4096_p1", dict(deterministic=True, fixed_split_tokens=4096, decode_kv_pack=1)),
]


def flashinfer_decode(q, k_cache, v_cache, kv_indices, kvp, lens, page, out):
    """FlashInfer's tensor-core split-KV decode (its best decode on sm_90, baselines.md) on the
    same inputs, planned before timing; None with the reason when flashinfer is not importable."""
    try:
        import flashinfer
    except Exception as e:  # noqa: BLE001
        return None, f"flashinfer not importable ({type(e).__name__})"
    Hq, D, Hkv = q.shape[1], q.shape[2], k_cache.shape[2]
    ws = torch.zeros(256 << 20, dtype=torch.uint8, device="cuda")  # its decode workspace must be zeroed
    kv_indptr = kvp.to(torch.int32).cuda()
    last = last_page_lens(kvp, lens, page).cuda()
    w = flashinfer.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD", use_tensor_cores=True)
    w.plan(kv_indptr, kv_indices, last, Hq, Hkv, D, page, q_data_type=q.dtype, kv_data_type=k_cache.dtype)

    def fn():
        out.copy_(w.run(q, (k_cache, v_cache)))
    return fn, None


def ceilings():
    c = measure_ceilings("cuda")
    return c["copy_tbs"] * 1e12, c["read_tbs"] * 1e12


def make_case(rows, seq, Hq, Hkv, D, page=16, kv="bf16", seed=0):
    """`rows` decode rows at context `seq` (one length, or one a row; bf16 q, a bf16 or fp8
    cache), pages scattered over a pool of exactly theirs."""
    kv_dtype = torch.float8_e4m3fn if kv == "fp8" else torch.bfloat16
    seqs = list(seq) if isinstance(seq, (tuple, list)) else [seq] * rows
    assert len(seqs) == rows, "one context length a row"
    return make_batch([1] * rows, [s - 1 for s in seqs], Hq, Hkv, D, page, device="cuda", seed=seed,
                      spare_pages=0, kv_dtype=kv_dtype)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="H,L,F,G")
    ap.add_argument("--policies", default=",".join(n for n, _ in POLICIES) + ",fi,paged",
                    help="comma list of the policies below, fi for FlashInfer's decode and paged for "
                         "the paged-read ceiling (the case's pages read once, no math)")
    ap.add_argument("--phases", action="store_true",
                    help="also print each of our rows' kernels' GPU times (torch.profiler)")
    ap.add_argument("--flush", default="write", choices=("write", "read"),
                    help="how the L2 is flushed before each call (common.Timer's flush_kind)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    torch.manual_seed(0)
    timer = Timer("cuda", flush_kind=args.flush)
    copy_bw, read_bw = ceilings()
    print(f"ceilings: copy {copy_bw / 1e12:.3f} TB/s (read+write), read-only {read_bw / 1e12:.3f} TB/s",
          flush=True)
    results = []
    for name in args.cases.split(","):
        c = CASES[name]
        page = c.get("page", 16)
        b = make_case(**c)
        q, kc, vc, kvi = b.q, b.k_cache, b.v_cache, b.kv_indices
        qo, kvp, lens = b.qo_indptr, b.kv_indptr, b.seq_lens
        kv_bytes = int(lens.sum()) * c["Hkv"] * c["D"] * 2 * kc.element_size()
        out = torch.empty_like(q)
        lse = torch.empty(q.shape[0], c["Hq"], device="cuda")
        def record(pname, plan, fn):
            t = timer.time(fn, graph=pname.startswith("graph_replay"))["ms"]
            if args.phases and pname != "triton":
                phases = kernel_us(fn)
                rest = t * 1e3 - sum(phases.values())
                print(f"{name:2s} {pname:8s} kernels: " + "; ".join(f"{k[:48]} {v:.1f} us" for k, v in phases.items())
                      + f"; beyond their sum {rest:.1f} us", flush=True)
            r = dict(case=name, policy=pname, splits=plan.max_splits, partials=plan.num_partials,
                     ms=t, tbps=kv_bytes / (t * 1e-3) / 1e12,
                     frac_copy=kv_bytes / copy_bw / (t * 1e-3), frac_read=kv_bytes / read_bw / (t * 1e-3))
            results.append(r)
            print(f"{name:2s} {pname:8s} splits/row<={r['splits']:3d} partials={r['partials']:5d} "
                  f"{t:.4f} ms  {r['tbps']:.3f} TB/s  floor/time: copy {r['frac_copy']:.3f}  "
                  f"read {r['frac_read']:.3f}", flush=True)
            return t

        mine = {}
        for pname, pkw in POLICIES:
            if pname not in args.policies.split(","):
                continue
            try:
                plan = OpPlan(qo, kvp, lens, page, c["Hq"], c["Hkv"], c["D"], kv_dtype=kc.dtype, **pkw)
            except RuntimeError as e:  # a policy this case's shape cannot take (pack2 at head dim 128)
                print(f"{name:2s} {pname:8s} not run: {e}", flush=True)
                continue
            slots = max(plan.num_partials, field(plan.info, "graph_max_partials"), 1)
            po = torch.empty(slots, c["Hq"], c["D"], device="cuda")
            pl = torch.empty(slots, c["Hq"], device="cuda")
            mine[pname] = record(pname, plan, lambda: op_forward(plan, q, kc, vc, kvi, out, lse, None, po, pl))
            if pname == "sm2" and triton_decode is not None:
                # The Triton oracle's split-KV decode on the same plan and arena, same process.
                t_tri = record("triton", plan, lambda: triton_decode(q, kc, vc, kvi, plan.meta, plan.info,
                                                                      po, pl, out, lse))
                print(f"{name:2s} Triton decode / mixed_attn decode (sm2 plan): {t_tri / mine['sm2']:.2f}x",
                      flush=True)
        if "fi" in args.policies.split(","):
            fi_out = torch.empty_like(q)
            fn, why = flashinfer_decode(q, kc, vc, kvi, kvp, lens, page, fi_out)
            if fn is None:
                print(f"{name:2s} fi_dec   not measured: {why}", flush=True)
            else:
                t_fi = timer.time(fn)["ms"]
                # Same inputs: FlashInfer's output against the op's (the last policy run).
                diff = (fi_out.float() - out.float()).abs().max().item()
                print(f"{name:2s} fi_dec vs mixed_attn: max |diff| {diff:.2e}", flush=True)
                r = dict(case=name, policy="fi_dec", splits=0, partials=0, ms=t_fi, max_diff=diff,
                         tbps=kv_bytes / (t_fi * 1e-3) / 1e12, frac_copy=kv_bytes / copy_bw / (t_fi * 1e-3),
                         frac_read=kv_bytes / read_bw / (t_fi * 1e-3))
                results.append(r)
                print(f"{name:2s} fi_dec   {t_fi:.4f} ms  {r['tbps']:.3f} TB/s  floor/time: copy "
                      f"{r['frac_copy']:.3f}  read {r['frac_read']:.3f}", flush=True)
                for pname, t in mine.items():
                    print(f"{name:2s} {pname} / fi_dec: {t / t_fi:.3f}x", flush=True)
        if "paged" in args.policies.split(","):
            # The paged-read ceiling: this case's K and V pages read once in the rows' order, no
            # attention math (common.paged_read_fn): what the access pattern alone allows.
            fn, _, paged_bytes = paged_read_fn(kc, vc, kvi)
            t_pg = timer.time(fn)["ms"]
            r = dict(case=name, policy="paged", splits=0, partials=0, ms=t_pg, bytes=paged_bytes,
                     tbps=paged_bytes / (t_pg * 1e-3) / 1e12, frac_read=paged_bytes / read_bw / (t_pg * 1e-3))
            results.append(r)
            print(f"{name:2s} paged    {t_pg:.4f} ms  {r['tbps']:.3f} TB/s  floor/time: read {r['frac_read']:.3f}  "
                  f"({paged_bytes // (2 * kvi.numel())}-byte pages)", flush=True)
            for pname, t in mine.items():
                print(f"{name:2s} {pname} / paged: {t / t_pg:.3f}x", flush=True)
        del b, q, kc, vc, out
        torch.cuda.empty_cache()
    if args.json:
        Path(args.json).write_text(json.dumps(dict(copy_bw=copy_bw, read_bw=read_bw, results=results),
                                              indent=1))


if __name__ == "__main__":
    main()
