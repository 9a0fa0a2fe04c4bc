"""mixed_attn: one mixed prefill+decode step per case, every implementation, one process.

    PYTHONPATH=python python benchmarks/bench_mixed.py [--quick] [--cases A,B,...]
        [--markdown PATH] [--json PATH] [--png PATH] [--commit SHA]

What it times, per case (one attention call = one layer of one step, KV save not included):
  ma_split      mixed_attn, split dispatch (extend kernel + split-KV decode kernel), eager run()
  ma_split[g]   the same, replayed from a CUDA graph (launch gaps removed)
  ma_fold       mixed_attn, fold dispatch (every row through the extend kernel)
  ma_fold[g]    the same from a CUDA graph
  ma_auto       mixed_attn, mode "auto" (the planner picks split or fold for the step by its
                step-cost estimate; the summary names the one it picked)
  ma_ext        mixed_attn over the extend rows alone (the extend half of split)
  ma_dec        mixed_attn over the decode rows alone (the decode half of split)
  ma_2s_*       the two halves on two CUDA streams (decode on a high-priority one), joined
  tri_split     the Triton oracle (python/mixed_attn/triton_ref.py), split plan (128-row tiles)
  tri_fold      the Triton oracle, fold plan
  torch_sdpa    what a user writes by hand: per row, gather the row's pages and call
                torch.nn.functional.scaled_dot_product_attention (GQA and a lower-right causal
                mask where the row has a prefix)
  fi_*          FlashInfer's wrappers, only when `flashinfer` is importable
Peers measured once in /work/shared/baselines.md (sglang, vLLM, FlashInfer on this H200) are
printed next to ours as "reference, not re-measured" columns: those packages are not installed
where this runs.

Method:
  * Cases A..H are exactly those of baselines.md (page size 16, bf16, pages scattered at random
    over the pool by a random permutation, random normal data); I..L are extra (long contexts,
    many small extends, head dim 64, few long decodes).
  * Ceilings measured in this process: copy bandwidth (a 2 GiB device copy, read+write bytes),
    read-only bandwidth (a Triton streaming-read kernel and torch.sum over 4 GiB; the larger),
    bf16 matmul rate (8192^3 on random data).
  * Bytes and FLOPs counted per case: decode bytes = sum over decode rows of
    seq_len*Hkv*D*2*elem_bytes; extend FLOPs = 4*D*Hq*(causal (query, key) pairs).
    floor = decode bytes / read-only bandwidth + extend FLOPs / matmul rate (serial floor;
    "floor(copy)" uses the copy bandwidth; "overlap" = max of the two terms, what a fused
    kernel could approach). "%floor" = floor / time (100% = at the floor).
  * Time: median over many calls after warm-up, CUDA events around each call, the L2 flushed
    before each call by a 256 MB write outside the timed region; CUDA-graph rows time graph
    replays the same way. plan() is timed on the host (median wall time).
  * Sanity: every row's output (NaN-poisoned before the first call) is compared against an
    fp32 torch reference; "err" is ||out - ref|| / ||ref|| and "MISMATCH" flags err > 2e-2.
  * Each row runs inside try/except: a failure prints "error: ..." in its cell, a missing piece
    "n/a: <why>", and the run goes on.
Without a GPU it runs tiny CPU cases through the CPU implementation and says so plainly.
"""

import argparse
import json
import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

MISMATCH_TOL = 2e-2
# Graph rows last: a capture that fails cannot disturb the eager rows of the case.
ROWS = ["ma_split", "ma_fold", "ma_auto", "ma_ext", "ma_dec", "ma_2s_dec1", "ma_2s_ext1", "tri_split", "tri_fold",
        "torch_sdpa", "torch_batched", "fi_fa2_all", "fi_ext", "fi_dec", "fi_split", "fi_batchattn", "ma_split[g]",
        "ma_fold[g]"]
ROW_HELP = {
    "ma_split": "mixed_attn split dispatch",
    "ma_split[g]": "mixed_attn split, CUDA graph replay",
    "ma_fold": "mixed_attn fold dispatch",
    "ma_fold[g]": "mixed_attn fold, CUDA graph replay",
    "ma_auto": "mixed_attn mode auto (split or fold by the plan's estimate)",
    "ma_ext": "mixed_attn, extend rows alone",
    "ma_dec": "mixed_attn, decode rows alone",
    "ma_2s_dec1": "mixed_attn, the two halves on two streams (decode first, high priority)",
    "ma_2s_ext1": "mixed_attn, the two halves on two streams (extend first; decode high priority)",
    "tri_split": "Triton oracle, split plan",
    "tri_fold": "Triton oracle, fold plan",
    "torch_sdpa": "torch by hand: per-row gather + SDPA",
    "torch_batched": "torch by hand: extend rows per row, decode rows padded into one SDPA",
    "fi_fa2_all": "FlashInfer batch prefill over every row",
    "fi_ext": "FlashInfer batch prefill over the extend rows",
    "fi_dec": "FlashInfer batch decode (tensor cores) over the decode rows",
    "fi_split": "FlashInfer prefill(extend rows) then decode(decode rows)",
    "fi_batchattn": "FlashInfer BatchAttention: one persistent launch over every row",
}
# SM partitioning (issue 14): the extend half persistent on all SMs but k, the decode half on a
# second stream, planned for k SMs (opt-in rows, --rows ma_part16,...).
PARTITION_SMS = (8, 16, 24, 32, 40, 48)
ROW_HELP.update({f"ma_part{k}": f"mixed_attn, extend persistent on all SMs but {k} + decode on a second stream "
                 f"(planned for {k} SMs)" for k in PARTITION_SMS})
# Programmatic dependent launches (the policy's default on compute capability 9.0+) against
# ordinary ones, same process (opt-in row, --rows ma_split,ma_split_nopdl).
ROW_HELP["ma_split_nopdl"] = "mixed_attn split dispatch, ordinary launches (pdl=False)"
# The extend half in one tile shape of the head-dim-128 Hopper kernel (opt-in rows, --rows
# ma_ext_r128,ma_ext_r192): what the planner's choice between them (plan.cc step 3e) is fitted on.
EXTEND_SHAPE_ROWS = {"ma_ext_r128": 128, "ma_ext_r192": 192}
ROW_HELP.update({n: f"mixed_attn, extend rows alone, {r}-row tiles forced" for n, r in EXTEND_SHAPE_ROWS.items()})
# Every extend row cut into decode-class rows of at most Q new tokens (opt-in rows, --rows
# ma_sliced8,ma_sliced16): the whole step on the decode kernels, no extend launch (issue 14: can
# the decode launch absorb a short extend half that the split step runs after it?).
SLICED_ROWS = {"ma_sliced8": 8, "ma_sliced16": 16}
ROW_HELP.update({n: f"mixed_attn split, every row cut into rows of <= {q} new tokens (all decode-class)"
                 for n, q in SLICED_ROWS.items()})
