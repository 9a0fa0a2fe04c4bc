"""CUDA split-KV decode and KV save against the fp64 reference, through the op.

Every check draws fresh random inputs, scatters pages at random, poisons out / lse / the arena
with NaN first, and compares with python/mixed_attn/reference.py's math in float64.
"""

import math

import pytest
import torch

import mixed_attn
from mixed_attn.plan_info import field
from mixed_attn.reference import reference_attention, reference_save_kv
from mixed_attn.testing import OpPlan, make_batch, op_forward


if not (torch.cuda.is_available() and mixed_attn.has_cuda_kernels()):
    pytest.skip("needs a CUDA GPU and a build with the CUDA kernels", allow_module_level=True)

DEV = "cuda"
FP8 = torch.float8_e4m3fn
TOL = {torch.bfloat16: 2e-2, torch.float16: 4e-3}


class Batch:
    """Decode rows (and optionally extend rows) over a randomly scattered paged cache
    (mixed_attn.testing.make_batch, drawn on the GPU), with the op's plan, run and reference."""

    def __init__(self, seq_lens, Hq, Hkv, D, page_size, dtype=torch.bfloat16, kv_dtype=None,
                 extend_lens=None, k_scale=1.0, v_scale=1.0, seed=0):
        kv_dtype = kv_dtype or dtype
        B = len(seq_lens)
        extend_lens = extend_lens or [1] * B
        # Pages scattered over 5 spare ones; an fp8 cache holds randn * 2 quantised with the scales.
        b = make_batch(extend_lens, [s - e for s, e in zip(seq_lens, extend_lens)], Hq, Hkv, D,
                       page_size, dtype=dtype, kv_dtype=kv_dtype, device=DEV, seed=seed, spare_pages=5,
                       k_scale=k_scale, v_scale=v_scale, cache_std=2.0 if kv_dtype == FP8 else 1.0)
        self.seq_lens = list(seq_lens)
        self.extend_lens = list(extend_lens)
        self.page_size = page_size
        self.kv_indptr, self.qo_indptr = b.kv_indptr, b.qo_indptr
        self.kv_indices = b.kv_indices.cpu()
        self.k_cache, self.v_cache, self.q = b.k_cache, b.v_cache, b.q
        self.k_scale, self.v_scale = k_scale, v_scale
        self.kv_indices_dev = b.kv_indices
        self.Hq, self.Hkv, self.D = Hq, Hkv, D
        self.dtype, self.kv_dtype = dtype, kv_dtype

    def plan(self, **kw):
        return OpPlan(self.qo_indptr, self.kv_indptr, self.seq_lens, self.page_size, self.Hq, self.Hkv,
                      self.D, q_dtype=self.dtype, kv_dtype=self.kv_dtype, **kw)

    def run(self, plan, window_left=-1, logit_cap=0.0, sinks=None, sm_scale=None):
        T = self.q.shape[0]
        out = torch.full_like(self.q, float("nan"))
        lse = torch.full((T, self.Hq), float("nan"), device=DEV)
        slots = max(plan.num_partials, 1)
        partial_out = torch.full((slots, self.Hq, self.D), float("nan"), device=DEV)
        partial_lse = torch.full((slots, self.Hq), float("nan"), device=DEV)
        op_forward(plan, self.q, self.k_cache, self.v_cache, self.kv_indices_dev, out, lse, sinks,
                   partial_out, partial_lse, sm_scale=sm_scale, logit_cap=logit_cap,
                   window_left=window_left, k_scale=self.k_scale, v_scale=self.v_scale)
        torch.cuda.synchronize()
        return out, lse, partial_out, partial_lse

    def reference(self, rows, window_left=-1, logit_cap=0.0, sinks=None, sm_scale=None):
        """reference_attention (fp64, CPU) for each decode row alone: list of (out [Hq, D], lse [Hq])."""
        res = []
        for b in rows:
            seq = self.seq_lens[b]
            pages = self.kv_indices_dev[int(self.kv_indptr[b]) : int(self.kv_indptr[b + 1])].long()
            n = pages.numel()
            tok = int(self.qo_indptr[b]) + self.extend_lens[b] - 1
            o, l = reference_attention(
                self.q[tok : tok + 1].cpu(), self.k_cache[pages].cpu(), self.v_cache[pages].cpu(),
                [0, 1], [seq], [0, n], torch.arange(n, dtype=torch.int32), self.page_size,
                sm_scale=sm_scale, logit_cap=logit_cap, window_left=window_left,
                sinks=sinks.cpu() if sinks is not None else None, k_scale=self.k_scale,
                v_scale=self.v_scale)
            res.append((o[0], l[0]))
        return res


