"""Tests of the Triton reference kernels (python/mixed_attn/triton_ref.py).

Without CUDA the kernels run under the Triton CPU interpreter, on small shapes (CI). The
interpreter must be switched on before triton_ref is imported, hence the environment line at
the very top of this module. With CUDA the same small tests run compiled on the GPU, and the
`gpu` tests below add real sizes.

Every plan comes from the real planner (torch.ops.mixed_attn.plan). The ladder checked here:
fp64 reference -> Triton (outputs, LSE, KV save), Triton -> the CPU op (same plan: the same
arena partials and the same outputs), split vs fold, a decode row alone vs in a batch
(deterministic splits), and on the GPU Triton -> the CUDA op when the build has it.
"""

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import math  # noqa: E402
import sys  # noqa: E402
import zlib  # noqa: E402

import pytest  # noqa: E402

pytest.importorskip("triton")

try:
    import mixed_attn  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
    import mixed_attn  # noqa: F401

from mixed_attn.plan_info import MODE_FOLD, MODE_SPLIT, field, make_config, unpack_meta  # noqa: E402
from mixed_attn.reference import FP8, reference_attention, reference_save_kv  # noqa: E402
from mixed_attn.testing import make_batch  # noqa: E402
from mixed_attn.triton_ref import triton_decode, triton_forward, triton_save_kv  # noqa: E402

HAS_CUDA = torch.cuda.is_available()
DEV = "cuda" if HAS_CUDA else "cpu"  # where the small tests run Triton
requires_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU (not run under the interpreter)")
CPU = torch.device("cpu")


# ------------------------------------------------------------------------------------------
# Helpers
# ------------------------------------------------------------------------------------------
class Case:
    """A random mixed batch over a scattered paged cache (every slot random, never zeros): a
    mixed_attn.testing.make_batch with the names these tests use, rows as (prefix, extend)."""

    def __init__(self, rows, Hq, Hkv, D, page_size, dtype=torch.bfloat16, kv_dtype=None, seed=0,
                 k_scale=1.0, v_scale=1.0, with_sinks=False, spare_pages=3):
        g = torch.Generator().manual_seed(seed)
        kv_dtype = kv_dtype or dtype
        self.rows = rows  # [(prefix_len, extend_len)]
        self.Hq, self.Hkv, self.D = Hq, Hkv, D
        self.k_scale = k_scale if kv_dtype == FP8 else 1.0
        self.v_scale = v_scale if kv_dtype == FP8 else 1.0
        self._adopt(make_batch([e for _, e in rows], [p for p, _ in rows], Hq, Hkv, D, page_size,
                               dtype=dtype, kv_dtype=kv_dtype, generator=g, spare_pages=spare_pages,
                               k_scale=self.k_scale, v_scale=self.v_scale))
        self.sinks = torch.randn(Hq, generator=g) * 2 if with_sinks else None

    def _adopt(self, b):
        """Takes the layout and tensors of a mixed_attn.testing.MixedBatch (host lists of indptrs)."""
        self.page_size = b.page_size
        self.qo, self.kvp, self.seq = b.qo_indptr.tolist(), b.kv_indptr.tolist(), b.seq_lens.tolist()
        self.kv_indices = b.kv_indices
        self.q, self.k, self.v, self.k_cache, self.v_cache = b.q, b.k, b.v, b.k_cache, b.v_cache
        self.T = self.qo[-1]


def make_plan(case, mode=MODE_SPLIT, window_left=-1, deterministic=False, fixed_split_tokens=2048,
              num_sms=132, max_splits_per_row=32, tile_tokens=None, backend=CPU, decode_max_q=0):
    """The real planner. Returns (plan_info list, host int32 meta of exactly meta_len entries)."""
    on_gpu = backend.type == "cuda" and mixed_attn.has_cuda_kernels()
    cfg = make_config(backend if on_gpu else "cpu", case.page_size, case.Hq, case.Hkv, case.D,
                      num_sms=num_sms, window_left=window_left, mode=mode,
                      deterministic=deterministic, fixed_split_tokens=fixed_split_tokens,
                      max_splits_per_row=max_splits_per_row, kv_fp8=case.k_cache.dtype == FP8,
                      # A build without the CUDA backend plans for the CPU: any tile size makes
                      # a valid plan for Triton.
                      extend_tile_tokens=tile_tokens or (0 if on_gpu else 64), decode_max_q=decode_max_q)
    tt = torch.ops.mixed_attn.launch_policy(cfg)[3]
    B = len(case.seq)
    cap = torch.ops.mixed_attn.plan_meta_capacity(B, case.T, tt)
    meta = torch.full((cap,), -7, dtype=torch.int32)
    info = torch.ops.mixed_attn.plan(
        torch.tensor(case.qo, dtype=torch.int32), torch.tensor(case.kvp, dtype=torch.int32),
        torch.tensor(case.seq, dtype=torch.int32), meta, cfg)
    info = [int(x) for x in info]
    return info, meta[: field(info, "meta_len")].clone()