# The split step with the extend launch shaped by hand (opt-in rows, --rows ma_split,ma_split_nc,...):
# uncut, 128 / 192-row tiles, one CTA an item, or extend_leave_sms=N (the persistent extend on all
# SMs but N, so the decode half, launched after it as its programmatic dependent, streams beside it
# from the start). ma_split's plan chooses N itself (plan.cc, step 3f; session 27); ma_split_leave0
# is the plan that leaves none (the planner before session 27).
LEAVE_SMS = (0, 22, 33, 44, 55, 66, 88, 110)
STEP_LAUNCH_ROWS = {"ma_split_nc": dict(extend_item_parts=1), "ma_split_r128": dict(extend_block_rows=128),
                    "ma_split_r192": dict(extend_block_rows=192), "ma_split_np": dict(extend_persistent=0),
                    # the decode's stage 1 first, the extend as its programmatic dependent,
                    # wherever the step allows it (decode rows that do not split), or never
                    # (the default: the policy's choice per step)
                    "ma_split_dfirst": dict(decode_first=1), "ma_split_efirst": dict(decode_first=0),
                    # finer decode splits (the SM-aware policy aiming at 4 / 8 / 16 stage-1 CTAs
                    # an SM, not 2): where the extend holds SMs at the start, a decode of one wave
                    # of long CTAs ends on few SMs (D: 256 CTAs of 32k keys; session 36: cps8
                    # 4% faster there, 3-4% slower on B, F, K and L)
                    **{f"ma_split_cps{n}": dict(ctas_per_sm=n) for n in (4, 8, 16)},
                    # coarser decode splits (at least N keys a split): E's ~700-key chunks read
                    # 2.7% slower than 2048+ on their own (benchmarks/RESULTS.md, session 36)
                    **{f"ma_split_min{n}": dict(min_split_tokens=n) for n in (1024, 2048, 4096)},
                    **{f"ma_split_leave{n}": dict(extend_leave_sms=n) for n in LEAVE_SMS}}
ROW_HELP.update({n: "mixed_attn split dispatch, " + ", ".join(f"{k}={v}" for k, v in kw.items())
                 for n, kw in STEP_LAUNCH_ROWS.items()})
OPT_IN_ROWS = [f"ma_part{k}" for k in PARTITION_SMS] + ["ma_split_nopdl", *EXTEND_SHAPE_ROWS, *SLICED_ROWS,
                                                        *STEP_LAUNCH_ROWS]
# FlashInfer's whole-step rows: the fastest measured one is "FI best" in the summary.
FI_WHOLE_STEP_ROWS = ["fi_split", "fi_fa2_all", "fi_batchattn"]
# Rows that time only part of the step: their %floor is against that part's own floor.
PARTIAL_ROWS = {"ma_ext": "extend", "ma_dec": "decode", "fi_ext": "extend", "fi_dec": "decode",
                **{n: "extend" for n in EXTEND_SHAPE_ROWS}}


# ---------------------------------------------------------------------------------------------
# Row builders: each returns (fn, out, token_range) or raises C.NotAvailable
# ---------------------------------------------------------------------------------------------

class Ctx:
    def __init__(self, args, device, row_names):
        self.args, self.device = args, device
        self.ma, self.ma_reason = C.import_mixed_attn()
        self.triton_forward, self.triton_reason = None, None
        if any(r.startswith("tri_") for r in row_names):
            self.triton_forward, self.triton_reason = self._import_oracle()
        self.flashinfer, self.fi_reason = None, None
        if any(r.startswith("fi_") for r in row_names):
            self.flashinfer, self.fi_reason = self._import_flashinfer()

    def _import_oracle(self):
        if self.device.type != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
            return None, "no GPU (set TRITON_INTERPRET=1 to run the Triton oracle interpreted)"
        if self.ma is None:
            return None, self.ma_reason
        try:
            from mixed_attn.triton_ref import triton_forward
            return triton_forward, None
        except Exception as e:  # noqa: BLE001
            return None, "Triton oracle missing: " + C.short_error(e, 80)

    def _import_flashinfer(self):
        if self.device.type != "cuda":
            return None, "no GPU"
        try:
            import flashinfer
            return flashinfer, None
        except Exception as e:  # noqa: BLE001
            return None, "flashinfer not importable (" + C.short_error(e, 60) + ")"


def _part(step, part):
    if part is None:
        return step, (0, step.q.shape[0])
    st = step.extend_part() if part == "extend" else step.decode_part()
    if st is None:
        raise C.NotAvailable(f"case has no {part} rows")
    t_ext = int(step.qo_indptr[step.num_extend_rows])
    return st, ((0, t_ext) if part == "extend" else (t_ext, step.q.shape[0]))


def _wrapper(ctx, st, mode, **policy):
    ma = ctx.ma
    if ma is None:
        raise C.NotAvailable(ctx.ma_reason)
    # A graph-safe wrapper's bucket is the step itself: a captured forward reads q, out and the
    # metadata at the bucket's sizes (max_tokens rows of q), so the bucket must be the step's.
    bucket = (dict(max_batch=len(st.rows), max_tokens=st.q.shape[0]) if policy.get("cuda_graph") else
              dict(max_batch=max(256, len(st.rows)), max_tokens=max(16384, st.q.shape[0])))
    w = ma.MixedAttention(st.q.shape[1], st.k_cache.shape[2], st.q.shape[2], st.page_size,
                          device=st.device, q_dtype=st.q.dtype, kv_dtype=st.k_cache.dtype,
                          mode=mode, **bucket, **policy)
    if w.mode != mode:
        raise C.NotAvailable("MIXED_ATTN_SPLIT_DISPATCH=0 forces fold")
    w.plan(st.qo_indptr, st.kv_indptr, st.seq_lens)
    return w


def build_ma(ctx, step, mode, part=None, graph=False, **policy):
    if ctx.ma is None:
        raise C.NotAvailable(ctx.ma_reason)
    if step.device.type == "cuda" and not ctx.ma.has_cuda_kernels():
        raise C.NotAvailable("this build of _C.so has no CUDA kernels")
    st, rng = _part(step, part)
    # Graph rows: a graph-safe plan (forward refuses to capture a normal one), bucket = the step.
    w = _wrapper(ctx, st, mode, **(dict(cuda_graph=True) if graph else {}), **policy)
    out = torch.full_like(st.q, float("nan"))

    def fn():
        w.run(st.q, st.k_cache, st.v_cache, st.kv_indices, out=out)

    fn.wrapper = w
    return fn, out, rng


