"""Malformed calls: each gets an error naming the argument, and nothing is written.

Every forward case snapshots the KV cache, out, lse and the arena before the call and checks them
byte for byte afterwards: validation must finish before the first write.
"""

import pytest
import torch

from mixed_attn import MixedAttention
from mixed_attn.plan_info import make_config
from mixed_attn.reference import FP8
from mixed_attn.testing import make_batch, poison_like

Hq, Hkv, D, PAGE = 4, 2, 64, 16


@pytest.fixture
def call():
    b = make_batch([1, 20, 1], [33, 5, 70], num_qo_heads=Hq, num_kv_heads=Hkv, head_dim=D,
                   page_size=PAGE, seed=4)
    w = MixedAttention(Hq, Hkv, D, PAGE, device="cpu", max_batch=8, max_tokens=64)
    w.plan(b.qo_indptr, b.kv_indptr, b.seq_lens)
    T = b.q.shape[0]
    args = dict(q=b.q, k=b.k, v=b.v, k_cache=b.k_cache.clone(), v_cache=b.v_cache.clone(),
                kv_indices=b.kv_indices, plan_meta=w.plan_meta, plan_info=list(w.plan_info),
                partial_out=w.partial_out.normal_(), partial_lse=w.partial_lse.normal_(),
                out=poison_like(b.q), lse=torch.full((T, Hq), 7.0), sinks=None, sm_scale=0.125,
                logit_cap=0.0, window_left=-1, k_scale=1.0, v_scale=1.0)
    return args


ORDER = ["q", "k", "v", "k_cache", "v_cache", "kv_indices", "plan_meta", "plan_info",
         "partial_out", "partial_lse", "out", "lse", "sinks", "sm_scale", "logit_cap",
         "window_left", "k_scale", "v_scale"]
WRITTEN = ["k_cache", "v_cache", "out", "lse", "partial_out", "partial_lse"]


def snapshot(args):
    return {n: args[n].clone() for n in WRITTEN if isinstance(args.get(n), torch.Tensor)}


def expect_rejected(args, match, **changes):
    before = snapshot(args)
    a = dict(args, **changes)
    with pytest.raises(RuntimeError, match=match):
        torch.ops.mixed_attn.forward(*[a[n] for n in ORDER])
    for n, t in before.items():
        now = args[n]
        assert torch.equal(t.view(torch.uint8), now.view(torch.uint8)), f"{n} was written"


T = 22  # tokens of the fixture batch


