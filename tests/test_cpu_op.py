"""The CPU op against the fp64 reference, split vs fold, determinism (no GPU needed)."""

import pytest
import torch

from helpers import assert_close_to_reference, run_op, run_reference
from mixed_attn.reference import FP8
from mixed_attn.testing import make_batch

# A small mixed batch with odd lengths, decodes interleaved, one row with prefix 0.
MIXED = dict(extend_lens=[54, 1, 97, 1, 1, 13], prefix_lens=[40, 300, 0, 1, 77, 5])


@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize("heads", [(4, 4), (8, 2), (16, 2)], ids=["gqa1", "gqa4", "gqa8"])
@pytest.mark.parametrize("page_size", [1, 16])
def test_geometry_matches_reference(head_dim, heads, page_size):
    Hq, Hkv = heads
    b = make_batch(**MIXED, num_qo_heads=Hq, num_kv_heads=Hkv, head_dim=head_dim,
                   page_size=page_size, seed=head_dim + Hq + page_size)
    out, lse, kc, vc, w = run_op(b)
    ro, rl, rk, rv = run_reference(b)
    assert_close_to_reference(out, lse, ro, rl, torch.bfloat16)
    assert torch.equal(kc, rk) and torch.equal(vc, rv), "KV save wrote the wrong slots"
    assert w.last_path == "split" and w.num_decode_rows == sum(e <= w.decode_max_q for e in MIXED["extend_lens"])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_dtypes(dtype):
    b = make_batch(**MIXED, num_qo_heads=8, num_kv_heads=2, head_dim=64, page_size=16,
                   dtype=dtype, seed=3)
    out, lse, *_ = run_op(b)
    ro, rl, *_ = run_reference(b)
    assert_close_to_reference(out, lse, ro, rl, dtype)


@pytest.mark.parametrize("window_left", [0, 5, 16, 17, 200])
@pytest.mark.parametrize("page_size", [1, 16])
def test_window(window_left, page_size):
    # Windows that end inside a page, on a page boundary, and beyond the sequence.
    b = make_batch(**MIXED, num_qo_heads=4, num_kv_heads=2, head_dim=64, page_size=page_size,
                   seed=window_left)
    for mode in ("split", "fold"):
        out, lse, *_ = run_op(b, mode=mode, window_left=window_left)
        ro, rl, *_ = run_reference(b, window_left=window_left)
        assert_close_to_reference(out, lse, ro, rl, torch.bfloat16)


def test_logit_cap_sinks_and_scale():
    b = make_batch(**MIXED, num_qo_heads=8, num_kv_heads=2, head_dim=128, page_size=16, seed=11)
    sinks = torch.randn(8) * 2
    opts = dict(logit_cap=3.0, sinks=sinks, sm_scale=0.3)
    out, lse, *_ = run_op(b, **opts)
    ro, rl, *_ = run_reference(b, **opts)
    assert_close_to_reference(out, lse, ro, rl, torch.bfloat16)
    # The features must matter: without them the answer is different.
    ro_plain, *_ = run_reference(b)
    assert (ro_plain - ro).abs().max() > 0.05


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_fp8_cache(dtype):
    ks, vs = 0.7, 1.9
    b = make_batch(**MIXED, num_qo_heads=8, num_kv_heads=2, head_dim=64, page_size=16,
                   dtype=dtype, kv_dtype=FP8, seed=5, k_scale=ks, v_scale=vs)
    out, lse, kc, vc, _ = run_op(b, k_scale=ks, v_scale=vs)
    ro, rl, rk, rv = run_reference(b, k_scale=ks, v_scale=vs)
    # The save quantises exactly like the reference (round to nearest even, saturating).
    assert torch.equal(kc.view(torch.uint8), rk.view(torch.uint8))
    assert torch.equal(vc.view(torch.uint8), rv.view(torch.uint8))
    assert_close_to_reference(out, lse, ro, rl, dtype)


def test_fp8_save_saturates():
    b = make_batch([3], [2], num_qo_heads=2, num_kv_heads=1, head_dim=64, page_size=4,
                   kv_dtype=FP8, seed=1)
    b.k.mul_(1000.0)  # far past e4m3's 448
    _, _, kc, _, _ = run_op(b, k_scale=1.0)
    vals = kc.float()
    assert torch.isfinite(vals).all() and vals.abs().max() == 448.0