def poisoned(shape, dtype, device):
    return torch.full(shape, float("nan"), dtype=dtype, device=device)


def run_triton(case, info, meta, device=DEV, save=True, want_lse=True, window_left=-1, logit_cap=0.0,
               sm_scale=None, extra_slots=2):
    """triton_forward on fresh copies of the caches, outputs and arena poisoned with NaN."""
    dev = torch.device(device)
    n = field(info, "num_partials")
    po = poisoned((n + extra_slots, case.Hq, case.D), torch.float32, dev)
    pl = poisoned((n + extra_slots, case.Hq), torch.float32, dev)
    out = poisoned((case.T, case.Hq, case.D), case.q.dtype, dev)
    lse = poisoned((case.T, case.Hq), torch.float32, dev) if want_lse else None
    kc, vc = case.k_cache.to(dev), case.v_cache.to(dev)
    sinks = case.sinks.to(dev) if case.sinks is not None else None
    triton_forward(case.q.to(dev), case.k.to(dev) if save else None, case.v.to(dev) if save else None,
                   kc, vc, case.kv_indices.to(dev), meta.to(dev), info, po, pl, out, lse, sinks,
                   sm_scale if sm_scale is not None else 1.0 / math.sqrt(case.D), logit_cap, window_left,
                   case.k_scale, case.v_scale)
    return dict(out=out.cpu(), lse=lse.cpu() if lse is not None else None, k_cache=kc.cpu(), v_cache=vc.cpu(),
                partial_out=po.cpu(), partial_lse=pl.cpu())


def run_cpu_op(case, info, meta, save=True, window_left=-1, logit_cap=0.0, extra_slots=2):
    """torch.ops.mixed_attn.forward on the CPU, same plan, same poisoning."""
    n = field(info, "num_partials")
    po = poisoned((n + extra_slots, case.Hq, case.D), torch.float32, CPU)
    pl = poisoned((n + extra_slots, case.Hq), torch.float32, CPU)
    out = poisoned((case.T, case.Hq, case.D), case.q.dtype, CPU)
    lse = poisoned((case.T, case.Hq), torch.float32, CPU)
    kc, vc = case.k_cache.clone(), case.v_cache.clone()
    torch.ops.mixed_attn.forward(case.q, case.k if save else None, case.v if save else None, kc, vc,
                                 case.kv_indices, meta, info, po, pl, out, lse, case.sinks,
                                 1.0 / math.sqrt(case.D), logit_cap, window_left, case.k_scale, case.v_scale)
    return dict(out=out, lse=lse, k_cache=kc, v_cache=vc, partial_out=po, partial_lse=pl)


def reference(case, save=True, window_left=-1, logit_cap=0.0):
    kc, vc = case.k_cache, case.v_cache
    if save:
        kc, vc = reference_save_kv(kc, vc, case.k, case.v, case.qo, case.seq, case.kvp, case.kv_indices,
                                   case.page_size, case.k_scale, case.v_scale)
    out, lse = reference_attention(case.q, kc, vc, case.qo, case.seq, case.kvp, case.kv_indices,
                                   case.page_size, logit_cap=logit_cap, window_left=window_left,
                                   sinks=case.sinks, k_scale=case.k_scale, v_scale=case.v_scale)
    return dict(out=out, lse=lse, k_cache=kc, v_cache=vc)


def out_tol(case):
    """(atol, rtol) of out against fp64: what the dtype (and an fp8 cache) can do."""
    return (2e-2, 2e-2) if case.q.dtype == torch.bfloat16 else (3e-3, 3e-3)


def assert_close_to(got, want, atol, rtol, what):
    assert not torch.isnan(got).any(), f"{what}: NaN left (an element was not written)"
    torch.testing.assert_close(got.double(), want.double(), atol=atol, rtol=rtol, msg=lambda m: f"{what}: {m}")


def assert_cache_equal(got, want, what):
    if got.dtype == FP8:
        got, want = got.view(torch.uint8), want.view(torch.uint8)
    assert torch.equal(got, want), f"{what}: {int((got != want).sum())} cache elements differ"