@pytest.mark.parametrize("name,match,change", [
    ("q_dtype", r"q must be bfloat16 or float16", lambda a: dict(q=a["q"].double())),
    ("q_rank", r"q must be \[T, Hq, D\]", lambda a: dict(q=a["q"].flatten(1))),
    ("q_heads", r"q must be \[T, 4, 64\]", lambda a: dict(q=a["q"][:, :2])),
    ("q_tokens", r"q has 21 tokens but the plan has 22", lambda a: dict(q=a["q"][:-1])),
    ("q_stride", r"q must be contiguous in its last dimension",
     lambda a: dict(q=a["q"].transpose(1, 2).contiguous().transpose(1, 2))),
    ("q_head_stride", r"q's address and its strides .* must be multiples of 16 bytes",
     lambda a: dict(q=torch.zeros(T, Hq, D + 4, dtype=a["q"].dtype)[:, :, :D].copy_(a["q"]))),
    ("q_address", r"q's address and its strides .* must be multiples of 16 bytes",
     lambda a: dict(q=torch.zeros(T * Hq * D + 1, dtype=a["q"].dtype)[1:].view(T, Hq, D).copy_(a["q"]))),
    ("k_head_stride", r"k's address and its strides .* must be multiples of 16 bytes",
     lambda a: dict(k=torch.zeros(T, Hkv, D + 4, dtype=a["k"].dtype)[:, :, :D].copy_(a["k"]))),
    ("v_address", r"v's address and its strides .* must be multiples of 16 bytes",
     lambda a: dict(v=torch.zeros(T * Hkv * D + 1, dtype=a["v"].dtype)[1:].view(T, Hkv, D).copy_(a["v"]))),
    ("cache_head_stride", r"k_cache's address and its strides .* must be multiples of 16 bytes",
     lambda a: dict(k_cache=torch.zeros(*a["k_cache"].shape[:3], D + 4, dtype=a["k_cache"].dtype)[..., :D]
                    .copy_(a["k_cache"]))),
    ("cache_address", r"v_cache's address and its strides .* must be multiples of 16 bytes",
     lambda a: dict(v_cache=torch.zeros(a["v_cache"].numel() + 1, dtype=a["v_cache"].dtype)[1:]
                    .view(a["v_cache"].shape).copy_(a["v_cache"]))),
    ("k_dtype", r"k must have q's dtype", lambda a: dict(k=a["k"].half())),
    ("k_shape", r"k must have shape \[22, 2, 64\]", lambda a: dict(k=a["k"][:, :1])),
    ("k_without_v", r"k and v must be given together", lambda a: dict(v=None)),
    ("cache_dtype", r"k_cache must have q's dtype", lambda a: dict(k_cache=a["k_cache"].float())),
    ("cache_dtypes_differ", r"v_cache must have k_cache's dtype",
     lambda a: dict(k_cache=a["k_cache"].to(FP8))),
    ("cache_page_size", r"k_cache must be \[num_pages, 16, 2, 64\]",
     lambda a: dict(k_cache=a["k_cache"].view(-1, 8, Hkv, D))),
    ("cache_pages_differ", r"v_cache has .* pages but k_cache has",
     lambda a: dict(v_cache=a["v_cache"][:-1])),
    ("kv_indices_dtype", r"kv_indices must be a contiguous 1-D int32",
     lambda a: dict(kv_indices=a["kv_indices"].long())),
    ("kv_indices_short", r"kv_indices holds 9 page ids but kv_indptr\[-1\] is 10",
     lambda a: dict(kv_indices=a["kv_indices"][:-1])),
    ("page_id_out_of_range", r"kv_indices\[3\] = 99 .* is not a page",
     lambda a: dict(kv_indices=torch.cat([a["kv_indices"][:3], torch.tensor([99], dtype=torch.int32),
                                          a["kv_indices"][4:]]))),
    ("out_shape", r"out must have shape \[22, 4, 64\]", lambda a: dict(out=a["out"][:, :, :32])),
    ("out_dtype", r"out must have q's dtype", lambda a: dict(out=a["out"].half())),
    ("lse_shape", r"lse must have shape \[22, 4\]", lambda a: dict(lse=a["lse"][:-1])),
    ("lse_dtype", r"lse must be float32", lambda a: dict(lse=a["lse"].double())),
    ("sinks_shape", r"sinks must have shape \[4\]", lambda a: dict(sinks=torch.zeros(3))),
    ("arena_too_small", r"arena too small: the plan needs",
     lambda a: dict(partial_out=a["partial_out"][:1], partial_lse=a["partial_lse"][:1])),
    ("arena_missing", r"no arena", lambda a: dict(partial_out=None, partial_lse=None)),
    ("arena_lse_shape", r"partial_lse must be", lambda a: dict(partial_lse=a["partial_lse"][:, :2])),
    ("plan_info_length", r"plan_info: expected", lambda a: dict(plan_info=a["plan_info"][:-1])),
    ("plan_info_not_a_plan", r"not a plan", lambda a: dict(plan_info=[0] * len(a["plan_info"]))),
    ("plan_meta_dtype", r"plan_meta must be a contiguous 1-D int32",
     lambda a: dict(plan_meta=a["plan_meta"].long())),
    ("window_differs", r"window_left \(5\) differs from the plan's \(-1\)",
     lambda a: dict(window_left=5)),
    ("sm_scale", r"sm_scale must be finite and > 0", lambda a: dict(sm_scale=-1.0)),
    ("k_scale", r"k_scale must be finite and > 0", lambda a: dict(k_scale=0.0)),
    ("logit_cap", r"logit_cap must be finite and >= 0", lambda a: dict(logit_cap=float("nan"))),
])
def test_forward_rejects(call, name, match, change):
    expect_rejected(call, match, **change(call))


def test_valid_call_writes(call):
    # The fixture itself is a valid call: it must write out, lse and the cache.
    before = snapshot(call)
    torch.ops.mixed_attn.forward(*[call[n] for n in ORDER])
    assert not torch.isnan(call["out"]).any()
    assert not torch.equal(before["k_cache"], call["k_cache"])
    assert not torch.equal(before["lse"], call["lse"])


def _wrapper(**kw):
    return MixedAttention(Hq, Hkv, D, PAGE, device="cpu", max_batch=8, max_tokens=64, **kw)


@pytest.mark.parametrize("qo,kv,seq,match", [
    ([0, 3, 3], [0, 1, 2], [3, 4], r"strictly increasing .* row 1 has extend_len 0"),
    ([0, 5, 3], [0, 1, 2], [5, 4], r"strictly increasing"),
    ([1, 3, 5], [0, 1, 2], [3, 4], r"qo_indptr\[0\] must be 0"),
    ([0, 3, 5], [0, 1], [3, 4], r"kv_indptr must have 3 entries"),
    ([0, 3, 5], [0, 1, 2], [3], r"seq_lens must have 2 entries"),
    ([0, 3, 5], [0, 1, 2], [3, 1], r"seq_lens\[1\] = 1 is smaller than the row's extend_len 2"),
    ([0, 3, 5], [0, 1, 2], [3, 40], r"row 1 has 1 pages but seq_len 40 needs 3"),
    ([0, 3, 5], [0, 2, 1], [3, 4], r"kv_indptr must be non-decreasing"),
])
def test_plan_rejects(qo, kv, seq, match):
    w = _wrapper()
    w.plan([0, 1, 2], [0, 1, 2], [3, 4])
    good_info, good_meta = list(w.plan_info), w.plan_meta.clone()
    with pytest.raises(RuntimeError, match=match):
        w.plan(qo, kv, seq)
    assert w.plan_info == good_info and torch.equal(w.plan_meta, good_meta)


