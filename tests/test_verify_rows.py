"""Decode-class rows of 2-16 new tokens (speculative verify) on the split-KV decode path.

Rows of at most `decode_max_q` new tokens go to the decode kernels: their (query, head) pairs are
packed into the decode tile, split-KV over the prefix, causal among the row's own tokens, merged
per query. Every case runs the CPU op everywhere and the CUDA kernels (tensor-core and portable
stage 1) where a GPU is present, against the fp64 reference, outputs poisoned first.
"""

import random

import pytest
import torch

from helpers import assert_close_to_reference, copy_row, run_op, run_reference
from mixed_attn.plan_info import field
from mixed_attn.reference import FP8
from mixed_attn.testing import make_batch

CUDA = torch.cuda.is_available()
# (device, decode_backend): the CPU op, and both CUDA stage-1 kernels when there is a GPU.
BACKENDS = [("cpu", None)] + ([("cuda", "tensor_core"), ("cuda", "portable")] if CUDA else [])
BACKEND_IDS = [f"{d}-{b}" if b else d for d, b in BACKENDS]


def _kw(backend):
    return {} if backend is None else {"decode_backend": backend}


def _shuffled(rows, seed):
    rows = list(rows)
    random.Random(seed).shuffle(rows)
    return [e for e, _ in rows], [p for _, p in rows]


@pytest.mark.parametrize("device,backend", BACKENDS, ids=BACKEND_IDS)
@pytest.mark.parametrize("q_len", [2, 3, 7, 16])
@pytest.mark.parametrize("page_size", [1, 16])
@pytest.mark.parametrize("heads", [(8, 2), (16, 2), (4, 4)], ids=["gqa4", "gqa8", "mha"])
def test_verify_rows_match_reference(device, backend, q_len, page_size, heads):
    Hq, Hkv = heads
    D = 128 if device == "cuda" else 64
    # Verify rows with prefix 0, short and long prefixes, among one-token decodes and an extend row.
    rows = [(q_len, 0), (q_len, 37), (q_len, 3001), (1, 900), (1, 5), (q_len, 17), (40, 70)]
    ext, pre = _shuffled(rows, seed=q_len * 7 + page_size)
    b = make_batch(ext, pre, Hq, Hkv, D, page_size, device=device, seed=q_len + page_size + Hq)
    out, lse, kc, vc, w = run_op(b, decode_max_q=16, **_kw(backend))
    ro, rl, rk, rv = run_reference(b)
    assert_close_to_reference(out, lse, ro, rl, torch.bfloat16)
    assert torch.equal(kc.cpu(), rk) and torch.equal(vc.cpu(), rv)
    assert w.num_decode_rows == sum(e <= 16 for e in ext)


@pytest.mark.parametrize("device,backend", BACKENDS, ids=BACKEND_IDS)
@pytest.mark.parametrize("threshold", [2, 4, 7])
def test_threshold_routes_rows_and_both_sides_are_right(device, backend, threshold):
    # Rows at the threshold are decode rows, one past it extend rows; both correct.
    ext, pre = _shuffled([(threshold, 500), (threshold + 1, 500), (1, 300), (threshold, 0),
                          (threshold + 1, 0)], seed=threshold)
    b = make_batch(ext, pre, 8, 2, 64, 16, device=device, seed=threshold)
    out, lse, _, _, w = run_op(b, decode_max_q=threshold, **_kw(backend))
    ro, rl, _, _ = run_reference(b)
    assert_close_to_reference(out, lse, ro, rl, torch.bfloat16)
    assert w.num_decode_rows == sum(e <= threshold for e in ext)
    assert w.plan_launch["decode_max_q"] == threshold


@pytest.mark.parametrize("device,backend", BACKENDS, ids=BACKEND_IDS)
@pytest.mark.parametrize("page_size", [1, 16])
def test_window_crossing_pages_sinks_cap(device, backend, page_size):
    # The window's left edge moves by one key per query of the row and crosses page borders.
    ext, pre = _shuffled([(5, 3000), (16, 200), (3, 30), (1, 700), (9, 0), (64, 50)], seed=page_size)
    Hq = 8
    b = make_batch(ext, pre, Hq, 2, 64, page_size, device=device, seed=3 + page_size)
    sinks = torch.randn(Hq, generator=torch.Generator().manual_seed(5)).to(device)
    opts = dict(window_left=37, logit_cap=20.0, sinks=sinks)
    out, lse, _, _, _ = run_op(b, decode_max_q=16, deterministic=True, fixed_split_tokens=64,
                               **opts, **_kw(backend))
    ro, rl, _, _ = run_reference(b, **opts)
    assert_close_to_reference(out, lse, ro, rl, torch.bfloat16)


@pytest.mark.parametrize("device,backend", BACKENDS, ids=BACKEND_IDS)
@pytest.mark.parametrize("q_len", [2, 7, 16])
def test_fp8_cache(device, backend, q_len):
    ext, pre = _shuffled([(q_len, 2000), (1, 400), (q_len, 3), (33, 10)], seed=q_len)
    b = make_batch(ext, pre, 8, 2, 64, 16, kv_dtype=FP8, device=device, seed=q_len, k_scale=0.5,
                   v_scale=2.0)
    out, lse, _, _, _ = run_op(b, decode_max_q=16, k_scale=0.5, v_scale=2.0, **_kw(backend))
    ro, rl, _, _ = run_reference(b, k_scale=0.5, v_scale=2.0)
    assert_close_to_reference(out, lse, ro, rl, torch.bfloat16, loose=1.5)


