"""Small whole-step cases for `compute-sanitizer --tool memcheck` (scripts/gpu_check.sh runs
`pytest -k sanitize` under it). They also run as ordinary GPU tests."""

import pytest
import torch

import mixed_attn
from helpers import assert_close_to_reference, run_op, run_reference
from mixed_attn.plan_info import device_desc, field
from mixed_attn.reference import FP8
from mixed_attn.testing import make_batch

pytestmark = pytest.mark.skipif(
    not (torch.cuda.is_available() and mixed_attn.has_cuda_kernels()),
    reason="needs a CUDA GPU and a build with the CUDA kernels")


@pytest.mark.parametrize("mode", ["split", "fold"])
@pytest.mark.parametrize("page_size", [1, 16])
@pytest.mark.parametrize("kv_dtype", [None, FP8], ids=["bf16", "fp8"])
@pytest.mark.parametrize("head_dim", [64, 256])
def test_sanitize_small_step(mode, page_size, kv_dtype, head_dim):
    ext, pre = [1, 37, 1, 70, 1], [0, 5, 300, 0, 17]
    b = make_batch(ext, pre, num_qo_heads=8, num_kv_heads=2, head_dim=head_dim,
                   page_size=page_size, kv_dtype=kv_dtype, device="cuda", seed=head_dim + page_size)
    sinks = torch.randn(8, device="cuda")
    opts = dict(window_left=40, logit_cap=20.0, sinks=sinks)
    out, lse, *_ = run_op(b, mode=mode, **opts)
    ro, rl, *_ = run_reference(b, **opts)
    assert_close_to_reference(out, lse, ro, rl, torch.bfloat16, loose=3.0 if kv_dtype else 1.0)


@pytest.mark.parametrize("page_size", [1, 16])
@pytest.mark.parametrize("kv_dtype", [None, FP8], ids=["bf16", "fp8"])
@pytest.mark.parametrize("head_dim", [64, 128, 256])
def test_sanitize_overlapped_step(page_size, kv_dtype, head_dim):
    # SMs left to the decode (extend_leave_sms, plan.cc step 3f): the persistent extend on 32 SMs
    # while the decode's stage 1, its programmatic dependent, starts on the rest.
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("programmatic dependent launch needs compute capability 9.0+")
    ext, pre = [1, 300, 1, 45, 1], [2000, 40, 300, 0, 5000]
    b = make_batch(ext, pre, num_qo_heads=8, num_kv_heads=2, head_dim=head_dim,
                   page_size=page_size, kv_dtype=kv_dtype, device="cuda", seed=head_dim + page_size + 3)
    opts = dict(window_left=200, logit_cap=20.0, sinks=torch.randn(8, device="cuda"))
    leave = torch.cuda.get_device_properties(0).multi_processor_count - 32
    out, lse, _, _, w = run_op(b, extend_leave_sms=leave, **opts)
    assert field(w.plan_info, "extend_leave_sms") == leave
    ro, rl, *_ = run_reference(b, **opts)
    assert_close_to_reference(out, lse, ro, rl, torch.bfloat16, loose=3.0 if kv_dtype else 1.0)


@pytest.mark.parametrize("page_size", [1, 16])
@pytest.mark.parametrize("kv_dtype", [None, FP8], ids=["bf16", "fp8"])
@pytest.mark.parametrize("head_dim", [64, 128, 256])
def test_sanitize_decode_first_step(page_size, kv_dtype, head_dim):
    # decode_first (launch_policy.h): the decode's stage 1 first, the extend as its programmatic
    # dependent, in a step whose decode rows do not split.
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("programmatic dependent launch needs compute capability 9.0+")
    ext, pre = [1, 300, 1, 45, 3, 1], [2000, 40, 300, 0, 700, 5000]
    b = make_batch(ext, pre, num_qo_heads=8, num_kv_heads=2, head_dim=head_dim,
                   page_size=page_size, kv_dtype=kv_dtype, device="cuda", seed=head_dim + page_size + 9)
    opts = dict(window_left=200, logit_cap=20.0, sinks=torch.randn(8, device="cuda"))
    # (an unsplit extend: at head dim 256 the policy would KV-split this small one, and a KV-split
    # extend keeps the extend-first order)
    out, lse, _, _, w = run_op(b, decode_first=True, max_splits_per_row=1, extend_kv_splits=1, **opts)
    assert field(w.plan_info, "decode_first") == 1
    ro, rl, *_ = run_reference(b, **opts)
    assert_close_to_reference(out, lse, ro, rl, torch.bfloat16, loose=3.0 if kv_dtype else 1.0)