def test_unsupported_head_dim():
    # Rejected when the wrapper is built: the launch policy has no kernel for it.
    with pytest.raises(RuntimeError, match=r"head_dim must be 64, 128 or 256, got 96"):
        MixedAttention(Hq, Hkv, 96, PAGE, device="cpu", max_batch=8, max_tokens=64)


def test_heads_not_a_multiple():
    with pytest.raises(ValueError, match=r"num_qo_heads \(6\) must be a multiple of num_kv_heads \(4\)"):
        MixedAttention(6, 4, 64, PAGE, device="cpu")


def test_plan_arguments_must_be_int32_host_tensors():
    with pytest.raises(RuntimeError, match=r"qo_indptr must be a host|must be int32"):
        torch.ops.mixed_attn.plan(torch.tensor([0, 1]).float(), torch.tensor([0, 1], dtype=torch.int32),
                                  torch.tensor([3], dtype=torch.int32),
                                  torch.zeros(100, dtype=torch.int32),
                                  make_config("cpu", 16, 4, 2, 64))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_device_mismatch(call):
    a = {n: (v.cuda() if isinstance(v, torch.Tensor) else v) for n, v in call.items()}
    expect_rejected(a, r"out must be on cuda", out=call["out"])


@pytest.mark.parametrize("plan_fp8,cache", [(0, "fp8"), (1, "bf16")])
def test_cache_dtype_must_match_the_plan(call, plan_fp8, cache):
    # A plan chooses its GPU kernels for one cache dtype (the sm_90a extend kernel takes b16
    # caches only); forward refuses a cache of the other kind before anything is written. A plan
    # described for an H200 reaches the check on the CPU too (prepare_forward is shared).
    b = make_batch([1, 20, 1], [33, 5, 70], num_qo_heads=Hq, num_kv_heads=Hkv, head_dim=D,
                   page_size=PAGE, seed=4)
    qo, kvp, seq = b.qo_indptr, b.kv_indptr, b.seq_lens
    cfg = make_config("cpu", PAGE, Hq, Hkv, D, device_kind=1, device_arch=90, device_sm90_extend=1,
                      device_tma_encoder=1, kv_fp8=plan_fp8)
    meta = torch.zeros(4096, dtype=torch.int32)
    info = list(torch.ops.mixed_attn.plan(qo, kvp, seq, meta, cfg))
    kc = call["k_cache"].to(FP8) if cache == "fp8" else call["k_cache"].to(torch.bfloat16)
    vc = call["v_cache"].to(FP8) if cache == "fp8" else call["v_cache"].to(torch.bfloat16)
    args = dict(call, q=call["q"].to(torch.bfloat16), k=call["k"].to(torch.bfloat16),
                v=call["v"].to(torch.bfloat16), k_cache=kc, v_cache=vc,
                out=poison_like(call["q"].to(torch.bfloat16)), plan_meta=meta, plan_info=info)
    expect_rejected(args, r"but the plan was made for a")


def test_a_plan_with_cut_items_needs_the_arena(call):
    # A plan that cuts extend items (made for an H200: every item in 2 parts) parks the parts in
    # the arena: run without one, it is refused before anything is written, naming the arena.
    b = make_batch([1, 20, 1], [33, 5, 70], num_qo_heads=Hq, num_kv_heads=Hkv, head_dim=D,
                   page_size=PAGE, seed=4)
    h200 = dict(device_kind=1, device_arch=90, num_sms=132, device_sm90_extend=1, device_tma_encoder=1)
    cfg = make_config("cpu", PAGE, Hq, Hkv, D, mode=1, extend_item_parts=2, **h200)
    meta = torch.zeros(1 << 12, dtype=torch.int32)
    qo, kv, sl = (torch.as_tensor(x, dtype=torch.int32) for x in (b.qo_indptr, b.kv_indptr, b.seq_lens))
    info = torch.ops.mixed_attn.plan(qo, kv, sl, meta, cfg)
    assert info[list(torch.ops.mixed_attn.plan_field_names("info")).index("extend_cut_items")] > 0
    expect_rejected(call, r"cuts \d+ extend items into parts.*no arena", plan_meta=meta, plan_info=list(info),
                    partial_out=None, partial_lse=None)