def _halves(ctx, step, ext_policy, dec_policy):
    """The two halves of a split step as two wrappers over the step's extend and decode rows
    (launch-policy overrides ext_policy / dec_policy), for the two-stream rows: (run_ext, run_dec,
    out), each run_* launching its half on the current stream into its rows of out."""
    if ctx.ma is None:
        raise C.NotAvailable(ctx.ma_reason)
    if step.device.type != "cuda":
        raise C.NotAvailable("needs CUDA streams")
    st_e, rng_e = _part(step, "extend")
    st_d, rng_d = _part(step, "decode")
    we, wd = _wrapper(ctx, st_e, "split", **ext_policy), _wrapper(ctx, st_d, "split", **dec_policy)
    out = torch.full_like(step.q, float("nan"))
    o_e, o_d = out[rng_e[0]:rng_e[1]], out[rng_d[0]:rng_d[1]]

    def run_ext():
        we.run(st_e.q, st_e.k_cache, st_e.v_cache, st_e.kv_indices, out=o_e)

    def run_dec():
        wd.run(st_d.q, st_d.k_cache, st_d.v_cache, st_d.kv_indices, out=o_d)

    return run_ext, run_dec, out


def build_concurrent(ctx, step, first):
    """The two halves of split as two calls on two streams (decode on a high-priority stream),
    joined back into the current one: what concurrent launches alone buy, before any fused
    kernel (issue 14's "concurrent launches" candidate). `first`: the half issued first."""
    run_ext, run_dec, out = _halves(ctx, step, {}, {})
    lo, hi = torch.cuda.Stream(step.device), torch.cuda.Stream(step.device, priority=-1)
    halves = ((hi, run_dec), (lo, run_ext)) if first == "decode" else ((lo, run_ext), (hi, run_dec))

    def fn():
        cur = torch.cuda.current_stream()
        lo.wait_stream(cur)
        hi.wait_stream(cur)
        for stream, run in halves:
            with torch.cuda.stream(stream):
                run()
        cur.wait_stream(lo)
        cur.wait_stream(hi)

    return fn, out, (0, step.q.shape[0])


def build_partitioned(ctx, step, dec_sms):
    """SM partitioning by concurrent launches: the extend half as a persistent launch of
    (SMs - dec_sms) CTAs (one per SM: an sm_90a extend CTA fills an SM), issued first, then the
    decode half on a second stream, planned for dec_sms SMs: its CTAs can only start on the SMs
    the extend launch leaves free, until extend CTAs finish. Joined back into the current
    stream."""
    sms = torch.cuda.get_device_properties(step.device).multi_processor_count if step.device.type == "cuda" else 0
    run_ext, run_dec, out = _halves(ctx, step, dict(num_sms=sms - dec_sms, extend_kv_splits=1, extend_persistent=True),
                                    dict(num_sms=dec_sms))
    side = torch.cuda.Stream(step.device)

    def fn():
        cur = torch.cuda.current_stream()
        side.wait_stream(cur)
        run_ext()
        with torch.cuda.stream(side):
            run_dec()
        cur.wait_stream(side)

    return fn, out, (0, step.q.shape[0])


def build_triton(ctx, step, mode):
    if ctx.triton_forward is None:
        raise C.NotAvailable(ctx.triton_reason)
    # The Triton oracle covers a tile with blocks of at most 128 rows: plan it with the mma.sync
    # kernel's 128-row tiles (the sm_90a kernel's 192-row tiles would leave it a half-empty block).
    w = _wrapper(ctx, step, mode, extend_backend="mma")
    out = torch.full_like(step.q, float("nan"))
    tf = ctx.triton_forward

    def fn():
        tf(step.q, None, None, step.k_cache, step.v_cache, step.kv_indices, w.plan_meta,
           w.plan_info, w.partial_out, w.partial_lse, out, None, None, w.sm_scale, 0.0, -1, 1.0,
           1.0)

    return fn, out, (0, step.q.shape[0])


def build_sdpa(ctx, step):
    """Per-row SDPA over gathered pages: the straightforward thing to write with torch."""
    F = torch.nn.functional
    causal_lower_right = None
    if step.device.type == "cuda" and any(e > 1 and p > 0 for p, e in step.rows):
        try:  # lets SDPA keep its fused kernels for a prefix-offset causal mask
            from torch.nn.attention.bias import causal_lower_right
        except Exception:  # noqa: BLE001
            causal_lower_right = None
    q, kc, vc, idx = step.q, step.k_cache, step.v_cache, step.kv_indices
    Hq, D = q.shape[1], q.shape[2]
    Hkv = kc.shape[2]
    G = Hq // Hkv
    rows = []
    for b, (p, e) in enumerate(step.rows):
        q0, p0, p1 = int(step.qo_indptr[b]), int(step.kv_indptr[b]), int(step.kv_indptr[b + 1])
        mask = None
        if e > 1 and p > 0:
            mask = (causal_lower_right(e, p + e) if causal_lower_right is not None else
                    torch.ones(e, p + e, dtype=torch.bool, device=q.device).tril(p))
        rows.append((q0, e, p + e, idx[p0:p1].long(), mask))
    out = torch.full_like(q, float("nan"))

    def fn():
        for q0, e, s, pages, mask in rows:
            kk = kc.index_select(0, pages).view(-1, Hkv, D)[:s].transpose(0, 1)[None]
            vv = vc.index_select(0, pages).view(-1, Hkv, D)[:s].transpose(0, 1)[None]
            qq = q[q0:q0 + e].transpose(0, 1)[None]
            if e == 1:
                o = F.scaled_dot_product_attention(qq, kk, vv, enable_gqa=G > 1)
            else:
                if G > 1:
                    kk, vv = kk.repeat_interleave(G, dim=1), vv.repeat_interleave(G, dim=1)
                if mask is None:
                    o = F.scaled_dot_product_attention(qq, kk, vv, is_causal=True)
                else:
                    o = F.scaled_dot_product_attention(qq, kk, vv, attn_mask=mask)
            out[q0:q0 + e] = o[0].transpose(0, 1)

    return fn, out, (0, q.shape[0])


def build_sdpa_batched(ctx, step):
    """A less naive torch version: the extend rows as in torch_sdpa, the decode rows gathered
    through a padded block table into one [rows, Hkv, S_max, D] batch and one SDPA call with a
    key-padding mask (what a user writes once per-row loops get too slow)."""
    F = torch.nn.functional
    ne = step.num_extend_rows
    ext = step.extend_part()
    dec = step.decode_part()
    ext_fn = ext_out = None
    if ext is not None:
        ext_fn, ext_out, _ = build_sdpa(ctx, ext)
    q, kc, vc = step.q, step.k_cache, step.v_cache
    Hq, D, Hkv, P = q.shape[1], q.shape[2], kc.shape[2], step.page_size
    out = torch.full_like(q, float("nan"))
    t_ext = int(step.qo_indptr[ne])
    if dec is not None:
        nd = len(dec.rows)
        npages = (dec.kv_indptr[1:] - dec.kv_indptr[:-1]).tolist()
        max_pages = max(npages)
        s_max = max_pages * P
        # The block table, built once (a server keeps one): row r's pages, padded with page 0.
        table = torch.zeros(nd, max_pages, dtype=torch.long)
        idx_host = dec.kv_indices.cpu().long()
        for r, (p0, n) in enumerate(zip(dec.kv_indptr[:-1].tolist(), npages)):
            table[r, :n] = idx_host[p0:p0 + n]
        table = table.to(q.device)
        seq = dec.seq_lens.to(q.device).long()
        mask = (torch.arange(s_max, device=q.device)[None, :] < seq[:, None])[:, None, None, :]
        q_dec = dec.q[:, :, None, :]                                   # [nd, Hq, 1, D]
    o_dec = out[t_ext:]

    def fn():
        if ext_fn is not None:
            ext_fn()
            out[:t_ext] = ext_out
        if dec is not None:
            kk = kc[table].view(nd, s_max, Hkv, D).transpose(1, 2)     # [nd, Hkv, S, D]
            vv = vc[table].view(nd, s_max, Hkv, D).transpose(1, 2)
            o = F.scaled_dot_product_attention(q_dec, kk, vv, attn_mask=mask,
                                               enable_gqa=Hq != Hkv)
            o_dec.copy_(o[:, :, 0, :])

    return fn, out, (0, q.shape[0])


