"""Wrapper behaviour: kill switch, path log, arena, opcheck and torch.compile."""

import logging

import pytest
import torch

import mixed_attn
from helpers import run_op
from mixed_attn import MixedAttention
from mixed_attn.testing import make_batch, poison_like
from mixed_attn.wrapper import _logged_paths


def small_batch(seed=0):
    return make_batch([1, 20, 1], [33, 5, 70], num_qo_heads=4, num_kv_heads=2, head_dim=64,
                      page_size=16, seed=seed)


def test_fold_mode_allocates_no_arena():
    # MIXED_ATTN_SPLIT_DISPATCH=0 (tests/test_env.py) makes "fold" the mode; fold itself must agree
    # with split and allocate no arena.
    b = small_batch()
    out, _, _, _, w = run_op(b, mode="fold")
    assert w.mode == "fold" and w.last_path == "fold"
    assert w.partial_out is None, "fold mode must not allocate the arena"
    out2, _, _, _, w2 = run_op(b, mode="split")
    assert w2.last_path == "split" and w2.partial_out is not None
    assert (out.float() - out2.float()).abs().max() < 2e-2


def test_first_use_of_each_path_is_logged_once(caplog):
    _logged_paths.clear()
    b = small_batch()
    with caplog.at_level(logging.INFO, logger="mixed_attn"):
        for _ in range(3):
            run_op(b, mode="split")
        run_op(b, mode="fold")
    msgs = [r.getMessage() for r in caplog.records if "first use" in r.getMessage()]
    assert len(msgs) == 2 and "split" in msgs[0] and "fold" in msgs[1]


def test_arena_is_allocated_once_and_reused():
    b = small_batch()
    w = MixedAttention(4, 2, 64, 16, device="cpu", max_batch=8, max_tokens=64)
    arena = w.partial_out.data_ptr()
    for seed in range(4):
        run_op(make_batch([1, 3 + seed, 1, 1], [40 * seed + 1, 5, 7, 300], num_qo_heads=4,
                          num_kv_heads=2, head_dim=64, page_size=16, seed=seed), wrapper=w)
    assert w.partial_out.data_ptr() == arena and w.arena_grows == 0
    del b


def test_arena_grows_once_with_a_warning(caplog):
    w = MixedAttention(4, 2, 64, 16, device="cpu", max_batch=2, max_tokens=64,
                       max_splits_per_row=1, deterministic=True, fixed_split_tokens=64)
    b = make_batch([1, 1], [1000, 700], num_qo_heads=4, num_kv_heads=2, head_dim=64, page_size=16)
    with caplog.at_level(logging.WARNING, logger="mixed_attn"):
        out, *_ = run_op(b, wrapper=w)
        run_op(b, wrapper=w)
    assert w.arena_grows == 1
    assert sum("growing it once" in r.getMessage() for r in caplog.records) == 1
    assert not torch.isnan(out).any()


def test_run_before_plan_is_an_error():
    w = MixedAttention(4, 2, 64, 16, device="cpu")
    b = small_batch()
    with pytest.raises(RuntimeError, match="before plan"):
        w.run(b.q, b.k_cache, b.v_cache, b.kv_indices)


def test_functional_form_and_returned_out():
    b = small_batch()
    kc, vc = b.k_cache.clone(), b.v_cache.clone()
    out = mixed_attn.mixed_attention(b.q, b.k, b.v, kc, vc, b.qo_indptr, b.kv_indptr, b.kv_indices,
                                     b.seq_lens, 16)
    ref, *_ = run_op(b)
    assert torch.equal(out, ref)


def _op_args(b, w):
    out = poison_like(b.q)
    lse = torch.full((b.q.shape[0], 4), float("nan"))
    return (b.q, b.k, b.v, b.k_cache.clone(), b.v_cache.clone(), b.kv_indices, w.plan_meta,
            w.plan_info, w.partial_out, w.partial_lse, out, lse, None, 0.125, 0.0, -1, 1.0, 1.0)


def test_opcheck():
    b = small_batch()
    w = MixedAttention(4, 2, 64, 16, device="cpu", max_batch=8, max_tokens=64)
    w.plan(b.qo_indptr, b.kv_indptr, b.seq_lens)
    torch.library.opcheck(torch.ops.mixed_attn.forward.default, _op_args(b, w))


def test_torch_compile_traces_the_op():
    b = small_batch()
    w = MixedAttention(4, 2, 64, 16, device="cpu", max_batch=8, max_tokens=64)
    w.plan(b.qo_indptr, b.kv_indptr, b.seq_lens)
    info = w.plan_info

    def layer(q, k, v, kc, vc, out):
        torch.ops.mixed_attn.forward(q, k, v, kc, vc, b.kv_indices, w.plan_meta, info,
                                     w.partial_out, w.partial_lse, out, None, None, 0.125, 0.0,
                                     -1, 1.0, 1.0)
        return out * 2

    compiled = torch.compile(layer, fullgraph=True, backend="aot_eager")
    out_c = compiled(b.q, b.k, b.v, b.k_cache.clone(), b.v_cache.clone(), poison_like(b.q))
    out_e = layer(b.q, b.k, b.v, b.k_cache.clone(), b.v_cache.clone(), poison_like(b.q))
    assert torch.equal(out_c, out_e)


def test_metadata_buffers_grow_once_for_a_bigger_step(caplog):
    # Built for 2 rows and 8 tokens; a step of 4 rows, then one of 300 tokens, still runs.
    w = MixedAttention(4, 2, 64, 16, device="cpu", max_batch=2, max_tokens=8)
    with caplog.at_level(logging.WARNING, logger="mixed_attn"):
        out, lse, *_ = run_op(make_batch([1, 1, 1, 2], [5, 6, 7, 8], num_qo_heads=4, num_kv_heads=2,
                                         head_dim=64, page_size=16), wrapper=w)
        assert not torch.isnan(out).any()
        b = make_batch([1, 299], [3, 40], num_qo_heads=4, num_kv_heads=2, head_dim=64, page_size=16)
        out, lse, *_ = run_op(b, wrapper=w)
    assert not torch.isnan(out).any() and w.max_batch == 4 and w.max_tokens == 300
    assert sum("growing the metadata buffers" in r.getMessage() for r in caplog.records) == 2