@pytest.mark.parametrize("backend", ["tensor_core", "portable"])
@pytest.mark.parametrize("page_size", [1, 16])
@pytest.mark.parametrize("kv_dtype", [None, FP8], ids=["bf16", "fp8"])
def test_sanitize_verify_rows(backend, page_size, kv_dtype):
    # Decode-class rows of 2-16 tokens (speculative verify), split over several arena slots,
    # next to one-token decodes and an extend row.
    ext, pre = [3, 1, 16, 40, 7, 2], [500, 90, 0, 20, 1000, 3]
    b = make_batch(ext, pre, num_qo_heads=16, num_kv_heads=2, head_dim=128, page_size=page_size,
                   kv_dtype=kv_dtype, device="cuda", seed=page_size + 7)
    sinks = torch.randn(16, device="cuda")
    opts = dict(window_left=300, logit_cap=20.0, sinks=sinks)
    out, lse, *_ = run_op(b, decode_max_q=16, decode_backend=backend, deterministic=True,
                          fixed_split_tokens=128, **opts)
    ro, rl, *_ = run_reference(b, **opts)
    assert_close_to_reference(out, lse, ro, rl, torch.bfloat16, loose=3.0 if kv_dtype else 1.0)


@pytest.mark.parametrize("page_size", [1, 16])
@pytest.mark.parametrize("kv_dtype", [None, FP8], ids=["bf16", "fp8"])
def test_sanitize_narrow_decode(page_size, kv_dtype):
    # The narrow stage 1 (<= 8 pairs a CTA): verify rows of 2 at group 4, one-token rows, split.
    ext, pre = [2, 1, 2, 40, 1], [500, 90, 0, 20, 1000]
    b = make_batch(ext, pre, num_qo_heads=8, num_kv_heads=2, head_dim=128, page_size=page_size,
                   kv_dtype=kv_dtype, device="cuda", seed=page_size + 9)
    sinks = torch.randn(8, device="cuda")
    opts = dict(window_left=300, logit_cap=20.0, sinks=sinks)
    out, lse, *_ = run_op(b, decode_backend="tensor_core_narrow", deterministic=True,
                          fixed_split_tokens=128, **opts)
    ro, rl, *_ = run_reference(b, **opts)
    assert_close_to_reference(out, lse, ro, rl, torch.bfloat16, loose=3.0 if kv_dtype else 1.0)


@pytest.mark.parametrize("page_size", [1, 16])
@pytest.mark.parametrize("kv_dtype", [None, FP8], ids=["bf16", "fp8"])
def test_sanitize_two_kv_heads_a_decode_cta(page_size, kv_dtype):
    # decode_kv_pack=2 (head dim 64): two kv-head slots of two heads each, verify rows of 2 at
    # group 4 (16 pairs a CTA), one-token rows, split.
    ext, pre = [2, 1, 2, 40, 1], [500, 90, 0, 20, 1000]
    b = make_batch(ext, pre, num_qo_heads=16, num_kv_heads=4, head_dim=64, page_size=page_size,
                   kv_dtype=kv_dtype, device="cuda", seed=page_size + 11)
    sinks = torch.randn(16, device="cuda")
    opts = dict(window_left=300, logit_cap=20.0, sinks=sinks)
    out, lse, _, _, w = run_op(b, decode_kv_pack=2, decode_max_q=2, deterministic=True,
                               fixed_split_tokens=128, **opts)
    assert w.plan_launch["decode_kv_pack"] == 2
    ro, rl, *_ = run_reference(b, **opts)
    assert_close_to_reference(out, lse, ro, rl, torch.bfloat16, loose=3.0 if kv_dtype else 1.0)