@pytest.mark.parametrize("name,ext,pre", [
    ("odd_ragged", [1, 54, 97, 613, 1], [7, 0, 31, 2, 999]),
    ("prefix0", [5, 1, 33], [0, 0, 0]),
    ("all_decode", [1] * 9, [0, 1, 15, 16, 17, 100, 255, 256, 1000]),
    ("all_extend", [2, 17, 64, 65], [100, 0, 3, 64]),
    ("decodes_first", [1, 1, 1, 40, 70], [50, 60, 70, 10, 0]),
    ("decodes_last", [40, 70, 1, 1, 1], [10, 0, 50, 60, 70]),
])
def test_batch_shapes(name, ext, pre):
    b = make_batch(ext, pre, num_qo_heads=4, num_kv_heads=1, head_dim=64, page_size=16, seed=len(ext))
    out, lse, kc, vc, w = run_op(b)
    ro, rl, rk, rv = run_reference(b)
    assert_close_to_reference(out, lse, ro, rl, torch.bfloat16)
    assert torch.equal(kc, rk) and torch.equal(vc, rv)
    assert w.num_decode_rows == sum(e <= w.decode_max_q for e in ext)


def test_split_and_fold_agree():
    b = make_batch([1, 120, 1, 1, 9], [2000, 30, 517, 64, 3], num_qo_heads=8, num_kv_heads=2,
                   head_dim=64, page_size=16, seed=21)
    # A small split size forces several splits per decode row.
    s_out, s_lse, _, _, ws = run_op(b, mode="split", deterministic=True, fixed_split_tokens=128)
    f_out, f_lse, _, _, wf = run_op(b, mode="fold")
    assert ws.last_path == "split" and wf.last_path == "fold"
    assert ws.plan_info[9] > 1  # max_splits: the decode rows really were split
    assert (s_out.float() - f_out.float()).abs().max() <= 1.6e-2
    assert (s_lse - f_lse).abs().max() <= 1e-4


def test_skip_save():
    b = make_batch(**MIXED, num_qo_heads=4, num_kv_heads=2, head_dim=64, page_size=16, seed=8)
    out, lse, kc, vc, _ = run_op(b, save=False)
    ro, rl, *_ = run_reference(b, save=False)
    assert_close_to_reference(out, lse, ro, rl, torch.bfloat16)
    assert torch.equal(kc, b.k_cache) and torch.equal(vc, b.v_cache)


def _decode_row_output(b, row, fixed_split_tokens=256):
    # fp32 queries and LSE: rounding to bf16 would hide a changed summation order.
    out, lse, *_ = run_op(b, deterministic=True, fixed_split_tokens=fixed_split_tokens)
    t = int(b.qo_indptr[row])
    return torch.cat([out[t].flatten(), lse[t]])


def _embed_row(b, row, b0):
    """Makes row `row` of batch b the lone row of b0: same query, new token and cache pages."""
    t = int(b.qo_indptr[row])
    b.q[t] = b0.q[0]
    b.k[t], b.v[t] = b0.k[0], b0.v[0]
    dst = b.kv_indices[int(b.kv_indptr[row]): int(b.kv_indptr[row + 1])].long()
    src = b0.kv_indices[: dst.numel()].long()
    b.k_cache[dst] = b0.k_cache[src]
    b.v_cache[dst] = b0.v_cache[src]


def test_deterministic_decode_row_is_batch_invariant():
    # The same decode row (same q, same cache contents) alone and in different mixed batches.
    geo = dict(num_qo_heads=8, num_kv_heads=2, head_dim=64, page_size=16, dtype=torch.float32)
    b0 = make_batch([1], [1500], seed=99, **geo)
    alone = _decode_row_output(b0, 0)
    for ext, pre, row in [([1, 1, 1], [1500, 30, 4000], 0), ([300, 1, 1], [10, 1500, 2], 1),
                          ([1, 1, 1, 1, 77, 1], [5, 6, 7, 8, 100, 1500], 5)]:
        b = make_batch(ext, pre, seed=7, **geo)
        _embed_row(b, row, b0)
        assert torch.equal(_decode_row_output(b, row), alone), f"decode row changed inside batch {ext}"
    # The check can fail: another split size changes the summation order and the bits.
    assert not torch.equal(_decode_row_output(b0, 0, fixed_split_tokens=512), alone)