def build_flashinfer(ctx, step, kind):
    fi = ctx.flashinfer
    if fi is None:
        raise C.NotAvailable(ctx.fi_reason)
    if kind == "fi_batchattn":
        return build_flashinfer_batch_attention(fi, step)
    parts = {"fi_fa2_all": [None], "fi_ext": ["extend"], "fi_dec": ["decode"],
             "fi_split": ["extend", "decode"]}[kind]
    Hq, D, Hkv, P = step.q.shape[1], step.q.shape[2], step.k_cache.shape[2], step.page_size
    out = torch.full_like(step.q, float("nan"))
    calls, lo, hi = [], None, None
    for part in parts:
        st, rng = _part(step, part)
        lo = rng[0] if lo is None else min(lo, rng[0])
        hi = rng[1] if hi is None else max(hi, rng[1])
        dev = st.device
        kv_indptr = st.kv_indptr.to(dev)
        last = C.last_page_lens(st.kv_indptr, st.seq_lens, P).to(dev)
        ws = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
        o = out[rng[0]:rng[1]]
        if part == "decode":
            w = fi.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD", use_tensor_cores=True)
            w.plan(kv_indptr, st.kv_indices, last, Hq, Hkv, D, P, q_data_type=st.q.dtype,
                   kv_data_type=st.k_cache.dtype)
        else:
            # fi_fa2_all: FA2 over every row (baselines.md's fa2_all); fi_ext / fi_split: the
            # library's own choice for the extend rows (FA3 on Hopper).
            backend = "fa2" if kind == "fi_fa2_all" else "auto"
            try:
                w = fi.BatchPrefillWithPagedKVCacheWrapper(ws, "NHD", backend=backend)
            except TypeError:  # older releases have no backend argument
                w = fi.BatchPrefillWithPagedKVCacheWrapper(ws, "NHD")
            w.plan(st.qo_indptr.to(dev), kv_indptr, st.kv_indices, last, Hq, Hkv, D, P,
                   causal=True, q_data_type=st.q.dtype, kv_data_type=st.k_cache.dtype)
        calls.append((w, st.q, o, ws))

    def fn():
        for w, qq, o, _ in calls:
            o.copy_(w.run(qq, (step.k_cache, step.v_cache)))

    return fn, out[lo:hi], (lo, hi)


def build_flashinfer_batch_attention(fi, step):
    """FlashInfer's holistic BatchAttention: prefill- and decode-style work of every row in one
    persistent launch (its own planner), on the same q and paged cache. Planned before timing
    (its plan synchronises the GPU)."""
    Hq, D, Hkv, P = step.q.shape[1], step.q.shape[2], step.k_cache.shape[2], step.page_size
    dev = step.device
    w = fi.BatchAttention("NHD", device=str(dev))
    w.plan(step.qo_indptr.to(dev), step.kv_indptr.to(dev), step.kv_indices,
           step.seq_lens.to(torch.int32).to(dev), Hq, Hkv, D, D, P, causal=True,
           q_data_type=step.q.dtype, kv_data_type=step.k_cache.dtype)
    out = torch.full_like(step.q, float("nan"))

    def fn():
        w.run(step.q, (step.k_cache, step.v_cache), out=out)

    return fn, out, (0, step.q.shape[0])


def builders(ctx):
    return {
        "ma_split": (lambda s: build_ma(ctx, s, "split"), False),
        "ma_split_nopdl": (lambda s: build_ma(ctx, s, "split", pdl=False), False),
        "ma_split[g]": (lambda s: build_ma(ctx, s, "split", graph=True), True),
        "ma_fold": (lambda s: build_ma(ctx, s, "fold"), False),
        "ma_fold[g]": (lambda s: build_ma(ctx, s, "fold", graph=True), True),
        "ma_auto": (lambda s: build_ma(ctx, s, "auto"), False),
        "ma_ext": (lambda s: build_ma(ctx, s, "split", "extend"), False),
        "ma_dec": (lambda s: build_ma(ctx, s, "split", "decode"), False),
        "ma_2s_dec1": (lambda s: build_concurrent(ctx, s, "decode"), False),
        "ma_2s_ext1": (lambda s: build_concurrent(ctx, s, "extend"), False),
        "tri_split": (lambda s: build_triton(ctx, s, "split"), False),
        "tri_fold": (lambda s: build_triton(ctx, s, "fold"), False),
        "torch_sdpa": (lambda s: build_sdpa(ctx, s), False),
        "torch_batched": (lambda s: build_sdpa_batched(ctx, s), False),
        "fi_fa2_all": (lambda s: build_flashinfer(ctx, s, "fi_fa2_all"), False),
        "fi_batchattn": (lambda s: build_flashinfer(ctx, s, "fi_batchattn"), False),
        "fi_ext": (lambda s: build_flashinfer(ctx, s, "fi_ext"), False),
        "fi_dec": (lambda s: build_flashinfer(ctx, s, "fi_dec"), False),
        "fi_split": (lambda s: build_flashinfer(ctx, s, "fi_split"), False),
        **{f"ma_part{k}": ((lambda k: lambda s: build_partitioned(ctx, s, k))(k), False) for k in PARTITION_SMS},
        **{n: ((lambda r: lambda s: build_ma(ctx, s, "split", "extend", extend_block_rows=r))(r), False)
           for n, r in EXTEND_SHAPE_ROWS.items()},
        **{n: ((lambda q: lambda s: build_ma(ctx, s.sliced(q), "split", decode_max_q=q))(q), False)
           for n, q in SLICED_ROWS.items()},
        **{n: ((lambda kw: lambda s: build_ma(ctx, s, "split", **kw))(kw), False)
           for n, kw in STEP_LAUNCH_ROWS.items()},
    }


# ---------------------------------------------------------------------------------------------
# One case
# ---------------------------------------------------------------------------------------------