@pytest.mark.parametrize("persistent", [True, False], ids=["persistent", "per_item"])
@pytest.mark.parametrize("page_size", [1, 16])
@pytest.mark.parametrize("kv_dtype", [None, FP8], ids=["bf16", "fp8"])
@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize("tma", [False, True], ids=["cp_async", "tma"])
def test_sanitize_extend_schedule(persistent, page_size, kv_dtype, head_dim, tma):
    # The sm_90a extend launch persistent on 3 CTAs (each serves several (tile, head group) items
    # in a row: its K/V ring and Q slot carry over, the next item's loads overlap the last one's
    # end) and with one CTA per item. fp8: the producer's staging tiles rotate across tiles,
    # passes and items. Other GPUs: the policy's kernel. tma: the interior K/V tiles by TMA (on
    # request only; page 16, 16-bit caches).
    ext, pre = [1, 130, 1, 70, 9], [0, 5, 300, 200, 1000]
    b = make_batch(ext, pre, num_qo_heads=8, num_kv_heads=2, head_dim=head_dim, page_size=page_size,
                   kv_dtype=kv_dtype, device="cuda", seed=head_dim + page_size + persistent)
    sinks = torch.randn(8, device="cuda")
    opts = dict(window_left=150, logit_cap=20.0, sinks=sinks)
    sm90 = bool(device_desc("cuda")[3])  # the build and the GPU have the sm_90a kernel
    if tma and not (sm90 and page_size == 16 and kv_dtype is None):
        pytest.skip("TMA copies need the sm_90a kernel, pages of 16 slots and a 16-bit cache")
    kw = dict(num_sms=3, extend_kv_splits=1, extend_persistent=persistent) if sm90 else {}
    if tma:
        kw["extend_tma"] = 1
    out, lse, *_ = run_op(b, mode="fold", **kw, **opts)
    ro, rl, *_ = run_reference(b, **opts)
    assert_close_to_reference(out, lse, ro, rl, torch.bfloat16, loose=3.0 if kv_dtype else 1.0)


@pytest.mark.parametrize("parts", [2, 3])
@pytest.mark.parametrize("page_size", [1, 16])
@pytest.mark.parametrize("kv_dtype", [None, FP8], ids=["bf16", "fp8"])
@pytest.mark.parametrize("head_dim", [64, 128, 256])
def test_sanitize_extend_cut_items(parts, page_size, kv_dtype, head_dim):
    # Every item of a persistent sm_90a launch on 3 CTAs in `parts` parts (cut_merge.cuh): each CTA
    # serves whole parts of several items in a row, parks their partials in the arena and counts
    # them; the last part of an item merges them all. Short rows give parts with no K/V tile (an
    # empty share: max -inf, sum 0). The arena slots, the counters in the metadata and the
    # hand-over between parts of one item on one CTA are what memcheck and racecheck look at.
    if not device_desc("cuda")[3]:
        pytest.skip("cut items exist in the sm_90a kernel only")
    ext, pre = [1, 130, 1, 70, 9], [0, 5, 300, 200, 1000]
    b = make_batch(ext, pre, num_qo_heads=8, num_kv_heads=2, head_dim=head_dim, page_size=page_size,
                   kv_dtype=kv_dtype, device="cuda", seed=head_dim + page_size + parts)
    sinks = torch.randn(8, device="cuda")
    opts = dict(window_left=150, logit_cap=20.0, sinks=sinks)
    out, lse, *_ = run_op(b, mode="fold", num_sms=3, extend_item_parts=parts, **opts)
    ro, rl, *_ = run_reference(b, **opts)
    assert_close_to_reference(out, lse, ro, rl, torch.bfloat16, loose=3.0 if kv_dtype else 1.0)


@pytest.mark.parametrize("launch", ["persistent", "cut", "kv_split", "tma"])
@pytest.mark.parametrize("page_size", [1, 16])
def test_sanitize_extend_128_row_shape(launch, page_size):
    # The sm_90a kernel's second shape at head dim 128 (two consumer warpgroups, 128 query rows,
    # the S/PV overlap on; plan.cc step 3e picks it per step): a persistent launch on 3 CTAs with
    # whole items, with every item in 2 parts, a KV split of 2 (cluster) and TMA copies: the ring
    # and the Q slot carried across items, the parts' arena traffic and the cluster's hand-over at
    # the shape's own partial layout.
    if not device_desc("cuda")[3]:
        pytest.skip("the 128-row shape is the sm_90a kernel's")
    if launch == "tma" and page_size != 16:
        pytest.skip("TMA copies need pages of 16 slots")
    ext, pre = [1, 130, 1, 70, 9], [0, 5, 300, 200, 1000]
    b = make_batch(ext, pre, num_qo_heads=8, num_kv_heads=2, head_dim=128, page_size=page_size, device="cuda",
                   seed=page_size + len(launch))
    sinks = torch.randn(8, device="cuda")
    opts = dict(window_left=150, logit_cap=20.0, sinks=sinks)
    kw = {"persistent": dict(num_sms=3, extend_kv_splits=1, extend_persistent=1),
          "cut": dict(num_sms=3, extend_item_parts=2),
          "kv_split": dict(extend_kv_splits=2),
          "tma": dict(num_sms=3, extend_persistent=1, extend_tma=1)}[launch]
    out, lse, *_ = run_op(b, mode="fold", extend_block_rows=128, **kw, **opts)
    ro, rl, *_ = run_reference(b, **opts)
    assert_close_to_reference(out, lse, ro, rl, torch.bfloat16)
