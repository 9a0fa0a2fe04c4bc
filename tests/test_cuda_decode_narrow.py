"""The narrow tensor-core stage 1 (decode_backend="tensor_core_narrow", csrc/cuda/decode/
stage1_narrow.cuh: keys on the MMA's M side, at most 8 (query, head) pairs of a kv head a CTA)
against the fp64 reference, through the wrapper, outputs poisoned first: every head dim, GQA
group it serves, page size, cache dtype, verify rows that fit it, window / cap / sinks, splits,
and against the wide tensor-core kernel on the same inputs."""

import random

import pytest
import torch

import mixed_attn
from helpers import assert_close_to_reference, copy_row, run_op, run_reference
from mixed_attn.plan_info import field
from mixed_attn.reference import FP8
from mixed_attn.testing import make_batch

if not (torch.cuda.is_available() and mixed_attn.has_cuda_kernels()):
    pytest.skip("needs a CUDA GPU and a build with the CUDA kernels", allow_module_level=True)

NARROW = dict(decode_backend="tensor_core_narrow")
NARROW_ID = 4  # DecodeKernel::kTensorCoreNarrow


def _lens(seed, n, long_row):
    rng = random.Random(seed)
    return [rng.choice([1, 2, 15, 16, 17, 63, 64, 65, 255, 700, 2049]) for _ in range(n - 1)] + [long_row]


@pytest.mark.parametrize("D", [64, 128, 256])
@pytest.mark.parametrize("heads", [(4, 4), (16, 4), (16, 2)], ids=["mha", "gqa4", "gqa8"])
@pytest.mark.parametrize("page_size", [1, 16, 64])
@pytest.mark.parametrize("kv_dtype", [None, FP8], ids=["bf16", "fp8"])
def test_decode_rows_match_reference(D, heads, page_size, kv_dtype):
    Hq, Hkv = heads
    pre = _lens(D + page_size + Hq, 9, 9000)
    ext = [1] * len(pre)
    scales = dict(k_scale=0.5, v_scale=2.0) if kv_dtype else {}
    b = make_batch(ext, pre, Hq, Hkv, D, page_size, kv_dtype=kv_dtype, device="cuda", seed=D + page_size,
                   **scales)
    out, lse, kc, vc, w = run_op(b, min_split_tokens=64, **NARROW, **scales)
    assert field(w.plan_info, "decode_kernel") == NARROW_ID
    assert field(w.plan_info, "max_splits") > 1  # the long row is split: the merge ran too
    ro, rl, rk, rv = run_reference(b, **scales)
    assert_close_to_reference(out, lse, ro, rl, torch.bfloat16, loose=1.5 if kv_dtype else 1.0)
    assert torch.equal(kc.cpu(), rk) and torch.equal(vc.cpu(), rv)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("D", [64, 128])
def test_float16_queries(dtype, D):
    pre = _lens(3, 6, 3000)
    b = make_batch([1] * 6, pre, 8, 1, D, 16, dtype=dtype, device="cuda", seed=5)
    out, lse, _, _, _ = run_op(b, min_split_tokens=64, **NARROW)
    ro, rl, _, _ = run_reference(b)
    assert_close_to_reference(out, lse, ro, rl, dtype)


@pytest.mark.parametrize("heads,q_len", [((4, 4), 2), ((4, 4), 3), ((4, 4), 7), ((4, 4), 8), ((8, 2), 2)],
                         ids=["mha-q2", "mha-q3", "mha-q7", "mha-q8", "gqa4-q2"])
@pytest.mark.parametrize("page_size", [1, 16])
def test_verify_rows_that_fit(heads, q_len, page_size):
    # Rows of q_len tokens, causal among their own, with prefix 0 and long prefixes, among
    # one-token decodes and extend rows (one past the bound goes to the extend kernel).
    Hq, Hkv = heads
    rows = [(q_len, 0), (q_len, 37), (q_len, 4001), (1, 900), (q_len + 1, 300), (1, 5), (40, 70)]
    random.Random(q_len + page_size).shuffle(rows)
    ext, pre = [e for e, _ in rows], [p for _, p in rows]
    b = make_batch(ext, pre, Hq, Hkv, 128, page_size, device="cuda", seed=q_len * 3 + page_size)
    out, lse, _, _, w = run_op(b, min_split_tokens=64, decode_max_q=q_len, **NARROW)
    assert field(w.plan_info, "decode_kernel") == NARROW_ID
    assert w.num_decode_rows == sum(e <= q_len for e in ext)
    ro, rl, _, _ = run_reference(b)
    assert_close_to_reference(out, lse, ro, rl, torch.bfloat16)


@pytest.mark.parametrize("page_size", [1, 16])
@pytest.mark.parametrize("kv_dtype", [None, FP8], ids=["bf16", "fp8"])
@pytest.mark.parametrize("window_left", [0, 37, 1000])
def test_window_cap_sinks(page_size, kv_dtype, window_left):
    ext, pre = [2, 1, 1, 2, 9], [3000, 700, 16, 0, 50]
    Hq = 8
    b = make_batch(ext, pre, Hq, 2, 128, page_size, kv_dtype=kv_dtype, device="cuda", seed=page_size + window_left)
    sinks = torch.randn(Hq, generator=torch.Generator().manual_seed(5)).to("cuda")
    opts = dict(window_left=window_left, logit_cap=20.0, sinks=sinks)
    out, lse, _, _, _ = run_op(b, deterministic=True, fixed_split_tokens=64, **opts, **NARROW)
    ro, rl, _, _ = run_reference(b, **opts)
    assert_close_to_reference(out, lse, ro, rl, torch.bfloat16, loose=1.5 if kv_dtype else 1.0)


def test_agrees_with_the_wide_kernel():
    pre = _lens(11, 12, 20000)
    b = make_batch([1] * 12, pre, 32, 8, 128, 16, device="cuda", seed=11)
    on, ln, _, _, wn = run_op(b, **NARROW)
    ow, lw, _, _, ww = run_op(b, decode_backend="tensor_core")
    assert field(wn.plan_info, "decode_kernel") == NARROW_ID and field(ww.plan_info, "decode_kernel") == 1
    assert field(wn.plan_info, "max_splits") == field(ww.plan_info, "max_splits")  # same splits
    assert ((on.float() - ow.float()).norm(dim=-1) / ow.float().norm(dim=-1)).max() < 1e-2
    assert (ln - lw).abs().max() < 1e-3


def test_deterministic_row_is_batch_invariant():
    alone = make_batch([2], [5000], 8, 2, 128, 16, device="cuda", seed=2)
    o1, l1, _, _, _ = run_op(alone, deterministic=True, **NARROW)
    big = make_batch([1, 2, 300, 1], [100, 5000, 40, 9000], 8, 2, 128, 16, device="cuda", seed=2)
    q0, q1 = copy_row(alone, big, 1)  # big's row 1 holds alone's row 0
    o2, l2, _, _, _ = run_op(big, deterministic=True, **NARROW)
    assert torch.equal(o1, o2[q0:q1]) and torch.equal(l1, l2[q0:q1])


def test_a_plan_past_the_kernels_pairs_is_refused():
    # A verify row of 3 tokens at group 4 is 12 pairs: the policy refuses the request.
    with pytest.raises(RuntimeError, match="decode_max_q=3 with decode_backend='tensor_core_narrow'"):
        run_op(make_batch([3], [100], 8, 2, 128, 16, device="cuda"), decode_max_q=3, **NARROW)
    with pytest.raises(RuntimeError, match="GQA group is 16"):
        run_op(make_batch([1], [100], 16, 1, 128, 16, device="cuda"), **NARROW)