def test_a_forced_cut_the_metadata_buffer_cannot_count_is_refused():
    # extend_item_parts=N needs a counter per item in the metadata: a buffer sized without them
    # (plan_meta_capacity's head_groups 0) is an error naming the fix, and the buffer is untouched.
    h200 = dict(device_kind=1, device_arch=90, num_sms=132, device_sm90_extend=1, device_tma_encoder=1)
    qo, kv, sl = (torch.tensor(x, dtype=torch.int32) for x in ([0, 1024], [0, 1088], [17408]))
    cfg = make_config("cpu", 16, 32, 8, 128, mode=1, extend_item_parts=3, **h200)
    meta = torch.full((torch.ops.mixed_attn.plan_meta_capacity(1, 1024, 48),), 7, dtype=torch.int32)
    with pytest.raises(RuntimeError, match=r"extend_item_parts=3: the plan's 176 cut items need .*head_groups"):
        torch.ops.mixed_attn.plan(qo, kv, sl, meta, cfg)
    assert (meta == 7).all()


def test_a_tile_shape_the_kernel_lacks_is_refused():
    # extend_block_rows names a tile the kernel has (192 or 128 rows on the sm_90a kernel at head
    # dim 128 with a 16-bit cache): another is an error naming the argument and the shapes there
    # are, before the metadata buffer is written; the wrapper refuses it when it is made.
    h200 = dict(device_kind=1, device_arch=90, num_sms=132, device_sm90_extend=1, device_tma_encoder=1)
    qo, kv, sl = (torch.tensor(x, dtype=torch.int32) for x in ([0, 64], [0, 8], [120]))
    meta = torch.full((torch.ops.mixed_attn.plan_meta_capacity(1, 64, 32),), 7, dtype=torch.int32)
    for rows, fp8, shapes in ((160, 0, "192 or 128"), (128, 1, "192")):
        cfg = make_config("cpu", 16, 32, 8, 128, mode=1, extend_block_rows=rows, kv_fp8=fp8, **h200)
        with pytest.raises(RuntimeError, match=rf"extend_block_rows={rows}: .* has tiles of {shapes} rows"):
            torch.ops.mixed_attn.plan(qo, kv, sl, meta, cfg)
        assert (meta == 7).all()
    with pytest.raises(RuntimeError, match=r"extend_block_rows=160: the cpu extend kernel"):
        MixedAttention(Hq, Hkv, D, PAGE, device="cpu", max_batch=8, max_tokens=64, extend_block_rows=160)

@pytest.mark.parametrize("request_kw,msg", [
    (dict(extend_leave_sms=132), r"extend_leave_sms must be -1 \(policy\) or in \[0, num_sms - 1 = 131\], got 132"),
    (dict(extend_leave_sms=-2), r"extend_leave_sms must be -1 \(policy\) or in \[0, num_sms - 1 = 131\], got -2"),
    (dict(extend_leave_sms=8, extend_persistent=0), r"extend_leave_sms=8 caps a persistent sm90 launch"),
    (dict(extend_leave_sms=8, extend_kv_splits=2), r"extend_leave_sms=8 and extend_kv_splits=2 exclude each other"),
    (dict(decode_first=2), r"decode_first must be -1 \(policy\), 0 or 1, got 2"),
    (dict(decode_first=-2), r"decode_first must be -1 \(policy\), 0 or 1, got -2"),
    (dict(decode_first=1, pdl=0), r"decode_first=1 needs programmatic launches"),
    (dict(decode_first=1, extend_leave_sms=8), r"decode_first=1 and extend_leave_sms=8 exclude each other"),
])
def test_a_launch_order_request_the_launch_cannot_honour_is_refused(request_kw, msg):
    # extend_leave_sms=N (an H200's description: 132 SMs) out of range, or on a launch that cannot be
    # persistent or is KV-split; decode_first out of range, without programmatic launches or beside
    # extend_leave_sms=N: an error naming it, the metadata buffer untouched.
    h200 = dict(device_kind=1, device_arch=90, num_sms=132, device_sm90_extend=1, device_tma_encoder=1)
    qo, kv, sl = (torch.tensor(x, dtype=torch.int32) for x in ([0, 1024, 1025], [0, 64, 320], [1024, 4096]))
    cfg = make_config("cpu", 16, 32, 8, 128, mode=0, **request_kw, **h200)
    meta = torch.full((1 << 12,), 7, dtype=torch.int32)
    with pytest.raises(RuntimeError, match=msg):
        torch.ops.mixed_attn.plan(qo, kv, sl, meta, cfg)
    assert (meta == 7).all()