def check_vs_reference(case, res, window_left=-1, logit_cap=0.0, save=True, lse=True):
    ref = reference(case, save=save, window_left=window_left, logit_cap=logit_cap)
    if case.k_cache.dtype == FP8:
        # The save multiplies by float32(1/scale) (the C++ binding's convention) where the
        # reference divides: equal but for rare one-step ties, so compare on the e4m3 grid, then
        # check attention against the reference over the cache the save actually wrote (one
        # e4m3 step on a key can move an output by more than the bf16 tolerance).
        for name in ("k_cache", "v_cache"):
            d = (res[name].float() - ref[name].float()).abs()
            step = ref[name].float().abs().clamp(min=2.0**-6) / 8
            assert (d <= step).all(), f"{name}: fp8 save more than one e4m3 step off"
            assert (d > 0).float().mean() < 1e-3, f"{name}: too many fp8 elements differ"
        ref["out"], ref["lse"] = reference_attention(
            case.q, res["k_cache"], res["v_cache"], case.qo, case.seq, case.kvp, case.kv_indices,
            case.page_size, logit_cap=logit_cap, window_left=window_left, sinks=case.sinks,
            k_scale=case.k_scale, v_scale=case.v_scale)
    else:
        assert_cache_equal(res["k_cache"], ref["k_cache"], "k_cache")
        assert_cache_equal(res["v_cache"], ref["v_cache"], "v_cache")
    atol, rtol = out_tol(case)
    assert_close_to(res["out"], ref["out"], atol, rtol, "out")
    if lse:
        assert_close_to(res["lse"], ref["lse"], 2e-3, 1e-4, "lse")