def check(batch, out, lse, rows, ref, tol):
    worst = 0.0
    for b, (ro, rl) in zip(rows, ref):
        tok = int(batch.qo_indptr[b])
        o = out[tok].double()
        assert torch.isfinite(o).all(), f"row {b}: unwritten or non-finite output"
        err = ((o - ro.to(DEV)).norm(dim=-1) / ro.to(DEV).norm(dim=-1).clamp_min(1e-6)).max().item()
        worst = max(worst, err)
        assert err < tol, f"row {b} (seq {batch.seq_lens[b]}): relative error {err:.3e}"
        lerr = (lse[tok].double() - rl.to(DEV)).abs().max().item()
        assert lerr < 2e-3 * max(1.0, rl.abs().max().item()), f"row {b}: lse error {lerr:.3e}"
    return worst


SHORT = [1, 54, 97, 613, 1000, 2049]


@pytest.mark.parametrize("D", [64, 128, 256])
@pytest.mark.parametrize("group", [1, 4, 8, 16])
@pytest.mark.parametrize("page_size", [1, 16, 64])
def test_head_dims_groups_pages(D, group, page_size):
    Hkv = 2
    batch = Batch(SHORT, group * Hkv, Hkv, D, page_size)
    for det in (False, True):
        plan = batch.plan(deterministic=det, fixed_split_tokens=256)
        out, lse, _, _ = batch.run(plan)
        rows = list(range(len(SHORT)))
        check(batch, out, lse, rows, batch.reference(rows), TOL[torch.bfloat16])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("fp8", [False, True])
@pytest.mark.parametrize("D", [64, 128, 256])
def test_dtypes(dtype, fp8, D):
    kv = FP8 if fp8 else dtype
    batch = Batch([3, 77, 1500, 4100], 8, 2, D, 16, dtype=dtype, kv_dtype=kv,
                  k_scale=0.37 if fp8 else 1.0, v_scale=1.9 if fp8 else 1.0)
    plan = batch.plan(min_split_tokens=64)
    out, lse, _, _ = batch.run(plan)
    rows = [0, 1, 2, 3]
    check(batch, out, lse, rows, batch.reference(rows), TOL[dtype])


@pytest.mark.parametrize("page_size", [1, 16, 64])
@pytest.mark.parametrize("window_left", [0, 5, 63, 64, 100, 1000])
def test_windows_cap_sinks(page_size, window_left):
    batch = Batch([1, 17, 64, 65, 129, 700, 3001], 16, 4, 128, page_size)
    sinks = torch.randn(16, device=DEV) * 3
    for cap, sk in ((0.0, None), (30.0, None), (0.0, sinks), (5.0, sinks)):
        for det in (False, True):
            plan = batch.plan(window_left=window_left, deterministic=det, fixed_split_tokens=128,
                              min_split_tokens=64)
            out, lse, _, _ = batch.run(plan, window_left=window_left, logit_cap=cap, sinks=sk)
            rows = list(range(7))
            ref = batch.reference(rows, window_left=window_left, logit_cap=cap, sinks=sk)
            check(batch, out, lse, rows, ref, TOL[torch.bfloat16])