@pytest.mark.parametrize("device,backend", BACKENDS, ids=BACKEND_IDS)
def test_split_and_fold_agree(device, backend):
    ext, pre = _shuffled([(4, 2500), (1, 1000), (16, 300), (2, 0), (50, 20)], seed=11)
    b = make_batch(ext, pre, 16, 2, 64, 16, device=device, seed=11)
    s_out, s_lse, _, _, ws = run_op(b, mode="split", decode_max_q=16, deterministic=True,
                                    fixed_split_tokens=128, **_kw(backend))
    f_out, f_lse, _, _, wf = run_op(b, mode="fold")
    assert field(ws.plan_info, "max_splits") > 1  # the verify rows really were split
    assert ws.num_decode_rows == 4 and wf.num_decode_rows == 0
    assert (s_out.float() - f_out.float()).abs().max() <= 1.6e-2
    assert (s_lse - f_lse).abs().max() <= 1e-4


@pytest.mark.parametrize("device,backend", BACKENDS, ids=BACKEND_IDS)
def test_deterministic_verify_row_is_batch_invariant(device, backend):
    # A verify row's bits do not depend on what else is in the step (fixed-size splits, launch
    # variant fixed by the policy's decode_max_q).
    alone = make_batch([7], [5000], 16, 2, 64, 16, device=device, seed=2)
    o1, l1, _, _, _ = run_op(alone, deterministic=True, decode_max_q=8, **_kw(backend))
    big = make_batch([1, 7, 300, 2], [100, 5000, 40, 9000], 16, 2, 64, 16, device=device, seed=2)
    q0, q1 = copy_row(alone, big, 1)  # big's row 1 holds alone's row 0
    o2, l2, _, _, _ = run_op(big, deterministic=True, decode_max_q=8, **_kw(backend))
    assert torch.equal(o1, o2[q0:q1]) and torch.equal(l1, l2[q0:q1])


@pytest.mark.parametrize("device,backend", BACKENDS, ids=BACKEND_IDS)
def test_random_mixes(device, backend):
    rng = random.Random(17)
    for trial in range(3 if device == "cpu" else 8):
        n = rng.randint(1, 12)
        ext = [rng.choice([1, 1, 2, 3, 5, 8, 13, 16, 17, 40]) for _ in range(n)]
        pre = [rng.choice([0, 1, 15, 16, 17, 250, 2049]) for _ in range(n)]
        page = rng.choice([1, 16])
        b = make_batch(ext, pre, 8, 2, 64, page, device=device, seed=100 + trial)
        out, lse, _, _, w = run_op(b, decode_max_q=rng.choice([1, 4, 16]), **_kw(backend))
        ro, rl, _, _ = run_reference(b)
        assert_close_to_reference(out, lse, ro, rl, torch.bfloat16)


@pytest.mark.skipif(not CUDA, reason="the CUDA tensor-core stage 1")
@pytest.mark.parametrize("dtypes", [(torch.bfloat16, None), (torch.float16, None), (torch.bfloat16, FP8)],
                         ids=["bf16", "fp16", "fp8"])
@pytest.mark.parametrize("page_size", [1, 16])
@pytest.mark.parametrize("heads", [(4, 2), (8, 2), (16, 2), (24, 6)], ids=["gqa2", "gqa4", "gqa8", "gqa4x3"])
@pytest.mark.parametrize("blocks", [1, 2, 4])
def test_two_kv_heads_a_decode_cta(dtypes, page_size, heads, blocks):
    """decode_kv_pack=2 at head dim 64: the tensor-core stage 1 reads two adjacent kv heads as one
    128-wide row, each pair's query zero outside its head's half. One-token rows and verify rows
    whose pairs of both heads fill `blocks` MMA blocks, prefix 0 to long, split and unsplit,
    window / cap / sinks, deterministic; against the fp64 reference and the one-head launch."""
    dtype, kv_dtype = dtypes
    Hq, Hkv = heads
    group = Hq // Hkv
    max_q = max(1, blocks * 16 // (2 * group))
    ext, pre = _shuffled([(1, 0), (1, 5), (max_q, 900), (1, 3001), (max_q, 0), (1, 4100), (40, 70)],
                         seed=page_size + Hq)
    scales = dict(k_scale=0.5, v_scale=2.0) if kv_dtype else {}
    b = make_batch(ext, pre, Hq, Hkv, 64, page_size, dtype=dtype, kv_dtype=kv_dtype, device="cuda",
                   seed=page_size + Hq, **scales)
    sinks = torch.randn(Hq, generator=torch.Generator().manual_seed(Hq)).to("cuda")
    for opts, det in ((dict(), False), (dict(window_left=300, logit_cap=20.0, sinks=sinks), True)):
        kw = dict(decode_max_q=max_q, deterministic=det, fixed_split_tokens=256, min_split_tokens=64, **opts,
                  **scales)
        out, lse, _, _, w = run_op(b, decode_kv_pack=2, **kw)
        assert w.plan_launch["decode_kv_pack"] == 2 and w.num_decode_rows == 6
        ro, rl, _, _ = run_reference(b, **opts, **scales)
        assert_close_to_reference(out, lse, ro, rl, dtype, loose=1.5 if kv_dtype else 1.0)
        one, one_lse, _, _, w1 = run_op(b, decode_kv_pack=1, **kw)
        assert w1.plan_launch["decode_kv_pack"] == 1
        assert (out.float() - one.float()).abs().max() <= 2e-2 and (lse - one_lse).abs().max() <= 1e-4