# ------------------------------------------------------------------------------------------
# KV save
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("page_size", [1, 3, 16])
@pytest.mark.parametrize("kv_dtype", [None, FP8], ids=["same", "fp8"])
def test_save_kv(page_size, kv_dtype):
    case = Case([(5, 3), (0, 1), (40, 1), (2, 19), (17, 1)], 4, 2, 64, page_size, kv_dtype=kv_dtype, seed=1,
                k_scale=0.37, v_scale=1.9)
    info, meta = make_plan(case)
    kc, vc = case.k_cache.to(DEV), case.v_cache.to(DEV)
    triton_save_kv(case.k.to(DEV), case.v.to(DEV), kc, vc, case.kv_indices.to(DEV), meta.to(DEV), info,
                   case.k_scale, case.v_scale)
    if kv_dtype == FP8:
        # Bit-exact against x * float32(1/scale) saturated and rounded to nearest even.
        inv_k, inv_v = float(torch.tensor(1.0 / case.k_scale, dtype=torch.float32)), \
            float(torch.tensor(1.0 / case.v_scale, dtype=torch.float32))
        want_k, want_v = case.k_cache.clone(), case.v_cache.clone()
        for b, (prefix, ext) in enumerate(case.rows):
            for i in range(ext):
                pos = prefix + i
                page = int(case.kv_indices[case.kvp[b] + pos // page_size])
                t = case.qo[b] + i
                want_k[page, pos % page_size] = (case.k[t].float() * inv_k).clamp(-448, 448).to(FP8)
                want_v[page, pos % page_size] = (case.v[t].float() * inv_v).clamp(-448, 448).to(FP8)
    else:
        want_k, want_v = reference_save_kv(case.k_cache, case.v_cache, case.k, case.v, case.qo, case.seq,
                                           case.kvp, case.kv_indices, page_size)
    assert_cache_equal(kc.cpu(), want_k, "k_cache")
    assert_cache_equal(vc.cpu(), want_v, "v_cache")


def test_save_kv_fp8_rounding_and_saturation():
    # Ties, carries into the exponent, subnormals and values past 448 all land where torch puts them.
    grid = torch.arange(256, dtype=torch.uint8).view(FP8).float()
    grid = grid[~grid.isnan()].unique()
    mids = (grid[1:] + grid[:-1]) / 2
    vals = torch.cat([grid, mids, mids.nextafter(torch.full_like(mids, 1e9)),
                      mids.nextafter(torch.full_like(mids, -1e9)), torch.tensor([500.0, -1000.0, 449.0])])
    D, n = 64, (vals.numel() + 63) // 64
    vals = torch.cat([vals, torch.zeros(n * D - vals.numel())]).view(n, 1, D)
    case = Case([(0, n)], 1, 1, D, 4, dtype=torch.float32, kv_dtype=FP8, k_scale=1.0, v_scale=1.0)
    case.k, case.v = vals.clone(), -vals
    info, meta = make_plan(case)
    kc, vc = case.k_cache.to(DEV), case.v_cache.to(DEV)
    triton_save_kv(case.k.to(DEV), case.v.to(DEV), kc, vc, case.kv_indices.to(DEV), meta.to(DEV), info)
    got = torch.cat([kc.cpu()[int(p)] for p in case.kv_indices]).view(-1, D)[:n]
    want = vals.view(n, D).clamp(-448, 448).to(FP8)
    assert torch.equal(got.view(torch.uint8), want.view(torch.uint8)), "fp8 rounding differs from torch's"


# ------------------------------------------------------------------------------------------
# The whole step against the fp64 reference
# ------------------------------------------------------------------------------------------
# (id, rows, Hq, Hkv, D, page_size, dtype, kv_dtype, window_left, logit_cap, sinks, plan options)
ROWS_MIXED = [(30, 5), (0, 1), (97, 1), (17, 1), (3, 20), (54, 1)]
ROWS_DECODES_FIRST = [(97, 1), (0, 1), (40, 1), (13, 37), (0, 19)]
CASES = [
    ("mixed-bf16-p4-gqa4", ROWS_MIXED, 8, 2, 64, 4, torch.bfloat16, None, -1, 0.0, False, {}),
    ("mixed-fold", ROWS_MIXED, 8, 2, 64, 4, torch.bfloat16, None, -1, 0.0, False, dict(mode=MODE_FOLD)),
    ("decfirst-p1-window-cap-sinks", ROWS_DECODES_FIRST, 4, 4, 64, 1, torch.bfloat16, None, 20, 5.0, True, {}),
    ("fp8-fp16-p16-sinks", [(100, 1), (50, 37), (70, 1)], 6, 2, 64, 16, torch.float16, FP8, -1, 0.0, True, {}),
    ("splits-det-window-g16", [(200, 1), (50, 7), (170, 1), (0, 1)], 16, 1, 64, 3, torch.bfloat16, None, 150, 0.0,
     False, dict(deterministic=True, fixed_split_tokens=64)),
    ("splits-det-fp8-cap-p16", [(300, 1), (6, 23), (129, 1)], 4, 2, 128, 16, torch.bfloat16, FP8, -1, 30.0, True,
     dict(deterministic=True, fixed_split_tokens=64)),
    ("tile5-fold-window", [(11, 13), (64, 1), (0, 7)], 6, 3, 64, 2, torch.float16, None, 6, 0.0, False,
     dict(mode=MODE_FOLD, tile_tokens=5)),
    ("d256-g2", [(20, 9), (33, 1)], 4, 2, 256, 8, torch.bfloat16, None, -1, 0.0, True, {}),
]


@pytest.mark.parametrize("case_id,rows,Hq,Hkv,D,ps,dtype,kv_dtype,window,cap,sinks,popts", CASES,
                         ids=[c[0] for c in CASES])
def test_forward_vs_reference(case_id, rows, Hq, Hkv, D, ps, dtype, kv_dtype, window, cap, sinks, popts):
    case = Case(rows, Hq, Hkv, D, ps, dtype=dtype, kv_dtype=kv_dtype, seed=zlib.crc32(case_id.encode()) % 1000,
                k_scale=0.6, v_scale=1.7, with_sinks=sinks)
    info, meta = make_plan(case, window_left=window, **popts)
    if "deterministic" in popts:
        assert field(info, "max_splits") > 1, "the case must exercise several splits"
    res = run_triton(case, info, meta, window_left=window, logit_cap=cap)
    check_vs_reference(case, res, window_left=window, logit_cap=cap)


def test_no_save_and_no_lse():
    case = Case(ROWS_MIXED, 8, 2, 64, 4, seed=5, with_sinks=True)
    info, meta = make_plan(case)
    res = run_triton(case, info, meta, save=False, want_lse=False)
    assert_cache_equal(res["k_cache"], case.k_cache, "k_cache (no save)")
    assert_cache_equal(res["v_cache"], case.v_cache, "v_cache (no save)")
    check_vs_reference(case, res, save=False, lse=False)


def test_split_and_fold_agree():
    case = Case(ROWS_MIXED + [(150, 1)], 8, 4, 64, 16, seed=6, with_sinks=True)
    split = run_triton(case, *make_plan(case, deterministic=True, fixed_split_tokens=64), window_left=70)
    fold = run_triton(case, *make_plan(case, mode=MODE_FOLD, window_left=70), window_left=70)
    assert_close_to(split["out"], fold["out"].double(), 2e-2, 2e-2, "split vs fold out")
    assert_close_to(split["lse"], fold["lse"].double(), 1e-3, 1e-4, "split vs fold lse")


def test_decode_row_alone_equals_in_batch():
    # Deterministic splits: a decode row's output does not depend on its batch, bit for bit.
    alone = Case([(180, 1)], 8, 2, 64, 16, seed=7, with_sinks=True)
    batch = Case([(30, 9), (180, 1), (70, 1), (400, 1)], 8, 2, 64, 16, seed=8, with_sinks=True)  # more splits
    # Same row data in both: row 1 of `batch` gets row 0 of `alone`'s pages, query, k, v, sinks.
    batch.sinks = alone.sinks
    for b_page, a_page in zip(batch.kv_indices[batch.kvp[1]:batch.kvp[2]], alone.kv_indices):
        batch.k_cache[int(b_page)] = alone.k_cache[int(a_page)]
        batch.v_cache[int(b_page)] = alone.v_cache[int(a_page)]
    t = batch.qo[1]
    batch.q[t], batch.k[t], batch.v[t] = alone.q[0], alone.k[0], alone.v[0]
    opts = dict(deterministic=True, fixed_split_tokens=64)
    r_alone = run_triton(alone, *make_plan(alone, **opts))
    r_batch = run_triton(batch, *make_plan(batch, **opts))
    assert torch.equal(r_alone["out"][0], r_batch["out"][t])
    assert torch.equal(r_alone["lse"][0], r_batch["lse"][t])


def _repaged(case, page_size, row_order, seed):
    """The same logical batch with another page size, rows in another order, pages shuffled anew."""
    import copy
    new = copy.copy(case)
    new.rows = [case.rows[b] for b in row_order]
    new._adopt(make_batch([e for _, e in new.rows], [p for p, _ in new.rows], case.Hq, case.Hkv,
                          case.D, page_size, dtype=case.q.dtype, kv_dtype=case.k_cache.dtype,
                          seed=seed, spare_pages=2, k_scale=case.k_scale, v_scale=case.v_scale))
    tok = []
    for nb, b in enumerate(row_order):
        tok += list(range(case.qo[b], case.qo[b + 1]))
        for j in range(case.seq[b]):
            src = (int(case.kv_indices[case.kvp[b] + j // case.page_size]), j % case.page_size)
            dst = (int(new.kv_indices[new.kvp[nb] + j // page_size]), j % page_size)
            new.k_cache[dst] = case.k_cache[src]
            new.v_cache[dst] = case.v_cache[src]
    new.q, new.k, new.v = case.q[tok], case.k[tok], case.v[tok]
    return new, tok


def test_page_size_and_row_order_do_not_change_results():
    # Page size 16 vs 1 and decodes last vs first: the same rows give the same bits. (Without a
    # window: deterministic splits then start at key 0 and align to 64 keys at either page size;
    # a window's first split starts on a page boundary, which does depend on the page size.)
    case = Case([(40, 9), (150, 1), (0, 1), (77, 1), (5, 20)], 8, 2, 64, 16, seed=15, with_sinks=True)
    order = [1, 2, 3, 0, 4]  # decodes first
    other, tok = _repaged(case, 1, order, seed=16)
    opts = dict(deterministic=True, fixed_split_tokens=64)
    a = run_triton(case, *make_plan(case, **opts), logit_cap=10.0)
    b = run_triton(other, *make_plan(other, **opts), logit_cap=10.0)
    if HAS_CUDA:  # compiled per page size (Triton specialises page_size == 1): allow one rounding
        assert_close_to(b["out"], a["out"][tok].double(), 0, 8e-3, "out, page size 1 vs 16")
        assert_close_to(b["lse"], a["lse"][tok].double(), 1e-5, 1e-6, "lse, page size 1 vs 16")
    else:
        assert torch.equal(a["out"][tok], b["out"]), "out depends on the page size or the row order"
        assert torch.equal(a["lse"][tok], b["lse"])
    check_vs_reference(other, b, logit_cap=10.0)


def test_split_without_visible_key():
    # A plan whose decode rows start at key 0 despite the window: the early splits see no key and
    # must write LSE -inf and a zero output; the merge must ignore them.
    case = Case([(250, 1), (10, 6), (190, 1)], 4, 2, 64, 16, seed=9, with_sinks=True)
    window = 40
    info, meta = make_plan(case, window_left=window, deterministic=True, fixed_split_tokens=64)
    assert int(unpack_meta(info, meta)["decode_kv_start"].max()) > 0  # the planner skips them itself
    # Plan without the window so the split layout starts at key 0, then attend with the window.
    info0, meta0 = make_plan(case, deterministic=True, fixed_split_tokens=64)
    assert all(int(x) == 0 for x in unpack_meta(info0, meta0)["decode_kv_start"])
    res = run_triton(case, info0, meta0, window_left=window)
    n = field(info0, "num_partials")
    lse_p = res["partial_lse"][:n]
    empty = torch.isinf(lse_p) & (lse_p < 0)
    assert empty.any(), "the case must produce splits with no visible key"
    assert (res["partial_out"][:n][empty] == 0).all(), "an empty split must write a zero output"
    assert not torch.isnan(lse_p).any() and not torch.isnan(res["partial_out"][:n]).any()
    check_vs_reference(case, res, window_left=window)


def test_decode_stage1_writes_exactly_its_slots():
    # Stage 1 alone: every slot of the plan written, nothing past num_partials, out untouched.
    case = Case([(200, 1), (7, 5), (90, 1), (0, 1)], 8, 2, 64, 4, seed=13)
    info, meta = make_plan(case, deterministic=True, fixed_split_tokens=64)
    n = field(info, "num_partials")
    dev = torch.device(DEV)
    po = poisoned((n + 3, case.Hq, case.D), torch.float32, dev)
    pl = poisoned((n + 3, case.Hq), torch.float32, dev)
    out = poisoned((case.T, case.Hq, case.D), case.q.dtype, dev)
    triton_decode(case.q.to(dev), case.k_cache.to(dev), case.v_cache.to(dev), case.kv_indices.to(dev),
                  meta.to(dev), info, po, pl, out, merge=False)
    po, pl = po.cpu(), pl.cpu()
    assert not torch.isnan(po[:n]).any() and not torch.isnan(pl[:n]).any(), "a plan slot was not written"
    assert torch.isnan(po[n:]).all() and torch.isnan(pl[n:]).all(), "written past the plan's slots"
    assert torch.isnan(out.cpu()).all(), "stage 1 must not touch out"


def test_rejects_bad_input_before_writing():
    case = Case(ROWS_MIXED, 8, 2, 64, 4, seed=14)
    info, meta = make_plan(case)
    n = field(info, "num_partials")
    kc = case.k_cache.clone()
    po, pl = torch.zeros(n, 8, 64), torch.zeros(n, 8)
    good = dict(q=case.q, k=case.k, v=case.v, k_cache=kc, v_cache=case.v_cache.clone(),
                kv_indices=case.kv_indices, plan_meta=meta, plan_info=info, partial_out=po, partial_lse=pl,
                out=torch.empty(case.T, 8, 64, dtype=case.q.dtype), lse=None, sinks=None, sm_scale=0.125,
                logit_cap=0.0, window_left=-1, k_scale=1.0, v_scale=1.0)
    bad = [("out", torch.empty(case.T, 8, 64, dtype=torch.float16)), ("k", case.k[:, :1]),
           ("kv_indices", case.kv_indices.long()), ("lse", torch.empty(case.T, 8, dtype=torch.float64)),
           ("plan_info", [0] * len(info)), ("q", case.q[:-1])]
    for name, value in bad:
        with pytest.raises(ValueError, match=name if name != "plan_info" else "plan"):
            triton_forward(**{**good, name: value})
    assert_cache_equal(kc, case.k_cache, "k_cache after rejected calls")


def test_sm_aware_max_splits_cap():
    # SM-aware policy with a tight cap: longer chunks than min_split_tokens, still exact.
    case = Case([(700, 1), (3, 4), (513, 1)], 4, 1, 64, 1, seed=10)
    info, meta = make_plan(case, num_sms=64, max_splits_per_row=2)
    assert field(info, "max_splits") == 2
    res = run_triton(case, info, meta)
    check_vs_reference(case, res)


# ------------------------------------------------------------------------------------------
# Against the CPU op, same plan
# ------------------------------------------------------------------------------------------
CPU_OP_CASES = [
    ("bf16-p4", [(200, 1), (30, 5), (0, 1), (129, 1), (3, 20)], 8, 2, 64, 4, torch.bfloat16, None, -1, 0.0, True),
    ("fp8-window-cap", [(300, 1), (6, 23), (90, 1)], 4, 2, 128, 16, torch.bfloat16, FP8, 100, 20.0, True),
    ("fp16-p1-g1", [(140, 1), (17, 11), (1, 1)], 2, 2, 64, 1, torch.float16, None, 100, 0.0, False),
]


@pytest.mark.parametrize("case_id,rows,Hq,Hkv,D,ps,dtype,kv_dtype,window,cap,sinks", CPU_OP_CASES,
                         ids=[c[0] for c in CPU_OP_CASES])
def test_matches_cpu_op(case_id, rows, Hq, Hkv, D, ps, dtype, kv_dtype, window, cap, sinks):
    case = Case(rows, Hq, Hkv, D, ps, dtype=dtype, kv_dtype=kv_dtype, seed=len(case_id), k_scale=0.8,
                v_scale=1.3, with_sinks=sinks)
    info, meta = make_plan(case, window_left=window, deterministic=True, fixed_split_tokens=64)
    assert field(info, "max_splits") > 1
    tri = run_triton(case, info, meta, window_left=window, logit_cap=cap)
    cpu = run_cpu_op(case, info, meta, window_left=window, logit_cap=cap)
    # Same save, bit for bit (fp8 included: both multiply by float32(1/scale)).
    assert_cache_equal(tri["k_cache"], cpu["k_cache"], "k_cache")
    assert_cache_equal(tri["v_cache"], cpu["v_cache"], "v_cache")
    # Same arena slots, within what bf16 tensor-core inputs allow (P is rounded to q's dtype).
    n = field(info, "num_partials")
    assert_close_to(tri["partial_lse"][:n], cpu["partial_lse"][:n].double(), 1e-3, 1e-4, "partial_lse")
    assert_close_to(tri["partial_out"][:n], cpu["partial_out"][:n].double(), 1e-2, 1e-2, "partial_out")
    atol, rtol = out_tol(case)
    assert_close_to(tri["out"], cpu["out"].double(), atol, rtol, "out")
    assert_close_to(tri["lse"], cpu["lse"].double(), 1e-3, 1e-4, "lse")


VERIFY_CASES = [
    # Verify rows of 2-16 tokens (prefix 0 and long), one-token decodes, an extend row.
    ("p1-gqa4", [(300, 2), (50, 7), (0, 16), (200, 1), (3, 40), (129, 3)], 8, 2, 1, -1, 0.0),
    ("p16-gqa8-window-cap", [(400, 16), (33, 5), (90, 1), (0, 2)], 16, 2, 16, 100, 20.0),
]


@pytest.mark.parametrize("case_id,rows,Hq,Hkv,ps,window,cap", VERIFY_CASES, ids=[c[0] for c in VERIFY_CASES])
def test_verify_rows_match_reference_and_cpu_op(case_id, rows, Hq, Hkv, ps, window, cap):
    # Same plan, same classification: the oracle's arena slots (split-major per query) equal the
    # CPU op's, and both match the fp64 reference.
    case = Case(rows, Hq, Hkv, 64, ps, seed=len(case_id), with_sinks=True)
    info, meta = make_plan(case, window_left=window, deterministic=True, fixed_split_tokens=64, decode_max_q=16)
    assert field(info, "num_decode_rows") == sum(e <= 16 for _, e in rows) and field(info, "max_splits") > 1
    tri = run_triton(case, info, meta, window_left=window, logit_cap=cap)
    cpu = run_cpu_op(case, info, meta, window_left=window, logit_cap=cap)
    check_vs_reference(case, tri, window_left=window, logit_cap=cap)
    n = field(info, "num_partials")
    assert_close_to(tri["partial_lse"][:n], cpu["partial_lse"][:n].double(), 1e-3, 1e-4, "partial_lse")
    assert_close_to(tri["partial_out"][:n], cpu["partial_out"][:n].double(), 1e-2, 1e-2, "partial_out")
    atol, rtol = out_tol(case)
    assert_close_to(tri["out"], cpu["out"].double(), atol, rtol, "out")


def test_wrapper_plan_drives_triton():
    # The wrapper's plan and arena (MixedAttention on the CPU) drive the Triton oracle as they drive
    # the op: same outputs, and the oracle's partials land in the slots the wrapper's op used.
    case = Case([(120, 1), (9, 14), (77, 1)], 8, 2, 64, 16, seed=11, with_sinks=True)
    w = mixed_attn.MixedAttention(8, 2, 64, 16, device="cpu", q_dtype=torch.bfloat16, max_batch=4,
                                  max_tokens=64, deterministic=True, fixed_split_tokens=64)
    w.plan(case.qo, case.kvp, case.seq)
    kc, vc = case.k_cache.clone(), case.v_cache.clone()
    out_op, lse_op = w.run(case.q, kc, vc, case.kv_indices, k=case.k, v=case.v, return_lse=True,
                           sinks=case.sinks)
    n = field(w.plan_info, "num_partials")
    op_po, op_pl = w.partial_out[:n].clone(), w.partial_lse[:n].clone()
    res = run_triton(case, w.plan_info, w.plan_meta)  # the whole buffer, as the benchmarks pass it
    assert_close_to(res["out"], out_op.double(), 2e-2, 2e-2, "out vs wrapper")
    assert_close_to(res["lse"], lse_op.double(), 1e-3, 1e-4, "lse vs wrapper")
    assert_close_to(res["partial_lse"][:n], op_pl.double(), 1e-3, 1e-4, "partial_lse vs wrapper arena")
    assert_close_to(res["partial_out"][:n], op_po.double(), 1e-2, 1e-2, "partial_out vs wrapper arena")
    check_vs_reference(case, res)


# ------------------------------------------------------------------------------------------
# GPU: real sizes, every feature, odd lengths (skipped without CUDA; never interpreted)
# ------------------------------------------------------------------------------------------
def _gpu_rows(seed, n_dec, dec_lo, dec_hi, extends, decodes_first):
    g = torch.Generator().manual_seed(seed)
    dec = [(int(x), 1) for x in torch.randint(dec_lo, dec_hi, (n_dec,), generator=g)]
    return dec + extends if decodes_first else extends + dec


GPU_CASES = [
    # id, Hq, Hkv, D, page, dtype, kv_dtype, window, cap, sinks, deterministic, rows
    ("llama-p16-bf16", 32, 8, 128, 16, torch.bfloat16, None, -1, 0.0, False, False,
     _gpu_rows(1, 17, 54, 4000, [(1000, 613), (0, 97)], False)),
    ("fp8-window-cap-sinks", 32, 8, 128, 16, torch.bfloat16, FP8, 1023, 30.0, True, False,
     _gpu_rows(2, 13, 600, 5000, [(2047, 511), (3, 54)], True)),
    ("p1-g1-fp16-det", 8, 8, 64, 1, torch.float16, None, -1, 0.0, True, True,
     _gpu_rows(3, 9, 1, 3000, [(97, 301)], False)),
    ("d256-g2", 16, 8, 256, 32, torch.bfloat16, None, 257, 0.0, True, False,
     _gpu_rows(4, 7, 100, 3000, [(613, 129)], True)),
    ("g16-p64", 16, 1, 128, 64, torch.bfloat16, None, -1, 0.0, False, False,
     _gpu_rows(5, 33, 1, 8000, [(0, 1000)], False)),
]


@requires_cuda
@pytest.mark.parametrize("mode", [MODE_SPLIT, MODE_FOLD], ids=["split", "fold"])
@pytest.mark.parametrize("case_id,Hq,Hkv,D,ps,dtype,kv_dtype,window,cap,sinks,det,rows", GPU_CASES,
                         ids=[c[0] for c in GPU_CASES])
def test_gpu_vs_reference(case_id, Hq, Hkv, D, ps, dtype, kv_dtype, window, cap, sinks, det, rows, mode):
    case = Case(rows, Hq, Hkv, D, ps, dtype=dtype, kv_dtype=kv_dtype, seed=len(case_id), k_scale=0.5,
                v_scale=2.0, with_sinks=sinks)
    cuda = torch.device("cuda")
    info, meta = make_plan(case, mode=mode, window_left=window, deterministic=det, fixed_split_tokens=512,
                           backend=cuda)
    res = run_triton(case, info, meta, device="cuda", window_left=window, logit_cap=cap)
    check_vs_reference(case, res, window_left=window, logit_cap=cap)
    if mixed_attn.has_cuda_kernels():
        # Same plan through the CUDA op: saves, outputs and (split) arena partials agree with the oracle.
        n = field(info, "num_partials")
        po = poisoned((n + 1, Hq, D), torch.float32, cuda) if n else None  # fold: no arena, as the wrapper
        pl = poisoned((n + 1, Hq), torch.float32, cuda) if n else None
        out = poisoned((case.T, Hq, D), dtype, cuda)
        lse = poisoned((case.T, Hq), torch.float32, cuda)
        kc, vc = case.k_cache.to(cuda), case.v_cache.to(cuda)
        torch.ops.mixed_attn.forward(case.q.to(cuda), case.k.to(cuda), case.v.to(cuda), kc, vc,
                                     case.kv_indices.to(cuda), meta.to(cuda), info, po, pl, out, lse,
                                     case.sinks.to(cuda) if sinks else None, 1.0 / math.sqrt(D), cap, window,
                                     case.k_scale, case.v_scale)
        torch.cuda.synchronize()
        assert_cache_equal(kc.cpu(), res["k_cache"], "k_cache: CUDA op vs Triton")
        assert_cache_equal(vc.cpu(), res["v_cache"], "v_cache: CUDA op vs Triton")
        if n:
            # The CUDA decode writes a row with a single split straight to out / lse and leaves its
            # arena slot alone (the arena is scratch): compare the slots of split rows only.
            sp = unpack_meta(info, meta.cpu())["decode_split_indptr"].tolist()
            slots = [s for d in range(len(sp) - 1) if sp[d + 1] - sp[d] > 1 for s in range(sp[d], sp[d + 1])]
            if slots:
                idx = torch.tensor(slots)
                assert_close_to(pl.cpu()[idx], res["partial_lse"][idx].double(), 1e-3, 1e-4,
                                "partial_lse: CUDA vs Triton")
                assert_close_to(po.cpu()[idx], res["partial_out"][idx].double(), 1e-2, 1e-2,
                                "partial_out: CUDA vs Triton")
        atol, rtol = out_tol(case)
        assert_close_to(out.cpu(), res["out"].double(), atol, rtol, "out: CUDA vs Triton")
        assert_close_to(lse.cpu(), res["lse"].double(), 2e-3, 1e-4, "lse: CUDA vs Triton")


@requires_cuda
def test_gpu_repeatable():
    # Two runs of the same step give the same bits (a moving result is a race).
    case = Case(_gpu_rows(6, 40, 100, 6000, [(500, 777)], False), 32, 8, 128, 16, seed=12, with_sinks=True)
    info, meta = make_plan(case, window_left=2000, backend=torch.device("cuda"))
    a = run_triton(case, info, meta, device="cuda", window_left=2000, logit_cap=20.0)
    b = run_triton(case, info, meta, device="cuda", window_left=2000, logit_cap=20.0)
    assert torch.equal(a["out"], b["out"]) and torch.equal(a["lse"], b["lse"])
