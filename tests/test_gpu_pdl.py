"""Programmatic dependent launches (csrc/cuda/common/pdl.cuh): the decode's stage 1 launched as the
extend kernel's dependent, the merge as stage 1's. They change when kernels start, never what they
compute: the bits must be those of ordinary launches, and the next kernel on the stream must see
the whole step (the extend's rows included, though the decode may finish first)."""

import pytest
import torch

import mixed_attn
from helpers import assert_close_to_reference, run_op, run_reference
from mixed_attn.plan_info import field
from mixed_attn.testing import make_batch, poison_like

FP8 = torch.float8_e4m3fn

pytestmark = pytest.mark.skipif(
    not (torch.cuda.is_available() and mixed_attn.has_cuda_kernels()),
    reason="needs a CUDA GPU and a build with the CUDA kernels")


def has_pdl():
    return torch.cuda.get_device_capability() >= (9, 0)


@pytest.mark.parametrize("page_size", [1, 16])
@pytest.mark.parametrize("kv_dtype", [None, FP8], ids=["bf16", "fp8"])
@pytest.mark.parametrize("head_dim", [64, 128, 256])
def test_pdl_gives_the_bits_of_ordinary_launches(page_size, kv_dtype, head_dim):
    if not has_pdl():
        pytest.skip("programmatic dependent launch needs compute capability 9.0+")
    # Extend rows (one long, one short), decode rows that split (long prefixes: the merge runs)
    # and some that do not, a verify row, in mixed order.
    ext = [1, 700, 1, 3, 1, 37, 1]
    pre = [9000, 300, 17, 2000, 30000, 0, 4100]
    b = make_batch(ext, pre, num_qo_heads=8, num_kv_heads=2, head_dim=head_dim, page_size=page_size,
                   kv_dtype=kv_dtype, device="cuda", seed=head_dim + page_size)
    sinks = torch.randn(8, device="cuda")
    # The same launches but for PDL: the policy's SMs left to the decode need PDL (plan.cc, step
    # 3f), and a launch on fewer CTAs cuts other items (other bits).
    opts = dict(window_left=-1, logit_cap=0.0, sinks=sinks, decode_max_q=4, extend_leave_sms=0)
    on = run_op(b, pdl=True, **opts)
    off = run_op(b, pdl=False, **opts)
    assert field(on[4].plan_info, "pdl") == 1 and field(off[4].plan_info, "pdl") == 0
    assert field(on[4].plan_info, "max_splits") > 1, "a decode row must split (the merge runs)"
    torch.cuda.synchronize()
    assert torch.equal(on[0], off[0]) and torch.equal(on[1], off[1])
    ref_out, ref_lse, _, _ = run_reference(b, sinks=sinks)
    assert_close_to_reference(on[0], on[1], ref_out, ref_lse, torch.bfloat16, loose=3.0 if kv_dtype else 1.0)