def part_floor_ms(case, part, ceilings, elem_bytes):
    rd, mm = ceilings.get("read_tbs"), ceilings.get("matmul_tflops")
    if not rd or not mm:
        return None
    if part == "decode":
        return case.decode_kv_bytes(elem_bytes) / (rd * 1e12) * 1e3
    return case.extend_flops() / (mm * 1e12) * 1e3


def run_case(case, ctx, timer, ceilings, row_names, args):
    device = ctx.device
    dtype = torch.bfloat16
    elem = 2
    res = {"name": case.name, "title": case.title, "shape": case.shape, "label": case.label,
           "num_rows": case.num_rows, "num_tokens": case.num_tokens,
           "num_decode_rows": len(case.decode_seq_lens),
           "num_extend_rows": len(case.extend_rows),
           "decode_kv_bytes": case.decode_kv_bytes(elem), "extend_flops": case.extend_flops(),
           "rows": {},
           "reference": C.reference_for(case.name) if case in C.BASELINE_CASES else {}}
    fr, fc, fo = C.floors_ms(case, ceilings, elem)
    res.update(floor_ms=fr, floor_copy_ms=fc, floor_overlap_ms=fo)
    print(f"\n=== case {case.title}", flush=True)
    print(f"    decode KV {case.decode_kv_bytes(elem) / 1e9:.3f} GB, extend "
          f"{case.extend_flops() / 1e12:.4f} TFLOP, {case.num_rows} rows, {case.num_tokens} "
          f"tokens | floor {C.fmt_ms(fr)} ms (read-only bw), {C.fmt_ms(fc)} ms (copy bw), "
          f"overlapped {C.fmt_ms(fo)} ms", flush=True)
    t0 = time.perf_counter()
    try:
        step = C.make_step(case, device, dtype, page_size=args.page_size, seed=args.seed)
    except Exception as e:  # noqa: BLE001
        print(f"    error building the step: {C.short_error(e)}", flush=True)
        res["error"] = C.short_error(e)
        return res
    ref = None
    if not args.no_check:
        try:
            ref = C.reference_output(step)
        except Exception as e:  # noqa: BLE001
            print(f"    (no sanity check: fp32 reference failed: {C.short_error(e)})", flush=True)
    setup_s = time.perf_counter() - t0

    header = ["row", "ms", "%floor", "%floor(copy)", "TB/s eq", "TFLOP/s eq", "err", "note"]
    print("    " + "  ".join(f"{h:>12}" if i else f"{h:<14}" for i, h in enumerate(header)),
          flush=True)
    build = builders(ctx)
    for name in row_names:
        make, graph = build[name]
        r = {"status": "ok"}
        try:
            fn, out, (lo, hi) = make(step)
            fn()  # first call: compiles/JITs, and fills out for the check
            if device.type == "cuda":
                torch.cuda.synchronize()
            if ref is not None:
                r["err"] = C.rel_err(out, ref[lo:hi])
            r.update(timer.time(fn, graph=graph))
            w = getattr(fn, "wrapper", None)
            if w is not None and w.plan_launch is not None:
                # The plan's launch decisions (mode, SMs left to the decode, KV splits, ...), so a
                # row's JSON says what ran without re-planning it elsewhere.
                r["plan"] = w.plan_launch
                if name == "ma_auto":  # the mode the plan chose, and its estimates
                    r["chose"] = {k: w.plan_launch[k] for k in ("mode", "est_split_us", "est_fold_us")}
            del fn, out
        except C.NotAvailable as e:
            r = {"status": "n/a", "why": str(e)}
        except Exception as e:  # noqa: BLE001
            r = {"status": "error", "why": C.short_error(e)}
            if device.type == "cuda":
                try:
                    torch.cuda.synchronize()
                except Exception:  # noqa: BLE001
                    pass
        res["rows"][name] = r
        print("    " + format_row(name, r, case, ceilings, res, elem), flush=True)
    del step
    if device.type == "cuda":
        try:
            torch.cuda.empty_cache()
        except Exception as e:  # noqa: BLE001  (a sticky device error: later rows will say so)
            print(f"    (empty_cache failed: {C.short_error(e)})", flush=True)
    res["wall_s"] = time.perf_counter() - t0
    res["setup_s"] = setup_s
    print_speedups(res)
    print_reference(res)
    return res


def row_metrics(name, r, case, ceilings, res, elem):
    """(%floor, %floor copy, TB/s equivalent, TFLOP/s equivalent) of a timed row."""
    ms = r.get("ms")
    if ms is None:
        return None, None, None, None
    part = PARTIAL_ROWS.get(name)
    if part:
        f = part_floor_ms(case, part, ceilings, elem)
        fcopy = None
        if part == "decode" and ceilings.get("copy_tbs"):
            fcopy = case.decode_kv_bytes(elem) / (ceilings["copy_tbs"] * 1e12) * 1e3
        elif part == "extend":
            fcopy = f
    else:
        f, fcopy = res["floor_ms"], res["floor_copy_ms"]
    dec_b = case.decode_kv_bytes(elem) if part != "extend" else 0
    flops = case.extend_flops() if part != "decode" else 0
    tbs = dec_b / (ms * 1e-3) / 1e12 if dec_b else None
    tfl = flops / (ms * 1e-3) / 1e12 if flops else None
    return (f / ms if f else None, fcopy / ms if fcopy else None, tbs, tfl)


def row_note(name, r):
    """A timed row's note: a mismatch, a half row, mode auto's choice, the SMs its plan left."""
    notes = []
    if r.get("mismatch"):
        notes.append("MISMATCH vs fp32 reference")
    if name in PARTIAL_ROWS:
        notes.append(f"{PARTIAL_ROWS[name]} half only")
    if r.get("chose"):
        c = r["chose"]
        notes.append(f"chose {c['mode']} (estimates: split {c['est_split_us']:.0f} us, fold {c['est_fold_us']:.0f} us)")
    if (r.get("plan") or {}).get("extend_leave_sms"):
        notes.append(f"{r['plan']['extend_leave_sms']} SMs left to the decode")
    return "; ".join(notes)


def format_row(name, r, case, ceilings, res, elem):
    if r["status"] != "ok":
        cell = f"{r['status']}: {r['why']}"
        return f"{name:<14}  {cell}"
    pf, pc, tbs, tfl = row_metrics(name, r, case, ceilings, res, elem)
    r.update(frac_floor=pf, frac_floor_copy=pc, tbs_equiv=tbs, tflops_equiv=tfl)
    err = r.get("err")
    if err is not None and (math.isnan(err) or err > MISMATCH_TOL):
        r["mismatch"] = True
    note = row_note(name, r)
    cells = [C.fmt_ms(r["ms"]), C.fmt_pct(pf), C.fmt_pct(pc), _rate(tbs, 2), _rate(tfl, 0),
             f"{err:.1e}" if err is not None else "-", note]
    return f"{name:<14}  " + "  ".join(f"{c:>12}" for c in cells[:-1]) + "  " + cells[-1]