@pytest.mark.parametrize("seq,B", [(65536, 2), (32768, 4), (4096, 512), (40000, 1)])
def test_long_contexts_and_big_batches(seq, B):
    lens = [seq - (i * 37) % 1000 for i in range(B)]
    batch = Batch(lens, 32, 8, 128, 16)
    for det in (False, True):
        out, lse, _, _ = batch.run(batch.plan(deterministic=det))
        rows = list(range(0, B, max(1, B // 16)))
        check(batch, out, lse, rows, batch.reference(rows), TOL[torch.bfloat16])


def test_partials_match_reference_per_split():
    """Stage-1 partials: each split's normalised output and LSE over its own keys."""
    batch = Batch([3000, 5000], 8, 2, 128, 16)
    plan = batch.plan(deterministic=True, fixed_split_tokens=1024)
    out, lse, po, pl = batch.run(plan)
    meta = plan.meta_host
    info = plan.info
    indptr = meta[info[15] : info[15] + 3]
    chunk = meta[info[17] : info[17] + 2]
    for d in range(2):
        seq = batch.seq_lens[d]
        for s in range(int(indptr[d + 1] - indptr[d])):
            slot = int(indptr[d]) + s
            lo, hi = s * int(chunk[d]), min((s + 1) * int(chunk[d]), seq)
            pg = batch.kv_indices_dev[int(batch.kv_indptr[d]) : int(batch.kv_indptr[d + 1])].long()
            kk = batch.k_cache[pg].reshape(-1, 2, 128)[lo:hi].double()
            vv = batch.v_cache[pg].reshape(-1, 2, 128)[lo:hi].double()
            q = batch.q[d].double().view(2, 4, 128)
            s_ = torch.einsum("ghd,jgd->ghj", q, kk) / math.sqrt(128)
            ref_lse = torch.logsumexp(s_, -1).reshape(8)
            ref_o = torch.einsum("ghj,jgd->ghd", torch.softmax(s_, -1), vv).reshape(8, 128)
            assert (pl[slot].double() - ref_lse).abs().max() < 1e-3
            assert ((po[slot].double() - ref_o).norm() / ref_o.norm()) < 1e-2


def test_deterministic_batch_invariance():
    lens = [5000, 33, 9000, 2048, 2049, 700]
    batch = Batch(lens, 32, 8, 128, 16, seed=1)
    full = batch.plan(deterministic=True)
    out_b, lse_b, _, _ = batch.run(full)
    for b in range(len(lens)):
        # The same row alone (same q, same cache pages).
        single = OpPlan([0, 1], batch.kv_indptr[b : b + 2] - batch.kv_indptr[b], [lens[b]], 16, 32, 8,
                        128, deterministic=True)
        q_saved = batch.q
        kvi = batch.kv_indices_dev
        batch.q = q_saved[b : b + 1].clone()
        batch.kv_indices_dev = kvi[int(batch.kv_indptr[b]) :].clone()
        out_1, lse_1, _, _ = batch.run(single)
        batch.q, batch.kv_indices_dev = q_saved, kvi
        assert torch.equal(out_1[0], out_b[b]), f"row {b} differs alone vs in the batch"
        assert torch.equal(lse_1[0], lse_b[b])
    # Reversed order, with extend rows around (they must stay untouched).
    order = list(reversed(range(len(lens))))
    mixed = Batch([lens[i] for i in order] + [300], 32, 8, 128, 16, extend_lens=[1] * len(lens) + [7],
                  seed=2)
    mixed.k_cache, mixed.v_cache = batch.k_cache, batch.v_cache
    ind = torch.cat([batch.kv_indices[int(batch.kv_indptr[i]) : int(batch.kv_indptr[i + 1])] for i in order]
                    + [batch.kv_indices[:19]])
    mixed.kv_indices, mixed.kv_indices_dev = ind, ind.to(DEV)
    mixed.q[: len(lens)] = batch.q[order]
    out_m, lse_m, _, _ = mixed.run(mixed.plan(deterministic=True))
    for pos, b in enumerate(order):
        assert torch.equal(out_m[pos], out_b[b]) and torch.equal(lse_m[pos], lse_b[b])
    # Repeated runs are bitwise identical.
    out_r, _, _, _ = batch.run(full)
    assert torch.equal(out_r, out_b)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("fp8", [False, True])
@pytest.mark.parametrize("page_size", [1, 16])
def test_save_kv(dtype, fp8, page_size):
    kv = FP8 if fp8 else dtype
    ext = [1, 9, 1, 130, 1]
    lens = [50, 200, 1, 130, 777]
    batch = Batch(lens, 8, 4, 128, page_size, dtype=dtype, kv_dtype=kv, extend_lens=ext,
                  k_scale=0.0625 if fp8 else 1.0, v_scale=4.0 if fp8 else 1.0)  # powers of two: x / s == x * (1 / s)
    T = sum(ext)
    k = (torch.randn(T, 4, 128, device=DEV) * 4).to(dtype)
    v = (torch.randn(T, 4, 128, device=DEV) * 4).to(dtype)
    if fp8:
        k[0, 0, :4] = torch.tensor([1e4, -1e4, 0.0, 1e-6])  # saturation and underflow
    ref_k, ref_v = reference_save_kv(batch.k_cache, batch.v_cache, k, v, batch.qo_indptr, lens,
                                     batch.kv_indptr, batch.kv_indices, page_size, batch.k_scale,
                                     batch.v_scale)
    plan = batch.plan()
    op_forward(plan, batch.q, batch.k_cache, batch.v_cache, batch.kv_indices_dev,
               torch.empty_like(batch.q), k=k, v=v, k_scale=batch.k_scale, v_scale=batch.v_scale,
               partial_out=torch.empty(max(plan.num_partials, 1), 8, 128, device=DEV),
               partial_lse=torch.empty(max(plan.num_partials, 1), 8, device=DEV))
    torch.cuda.synchronize()
    view = (lambda t: t.view(torch.uint8)) if fp8 else (lambda t: t)
    assert torch.equal(view(batch.k_cache), view(ref_k))
    assert torch.equal(view(batch.v_cache), view(ref_v))
    # Then decode over the saved cache still matches the reference.
    out, lse, _, _ = batch.run(plan)
    rows = [b for b in range(len(lens)) if ext[b] == 1]
    check(batch, out, lse, rows, batch.reference(rows), TOL[dtype])


def test_portable_kernel_agrees():
    """The matrix-free stage 1 (HIP's path; decode_backend="portable") against the tensor-core
    kernel on the same inputs, both chosen through the plan."""
    torch.manual_seed(7)
    batch = Batch([5, 300, 2100], 16, 2, 128, 16, kv_dtype=FP8, k_scale=0.5, v_scale=2.0)
    sinks = torch.randn(16, device=DEV)
    plan = batch.plan(window_left=1000, min_split_tokens=64)
    assert field(plan.info, "decode_kernel") == 1  # tensor cores (wide: head dim 128)
    out, lse, _, _ = batch.run(plan, window_left=1000, logit_cap=20.0, sinks=sinks)
    other_plan = batch.plan(window_left=1000, min_split_tokens=64, decode_backend="portable")
    assert field(other_plan.info, "decode_kernel") == 2
    o2 = torch.full_like(batch.q, float("nan"))
    l2 = torch.full(batch.q.shape[:2], float("nan"), device=DEV)
    po = torch.full((other_plan.num_partials, 16, 128), float("nan"), device=DEV)
    pl = torch.full((other_plan.num_partials, 16), float("nan"), device=DEV)
    op_forward(other_plan, batch.q, batch.k_cache, batch.v_cache, batch.kv_indices.to(DEV), o2, l2,
               sinks, po, pl, logit_cap=20.0, window_left=1000, k_scale=0.5, v_scale=2.0)
    other = {"out": o2.cpu(), "lse": l2.cpu()}
    assert plan.max_splits > 1
    o1, o2 = out.cpu().float(), other["out"].float()
    assert torch.isfinite(o2).all()
    assert ((o1 - o2).norm(dim=-1) / o2.norm(dim=-1)).max() < 1e-2
    assert (lse.cpu() - other["lse"]).abs().max() < 1e-3