@pytest.mark.parametrize("head_dim", [64, 128])
def test_an_extend_launch_that_leaves_sms_gives_the_same_bits(head_dim):
    # extend_leave_sms=N: the persistent extend on num_sms - N CTAs, the decode's stage 1 (its
    # programmatic dependent) starting on the N SMs left free. Items are dealt to fewer CTAs, each
    # item computed whole as in the uncut launch (cut items off in both): the same bits.
    if not has_pdl():
        pytest.skip("programmatic dependent launch needs compute capability 9.0+")
    b = make_batch([1, 2000, 1, 1, 300], [9000, 0, 4000, 30000, 700], num_qo_heads=16, num_kv_heads=4,
                   head_dim=head_dim, page_size=16, device="cuda", seed=head_dim)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    whole = dict(extend_item_parts=1, extend_block_rows=192)  # one tile shape, items never cut
    base = run_op(b, extend_kv_splits=1, **whole)
    for leave in (1, sms // 2, sms - 1):
        out, lse, _, _, w = run_op(b, extend_leave_sms=leave, **whole)
        assert 0 < field(w.plan_info, "extend_ctas") <= sms - leave
        assert field(w.plan_info, "extend_kv_splits") == 1
        torch.cuda.synchronize()
        assert torch.equal(out, base[0]) and torch.equal(lse, base[1]), f"extend_leave_sms={leave}"
    ref_out, ref_lse, _, _ = run_reference(b)
    assert_close_to_reference(base[0], base[1], ref_out, ref_lse, torch.bfloat16)


@pytest.mark.parametrize("extras", ["plain", "window_cap_sinks"])
@pytest.mark.parametrize("page_size", [1, 16])
@pytest.mark.parametrize("kv_dtype", [None, FP8], ids=["bf16", "fp8"])
@pytest.mark.parametrize("head_dim", [64, 128, 256])
def test_the_overlapped_step_forced_on_and_off(head_dim, kv_dtype, page_size, extras):
    # Issue 14: the whole step with a third of the SMs left to the decode (extend_leave_sms, the
    # decode streaming beside the extend from its start) and with none; rows of odd sizes in mixed
    # order (decodes that split, a verify row, short and long extends). Each against the fp64
    # reference; with one tile shape and every item whole in both, the same bits.
    if not has_pdl():
        pytest.skip("programmatic dependent launch needs compute capability 9.0+")
    ext = [1, 1333, 1, 5, 1, 77, 1]
    pre = [20000, 250, 31, 3000, 9000, 0, 4100]
    b = make_batch(ext, pre, num_qo_heads=16, num_kv_heads=4, head_dim=head_dim, page_size=page_size,
                   kv_dtype=kv_dtype, device="cuda", seed=head_dim + page_size + (kv_dtype is not None))
    opts = dict(decode_max_q=8)
    ref_opts = {}
    if extras != "plain":
        ref_opts = dict(window_left=700, logit_cap=30.0, sinks=torch.randn(16, device="cuda"))
    leave = torch.cuda.get_device_properties(0).multi_processor_count // 3
    whole = dict(extend_item_parts=1, extend_block_rows=192 if head_dim == 128 else 0)
    outs = {}
    for n in (0, leave):
        for shape in ("policy", "whole"):
            kw = whole if shape == "whole" else {}
            out, lse, _, _, w = run_op(b, extend_leave_sms=n, **opts, **ref_opts, **kw)
            assert field(w.plan_info, "extend_leave_sms") == n
            outs[n, shape] = (out, lse)
    torch.cuda.synchronize()
    assert torch.equal(outs[0, "whole"][0], outs[leave, "whole"][0])
    assert torch.equal(outs[0, "whole"][1], outs[leave, "whole"][1])
    ref_out, ref_lse, _, _ = run_reference(b, **ref_opts)
    for (n, shape), (out, lse) in outs.items():
        assert_close_to_reference(out, lse, ref_out, ref_lse, torch.bfloat16, loose=3.0 if kv_dtype else 1.0)


@pytest.mark.parametrize("extras", ["plain", "window_cap_sinks"])
@pytest.mark.parametrize("page_size", [1, 16])
@pytest.mark.parametrize("kv_dtype", [None, FP8], ids=["bf16", "fp8"])
@pytest.mark.parametrize("head_dim", [64, 128, 256])
def test_the_decode_first_order_gives_the_same_bits(head_dim, kv_dtype, page_size, extras):
    # decode_first (launch_policy.h): the decode's stage 1 first, the extend as its programmatic
    # dependent, in a step whose decode rows do not split (max_splits_per_row=1: no merge). The
    # same plan but for the order, so the same bits as the extend-first order; against the fp64
    # reference; rows of odd sizes in mixed order (short and long extends, a verify row).
    if not has_pdl():
        pytest.skip("programmatic dependent launch needs compute capability 9.0+")
    ext = [1, 517, 1, 5, 1, 33, 1, 1]
    pre = [4000, 0, 31, 3000, 2100, 700, 4100, 9]
    b = make_batch(ext, pre, num_qo_heads=16, num_kv_heads=4, head_dim=head_dim, page_size=page_size,
                   kv_dtype=kv_dtype, device="cuda", seed=head_dim + page_size + 5 * (kv_dtype is not None))
    opts = dict(decode_max_q=8, max_splits_per_row=1)
    if extras != "plain":
        opts.update(window_left=700, logit_cap=30.0, sinks=torch.randn(16, device="cuda"))
    first = run_op(b, decode_first=True, **opts)
    after = run_op(b, extend_leave_sms=0, decode_first=False, **opts)
    assert field(first[4].plan_info, "decode_first") == 1 and field(after[4].plan_info, "decode_first") == 0
    assert field(first[4].plan_info, "max_splits") == 1
    torch.cuda.synchronize()
    assert torch.equal(first[0], after[0]) and torch.equal(first[1], after[1])
    ref = {k: v for k, v in opts.items() if k in ("window_left", "logit_cap", "sinks")}
    ref_out, ref_lse, _, _ = run_reference(b, **ref)
    assert_close_to_reference(first[0], first[1], ref_out, ref_lse, torch.bfloat16, loose=3.0 if kv_dtype else 1.0)


def test_a_step_the_policy_leaves_sms_in_is_right():
    # The policy's choice (plan.cc, step 3f): a step whose decode half outweighs its extend leaves
    # SMs to the decode. Against the fp64 reference as planned (items cut), and bit for bit against
    # the plan that leaves none with one tile shape and no cut items in both.
    if not has_pdl():
        pytest.skip("programmatic dependent launch needs compute capability 9.0+")
    b = make_batch([2048] + [1] * 64, [2048] + [8191] * 64, num_qo_heads=32, num_kv_heads=8, head_dim=128,
                   page_size=16, device="cuda", seed=11)
    out, lse, _, _, w = run_op(b)
    assert field(w.plan_info, "extend_leave_sms") > 0
    ref_out, ref_lse, _, _ = run_reference(b)
    assert_close_to_reference(out, lse, ref_out, ref_lse, torch.bfloat16)
    whole = dict(extend_item_parts=1, extend_block_rows=192)
    out1, lse1, _, _, w1 = run_op(b, **whole)
    out0, lse0, _, _, w0 = run_op(b, extend_leave_sms=0, **whole)
    assert field(w1.plan_info, "extend_leave_sms") > 0 and field(w0.plan_info, "extend_leave_sms") == 0
    torch.cuda.synchronize()
    assert torch.equal(out1, out0) and torch.equal(lse1, lse0)
    # A deterministic plan leaves SMs too, and gives the bits of its plan that leaves none (whole
    # items, decode splits fixed in tokens: where they run moves, not what they compute).
    det = dict(deterministic=True, fixed_split_tokens=2048)
    outs = {}
    for n in (None, 0):
        out_d, lse_d, _, _, wd = run_op(b, extend_leave_sms=n, **det)
        assert (field(wd.plan_info, "extend_leave_sms") > 0) == (n is None)
        assert field(wd.plan_info, "extend_cut_items") == 0
        outs[n] = out_d, lse_d
    torch.cuda.synchronize()
    assert torch.equal(outs[None][0], outs[0][0]) and torch.equal(outs[None][1], outs[0][1])
    assert_close_to_reference(outs[None][0], outs[None][1], ref_out, ref_lse, torch.bfloat16)


def test_the_next_kernel_sees_the_whole_step():
    if not has_pdl():
        pytest.skip("programmatic dependent launch needs compute capability 9.0+")
    # A long extend (a persistent launch on every SM, ~1 ms) and a short, split decode half: with
    # PDL the decode's kernels may finish long before the extend. A kernel enqueued after the step
    # (an ordinary launch: the clone) must still see every row written.
    geo = dict(num_qo_heads=32, num_kv_heads=8, head_dim=128, page_size=16)
    b = make_batch([4096] + [1] * 4, [4096] + [20000] * 4, **geo, device="cuda", seed=5)
    for _ in range(3):
        out, lse, _, _, w = run_op(b, pdl=True)  # run_op enqueues; nothing synchronises yet
        out_next, lse_next = out.clone(), lse.clone()
        torch.cuda.synchronize()
        assert field(w.plan_info, "pdl") == 1 and field(w.plan_info, "max_splits") > 1
        assert not torch.isnan(out_next).any() and not torch.isnan(lse_next).any(), "the next kernel ran early"
        assert torch.equal(out_next, out) and torch.equal(lse_next, lse)


def test_pdl_steps_capture_and_replay():
    if not has_pdl():
        pytest.skip("programmatic dependent launch needs compute capability 9.0+")
    geo = dict(num_qo_heads=16, num_kv_heads=2, head_dim=128, page_size=16)
    b = make_batch([300, 1, 1, 2], [100, 9000, 40, 3000], **geo, device="cuda", seed=9)
    w = mixed_attn.MixedAttention(16, 2, 128, 16, device="cuda", max_batch=8, max_tokens=b.q.shape[0],
                                  cuda_graph=True, decode_max_q=4, pdl=True)
    kc, vc = b.k_cache.clone(), b.v_cache.clone()
    out = poison_like(b.q)
    lse = torch.full((b.q.shape[0], 16), float("nan"), device="cuda")
    w.plan(b.qo_indptr, b.kv_indptr, b.seq_lens)
    assert field(w.plan_info, "pdl") == 1

    def step():
        w.run(b.q, kc, vc, b.kv_indices, k=b.k, v=b.v, out=out, lse=lse)

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        step()
    torch.cuda.current_stream().wait_stream(s)
    eager_out, eager_lse = out.clone(), lse.clone()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        step()
    out.fill_(float("nan"))
    lse.fill_(float("nan"))
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, eager_out) and torch.equal(lse, eager_lse)
    ref_out, ref_lse, _, _ = run_reference(b)
    assert_close_to_reference(out, lse, ref_out, ref_lse, torch.bfloat16)