def _rate(v, digits):
    if not v:
        return "-"
    return f"{v:.{digits}f}" if v >= 1 or (digits and v >= 0.1) else f"{v:.2g}"


def timed(res):
    return {k: v["ms"] for k, v in res["rows"].items() if v.get("ms") is not None}


def print_speedups(res):
    t = {k: v for k, v in timed(res).items() if k not in PARTIAL_ROWS}
    if len(t) < 2:
        return
    names = list(t)
    print("    speed-up of row over column (column ms / row ms):")
    rows = [[n] + [f"{t[c] / t[n]:.2f}" for c in names] for n in names]
    for line in C.text_table(["row \\ vs"] + names, rows).splitlines():
        print("      " + line)
    res["speedup"] = {n: {c: t[c] / t[n] for c in names} for n in names}


def print_reference(res):
    ref = res["reference"]
    if not ref:
        return
    ours = res["rows"].get("ma_split", {}).get("ms")
    items = []
    for k, v in ref.items():
        s = f"{k} {C.fmt_ms(v)}"
        if ours:
            s += f" (x{v / ours:.2f})"
        items.append(s)
    print("    reference, NOT re-measured (baselines.md, H200 2026-11-30), ms"
          + (" and (their ms / ma_split ms)" if ours else "") + ":")
    for i in range(0, len(items), 5):
        print("      " + ", ".join(items[i:i + 5]))


# ---------------------------------------------------------------------------------------------
# plan() on the host
# ---------------------------------------------------------------------------------------------

def plan_timing(ctx, sizes, reps):
    """Host µs per plan() for batches of 1..1024 rows (1 extend row of 256 over 1k + decodes)."""
    ma = ctx.ma
    if ma is None:
        return {"status": "n/a", "why": ctx.ma_reason, "rows": []}
    import random

    from mixed_attn.testing import batch_indptrs
    rnd = random.Random(7)
    P, Hq, Hkv, D = 16, 32, 8, 128
    out = []
    dev = ctx.device
    for n in sizes:
        rows = [(1024, 256)] + [(rnd.randint(512, 8192) - 1, 1) for _ in range(n - 1)]
        qo_t, kv_t, seq_t = batch_indptrs([e for _, e in rows], [p for p, _ in rows], P, tensors=True)
        rec = {"rows": n, "tokens": int(qo_t[-1])}
        for mode in ("split", "fold"):
            try:
                w = ma.MixedAttention(Hq, Hkv, D, P, device=dev, max_batch=max(n, 256),
                                      max_tokens=16384, mode=mode)
                rec[f"wrapper_{mode}_us"] = C.host_time_us(
                    lambda: w.plan(qo_t, kv_t, seq_t), reps=reps, warmup=max(5, reps // 10))
            except Exception as e:  # noqa: BLE001
                rec[f"wrapper_{mode}_us"] = None
                rec[f"{mode}_error"] = C.short_error(e)
                continue
            if mode == "split":
                try:  # the bare op: host planning without the wrapper's Python and the H2D copy
                    meta = torch.empty(w.plan_meta.numel(), dtype=torch.int32)
                    args = (qo_t, kv_t, seq_t, meta, w._config)
                    rec["op_split_us"] = C.host_time_us(
                        lambda: torch.ops.mixed_attn.plan(*args), reps=reps,
                        warmup=max(5, reps // 10))
                    from mixed_attn import plan_info as pinfo
                    rec["num_partials"] = pinfo.field(w.plan_info, "num_partials")
                except Exception as e:  # noqa: BLE001
                    rec["op_split_error"] = C.short_error(e)
        if dev.type == "cuda":
            torch.cuda.synchronize()
        out.append(rec)
    return {"status": "ok", "rows": out}


def plan_table(pt):
    hdr = ["rows", "tokens", "op plan (split) us", "wrapper.plan split us", "wrapper.plan fold us",
           "us/row (split)"]
    rows = []
    for r in pt["rows"]:
        ws = r.get("wrapper_split_us")
        rows.append([r["rows"], r["tokens"], _us(r.get("op_split_us")), _us(ws),
                     _us(r.get("wrapper_fold_us")), f"{ws / r['rows']:.2f}" if ws else
                     r.get("split_error", "-")])
    return hdr, rows


def _us(v):
    return "-" if v is None else f"{v:.1f}"


# ---------------------------------------------------------------------------------------------
# Summary, markdown, plot
# ---------------------------------------------------------------------------------------------

SUMMARY_ROWS = ["ma_split", "ma_split_nopdl", "ma_split[g]", "ma_fold", "ma_auto", "ma_ext", "ma_dec", "ma_2s_dec1",
                "ma_2s_ext1", *STEP_LAUNCH_ROWS,
                "tri_split", "tri_fold",
                "torch_sdpa", "torch_batched", "fi_fa2_all", "fi_split", "fi_batchattn", "fi_ext", "fi_dec"]


def cell(res, name):
    r = res["rows"].get(name)
    if r is None:
        return "-"
    if r["status"] != "ok":
        return r["status"]
    s = f"{C.fmt_ms(r['ms'])} ({C.fmt_pct(r.get('frac_floor'))})"
    if r.get("mismatch"):
        s += " MISMATCH"
    return s


def summary(results, row_names):
    cols = [n for n in SUMMARY_ROWS if n in row_names and any(
        n in r["rows"] and r["rows"][n]["status"] == "ok" for r in results)]
    hdr = (["case (Hq/Hkv/D)", "floor ms", "floor(copy)", "overlap"] +
           [f"{n} ms (%floor{' of its half' if n in PARTIAL_ROWS else ''})" for n in cols] +
           ["split vs fold", "split vs tri_split", "split vs torch", "FI best (measured)",
            "split / FI best", "ref sgl_split*", "ref sgl_fold*", "ref FI best*"])
    rows = []
    for r in results:
        t = timed(r)
        sp = t.get("ma_split")
        ratio = lambda other: (f"x{t[other] / sp:.2f}" if sp and other in t else "-")  # noqa
        bk, bv = C.reference_best(r["name"]) if r["reference"] else (None, None)
        ref = r["reference"]
        fi = {n: t[n] for n in FI_WHOLE_STEP_ROWS if n in t}
        fk = min(fi, key=fi.get) if fi else None
        rows.append([f"{r['name']} {r['shape']}", C.fmt_ms(r.get("floor_ms")),
                     C.fmt_ms(r.get("floor_copy_ms")), C.fmt_ms(r.get("floor_overlap_ms"))] +
                    [cell(r, n) for n in cols] +
                    [ratio("ma_fold"), ratio("tri_split"), ratio("torch_sdpa"),
                     f"{C.fmt_ms(fi[fk])} ({fk})" if fk else "-",
                     f"{sp / fi[fk]:.2f}" if fk and sp else "-",
                     C.fmt_ms(ref.get("sgl_split")), C.fmt_ms(ref.get("sgl_fold")),
                     f"{C.fmt_ms(bv)} ({bk})" if bv else "-"])
    return hdr, rows


def markdown(env, ceilings, results, pt, row_names, args, total_s, final=True):
    out = [f"## bench_mixed.py ({'quick' if args.quick else 'full'} run"
           + ("" if final else "; PARTIAL: the run was still going or was cut short") + ")", "",
           f"- date: {env['date']}", f"- commit: `{env['commit']}`",
           f"- device: {env['gpu'] or 'NO GPU (CPU; tiny shapes, numbers not meaningful)'}"
           + (f" ({env['num_sms']} SMs)" if env.get("num_sms") else ""),
           f"- torch {env['torch']}, CUDA {env['cuda_runtime']}, triton {env['triton']}, "
           f"python {env['python']}",
           f"- ceilings (this run): {C.ceilings_line(ceilings)}",
           f"- wall time of the run: {total_s:.0f} s", "",
           "Method: one attention call (one layer) per case; median over many calls after "
           "warm-up, CUDA events, L2 flushed (256 MB write) before each call; `[g]` rows replay "
           "a CUDA graph. floor = decode KV bytes / read-only bandwidth + extend FLOPs / matmul "
           "rate; `%floor` = floor / time; overlap = max of the two terms. `*` columns: "
           f"reference, **not re-measured**, from {C.REFERENCE_SOURCE}. "
           "`split vs X` = X ms / ma_split ms.", ""]
    hdr, rows = summary(results, row_names)
    out += [md_or_note(hdr, rows), ""]
    out += ["Rows: " + "; ".join(f"`{n}` {ROW_HELP[n]}" for n in row_names) + ".", ""]
    for r in results:
        out += [f"### {r['title']}", "",
                f"decode KV {r['decode_kv_bytes'] / 1e9:.3f} GB, extend "
                f"{r['extend_flops'] / 1e12:.4f} TFLOP; floor {C.fmt_ms(r.get('floor_ms'))} ms "
                f"(copy {C.fmt_ms(r.get('floor_copy_ms'))}, overlapped "
                f"{C.fmt_ms(r.get('floor_overlap_ms'))})", ""]
        hdr2 = ["row", "ms", "%floor", "%floor(copy)", "TB/s eq", "TFLOP/s eq", "err"]
        rows2 = []
        for n, x in r["rows"].items():
            if x["status"] != "ok":
                rows2.append([n, f"{x['status']}: {x['why']}", "", "", "", "", ""])
            else:
                e = x.get("err")
                rows2.append([n + (" (" + PARTIAL_ROWS[n] + " half)" if n in PARTIAL_ROWS else ""),
                              C.fmt_ms(x["ms"]), C.fmt_pct(x.get("frac_floor")),
                              C.fmt_pct(x.get("frac_floor_copy")),
                              _rate(x.get("tbs_equiv"), 2), _rate(x.get("tflops_equiv"), 0),
                              (f"{e:.1e}" if e is not None else "-") +
                              (" MISMATCH" if x.get("mismatch") else "")])
        out += [C.md_table(hdr2, rows2), ""]
        sp = r.get("speedup")
        if sp:
            names = list(sp)
            out += ["Speed-up of row over column (column ms / row ms):", "",
                    C.md_table(["row \\ vs"] + names,
                               [[n] + [f"{sp[n][c]:.2f}" for c in names] for n in names]), ""]
        if r["reference"]:
            out += ["Reference, not re-measured (baselines.md): " + ", ".join(
                f"{k} {C.fmt_ms(v)}" for k, v in r["reference"].items()) + " ms", ""]
    if pt.get("rows"):
        hdr3, rows3 = plan_table(pt)
        out += ["### plan() on the host", "",
                "Median host wall time per step (32/8/128, page 16; one extend row of 256 over "
                "1k plus decode rows at U(512..8k)). `op` is torch.ops.mixed_attn.plan alone; "
                "`wrapper.plan` adds the one async H2D copy of the metadata.", "",
                C.md_table(hdr3, rows3), ""]
    elif pt.get("why"):
        out += [f"plan() timing: n/a: {pt['why']}", ""]
    return "\n".join(out)


def md_or_note(hdr, rows):
    return C.md_table(hdr, rows) if rows else "(no case ran)"


def plot(results, pt, path, row_names):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as e:  # noqa: BLE001
        return f"skipped ({C.short_error(e, 60)})"
    names = [n for n in row_names if n not in PARTIAL_ROWS and any(
        r["rows"].get(n, {}).get("frac_floor") for r in results)]
    fig, axes = plt.subplots(1, 2, figsize=(16, 5.5), gridspec_kw={"width_ratios": [3, 1]})
    ax = axes[0]
    width = 0.8 / max(1, len(names))
    for i, n in enumerate(names):
        xs, ys = [], []
        for j, r in enumerate(results):
            f = r["rows"].get(n, {}).get("frac_floor")
            if f:
                xs.append(j + (i - (len(names) - 1) / 2) * width)
                ys.append(100 * f)
        ax.bar(xs, ys, width=width, label=n)
    ax.set_xticks(range(len(results)))
    ax.set_xticklabels([f"{r['name']}\n{r['shape']}" for r in results])
    ax.set_yscale("log")
    ax.axhline(100, color="k", lw=0.8)
    ax.set_ylabel("% of floor (floor / time; 100 = at the floor)")
    ax.set_title("mixed step, one layer: fraction of the serial floor")
    ax.legend(fontsize=8, ncol=2)
    ax2 = axes[1]
    rows = pt.get("rows") or []
    for key, lab in (("op_split_us", "op plan (split)"), ("wrapper_split_us", "wrapper.plan split"),
                     ("wrapper_fold_us", "wrapper.plan fold")):
        pts = [(r["rows"], r[key]) for r in rows if r.get(key)]
        if pts:
            ax2.plot(*zip(*pts), marker="o", label=lab)
    ax2.set_xscale("log")
    ax2.set_yscale("log")
    ax2.set_xlabel("rows per step")
    ax2.set_ylabel("host µs per plan()")
    ax2.set_title("plan() on the host")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


# ---------------------------------------------------------------------------------------------

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="fewer cases (A, B, H) and shorter timing; on a CPU, the tiny cases")
    p.add_argument("--cases", default=None,
                   help="comma-separated case names (default: A..H plus the extras I..L)")
    p.add_argument("--rows", default=None, help="comma-separated rows (default: all)")
    p.add_argument("--page-size", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--budget-ms", type=float, default=None,
                   help="GPU time spent on the timed calls of one row (default 150, quick 40)")
    p.add_argument("--no-check", action="store_true", help="skip the fp32 sanity check")
    p.add_argument("--no-plan", action="store_true", help="skip the plan() timing")
    p.add_argument("--out-dir", default=None,
                   help="where JSON/PNG go by default ($OUT if set, else /tmp/mixed_attn_bench)")
    p.add_argument("--json", default=None, help="JSON path (default OUT_DIR/bench_mixed.json)")
    p.add_argument("--png", default=None, help="plot path (default OUT_DIR/bench_mixed.png)")
    p.add_argument("--no-plot", action="store_true")
    p.add_argument("--markdown", default=None, help="also write the tables as markdown here")
    p.add_argument("--commit", default=None, help="commit to print (default: git rev-parse HEAD)")
    p.add_argument("--cpu", action="store_true", help="run the CPU version even with a GPU")
    p.add_argument("--time-limit-s", type=float, default=None,
                   help="GPU: start no new case after this many seconds (default 210, quick 90)")
    p.add_argument("--from-json", default=None,
                   help="run nothing: write --markdown / --png from the JSON of an earlier run")
    return p.parse_args(argv)


def render_from_json(args):
    """Markdown and plot of a saved run (e.g. the JSON a GPU machine sent back)."""
    with open(args.from_json) as f:
        payload = json.load(f)
    run_args = argparse.Namespace(**payload["args"])
    row_names = list(payload["rows"])
    if args.markdown:
        C.write_text(args.markdown, markdown(payload["env"], payload["ceilings"], payload["cases"],
                                             payload["plan_timing"], row_names, run_args,
                                             payload["wall_s"], payload["complete"]))
    if args.png:
        plot(payload["cases"], payload["plan_timing"], args.png, row_names)


def main(argv=None):
    args = parse_args(argv)
    if args.from_json:
        render_from_json(args)
        return
    t_start, gpu, device, env = C.start_run("bench_mixed", args)

    if gpu:
        pool = {c.name: c for c in C.ALL_CASES}
        default = ["A", "B", "H"] if args.quick else [c.name for c in C.ALL_CASES]
    else:
        pool = {c.name: c for c in C.CPU_CASES}
        default = [c.name for c in C.CPU_CASES][:1 if args.quick else None]
    names = args.cases.split(",") if args.cases else default
    unknown = [n for n in names if n not in pool]
    if unknown:
        print(f"unknown case(s) {unknown} for this device; known: {sorted(pool)}")
        return 2
    cases = [pool[n] for n in names]
    row_names = args.rows.split(",") if args.rows else list(ROWS)
    bad = [r for r in row_names if r not in ROWS + OPT_IN_ROWS]
    if bad:
        print(f"unknown row(s) {bad}; known: {ROWS + OPT_IN_ROWS}")
        return 2
    if not gpu:
        row_names = [r for r in row_names if not r.endswith("[g]") and not r.startswith("fi_")]

    print("measuring ceilings ...", flush=True)
    ceilings = C.measure_ceilings(device, quick=args.quick)
    print("ceilings: " + C.ceilings_line(ceilings), flush=True)
    for k in ("copy_error", "read_sum_error", "read_triton_error", "matmul_error"):
        if ceilings.get(k):
            print(f"  ({k}: {ceilings[k]})")

    ctx = Ctx(args, device, row_names)
    for what, reason in (("mixed_attn", ctx.ma_reason), ("Triton oracle", ctx.triton_reason),
                         ("flashinfer", ctx.fi_reason)):
        if reason:
            print(f"note: {what} rows are n/a: {reason}", flush=True)
    if ctx.ma is not None and gpu and not ctx.ma.has_cuda_kernels():
        print("note: this _C.so has no CUDA kernels: mixed_attn rows are n/a", flush=True)

    budget = args.budget_ms or (40.0 if args.quick else 150.0)
    timer = C.Timer(device, budget_ms=budget if gpu else min(budget, 30.0),
                    min_reps=10 if gpu else 3, max_reps=200 if gpu else 20,
                    warmup=3 if gpu else 1)
    out_dir = args.out_dir or C.default_out_dir("bench_mixed")
    json_path = args.json or os.path.join(out_dir, "bench_mixed.json")

    def save(results, pt, final):
        """JSON (and markdown) after every case, so a run cut short still leaves its tables."""
        total = time.perf_counter() - t_start
        payload = {"env": env, "ceilings": ceilings, "args": vars(args), "cases": results,
                   "plan_timing": pt, "rows": {n: ROW_HELP[n] for n in row_names},
                   "reference_source": C.REFERENCE_SOURCE, "wall_s": total, "gpu": gpu,
                   "complete": final}
        try:
            C.write_text(json_path, json.dumps(payload, indent=1, default=str))
            if args.markdown:
                C.write_text(args.markdown, markdown(env, ceilings, results, pt, row_names, args,
                                                     total, final))
        except Exception as e:  # noqa: BLE001
            print(f"(could not write the outputs: {C.short_error(e)})", flush=True)

    results = []
    limit = args.time_limit_s or (90.0 if args.quick else 210.0)
    for case in cases:
        spent = time.perf_counter() - t_start
        if gpu and spent > limit:
            print(f"\n=== case {case.title}: skipped (time limit {limit:.0f} s reached after "
                  f"{spent:.0f} s; raise --time-limit-s)", flush=True)
            results.append({"name": case.name, "title": case.title, "shape": case.shape,
                            "label": case.label, "rows": {}, "reference": {},
                            "skipped": "time limit", "decode_kv_bytes": 0, "extend_flops": 0})
            continue
        results.append(run_case(case, ctx, timer, ceilings, row_names, args))
        save(results, {"rows": []}, False)

    pt = {"rows": []}
    if not args.no_plan:
        sizes = [1, 16, 256] if args.quick else [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
        print("\n=== plan() on the host (µs per step)", flush=True)
        try:
            pt = plan_timing(ctx, sizes, reps=30 if args.quick else 200)
        except Exception as e:  # noqa: BLE001
            pt = {"status": "error", "why": C.short_error(e), "rows": []}
        if pt.get("rows"):
            print(C.text_table(*plan_table(pt)), flush=True)
        else:
            print(f"plan timing {pt.get('status')}: {pt.get('why')}", flush=True)

    total_s = time.perf_counter() - t_start
    print("\n=== summary (ms and %floor; 'split vs X' = X ms / ma_split ms; * = reference from "
          "baselines.md, NOT re-measured)", flush=True)
    hdr, rows = summary(results, row_names)
    print(C.text_table(hdr, rows) if rows else "(no case ran)", flush=True)
    bad_rows = [f"{r['name']}:{n}" for r in results for n, x in r["rows"].items()
                if x.get("mismatch")]
    print("sanity vs fp32 reference: " + (f"MISMATCH in {', '.join(bad_rows)}" if bad_rows else
                                           "every timed row within tolerance"), flush=True)
    if not gpu:
        print(C.NO_GPU_BANNER, flush=True)

    save(results, pt, True)
    print(f"wrote {json_path}" + (f" and {args.markdown}" if args.markdown else ""))
    if not args.no_plot:
        png = args.png or os.path.join(out_dir, "bench_mixed.png")
        try:
            print(f"plot: {plot(results, pt, png, row_names)}")
        except Exception as e:  # noqa: BLE001
            print(f"plot: error: {C.short_error(e)}")
    print(f"total {total_s:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
