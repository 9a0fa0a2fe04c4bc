"""The launch policy (csrc/include/mixed_attn/launch_policy.h, csrc/planner/launch_policy.cc), on
the CPU: which kernel, tile, KV split and copy path a plan records for a device description, and
that an override the device cannot honour is an error naming it. The GPU tests check that every
choice computes the right thing; this checks the choices (and the wave rule for the launches the
H200 measurements were made on, benchmarks/RESULTS.md)."""

import pytest
import torch

from mixed_attn.plan_info import CONFIG_FIELDS, FIELDS, field, make_config
from mixed_attn.testing import batch_indptrs

# Device descriptions the policy is asked about: (kind, arch, num_sms, sm90_extend, tma_encoder,
# hip_mfma).
H200 = dict(device_kind=1, device_arch=90, num_sms=132, device_sm90_extend=1, device_tma_encoder=1)
H200_NO_90A = dict(H200, device_sm90_extend=0)
A100 = dict(device_kind=1, device_arch=80, num_sms=108, device_sm90_extend=0, device_tma_encoder=1)
MI300 = dict(device_kind=2, device_arch=0, num_sms=304, device_sm90_extend=0, device_tma_encoder=0,
             device_hip_mfma=1)
RDNA3 = dict(MI300, num_sms=96, device_hip_mfma=0)  # e.g. gfx1100: no CDNA2/CDNA3 MFMA


def policy(dev, d=128, hq=32, hkv=8, page=16, **kw):
    cfg = make_config("cpu", page, hq, hkv, d, **dev, **kw)
    kernel, rows, pack, tile, tma, dk, _, _, _, persistent, max_parts, _ = torch.ops.mixed_attn.launch_policy(cfg)
    return dict(kernel=kernel, rows=rows, pack=pack, tile=tile, tma=tma, decode=dk, persistent=persistent,
                max_parts=max_parts)


def plan(dev, ext, pre, d=128, hq=32, hkv=8, page=16, **kw):
    meta = torch.zeros(1 << 20, dtype=torch.int32)
    return torch.ops.mixed_attn.plan(*batch_indptrs(ext, pre, page, tensors=True), meta,
                                     make_config("cpu", page, hq, hkv, d, **dev, **kw))


def test_field_lists_come_from_cpp():
    assert FIELDS[0] == "magic" and "extend_kv_splits" in FIELDS and "decode_kernel" in FIELDS
    assert CONFIG_FIELDS[0] == "page_size" and len(set(CONFIG_FIELDS)) == len(CONFIG_FIELDS)


@pytest.mark.parametrize("d,rows", [(64, 192), (128, 192), (256, 128)])
def test_h200_takes_the_sm90_kernel(d, rows):
    p = policy(H200, d=d)
    assert p["kernel"] == 2 and p["rows"] == rows and p["decode"] == 1
    assert p["pack"] == 4 and p["tile"] == rows // 4
    assert p["tma"] == 0  # cp.async by default: TMA no faster at 64/128, slower at 256 (session 17)


def test_tma_is_on_request_and_needs_pages_of_sixteen():
    assert policy(H200, page=16)["tma"] == 0 and policy(H200, page=16, extend_tma=0)["tma"] == 0
    for d in (64, 128, 256):
        assert policy(H200, d=d, page=16, extend_tma=1)["tma"] == 1
        assert policy(H200, d=d, page=64, extend_tma=1)["tma"] == 1
    for page in (1, 8):
        assert policy(H200, page=page)["tma"] == 0
        with pytest.raises(RuntimeError, match="extend_tma=1 needs"):
            policy(H200, page=page, extend_tma=1)


def test_q_by_tma_wherever_the_sm90_kernel_runs():
    """extend_q_tma: the sm_90a kernel copies full Q tiles by TMA at every page size and cache type
    (q is always 16-bit); other kernels and devices without the encoder never; 1 where impossible
    is an error naming the field."""
    def q_tma(dev, **kw):
        return field(plan(dev, [300, 1], [0, 40], **kw), "extend_q_tma")

    for page in (1, 16):
        for d in (64, 128, 256):
            assert q_tma(H200, d=d, page=page) == 1
        assert q_tma(H200, page=page, extend_q_tma=0) == 0
    assert q_tma(H200, kv_fp8=1) == 1
    assert q_tma(dict(H200, device_tma_encoder=0)) == 0
    for dev in (H200_NO_90A, A100, MI300):
        assert q_tma(dev) == 0
        with pytest.raises(RuntimeError, match="extend_q_tma=1 needs"):
            q_tma(dev, extend_q_tma=1)


def test_other_gpus_take_the_mma_kernel_and_fp8_caches_the_sm90_one():
    for dev in (H200_NO_90A, A100):
        p = policy(dev)
        assert p["kernel"] == 1 and p["rows"] == 128 and p["tma"] == 0
    # fp8 caches: the sm_90a kernel at every head dim (cp.async into staging tiles, widened by its
    # producer; at head dim 256 they fit beside the ring with 40 bytes to spare), by default and
    # when asked for.
    for d, rows in ((64, 192), (128, 192), (256, 128)):
        for kw in ({}, {"extend_kernel": 2}):
            p = policy(H200, d=d, kv_fp8=1, **kw)
            assert p["kernel"] == 2 and p["rows"] == rows and p["tma"] == 0


def test_programmatic_dependent_launches_on_cuda_9_0_and_newer():
    # The decode launches as the extend's programmatic dependent beside the sm_90a extend (compute
    # capability 9.0, CUDA), on request on other CUDA GPUs of 9.0+; the plan records it; pdl=0 turns
    # it off; pdl=1 below 9.0 is an error.
    assert field(plan(H200, [300, 1], [100, 5000]), "pdl") == 1
    assert field(plan(H200, [300, 1], [100, 5000], pdl=0), "pdl") == 0
    assert field(plan(H200, [300, 1], [100, 5000], extend_kernel=1), "pdl") == 0  # the mma.sync extend
    assert field(plan(H200, [300, 1], [100, 5000], extend_kernel=1, pdl=1), "pdl") == 1
    blackwell = dict(H200, device_arch=100, device_sm90_extend=0)
    assert field(plan(blackwell, [300, 1], [100, 5000]), "pdl") == 0
    assert field(plan(blackwell, [300, 1], [100, 5000], pdl=1), "pdl") == 1
    for dev in (A100, MI300):
        assert field(plan(dev, [300, 1], [100, 5000]), "pdl") == 0
        with pytest.raises(RuntimeError, match="pdl=1 needs a CUDA GPU of compute capability 9.0"):
            policy(dev, pdl=1)
    assert field(plan({}, [300, 1], [100, 5000]), "pdl") == 0  # the CPU plan
    with pytest.raises(RuntimeError, match="pdl must be in"):
        policy(H200, pdl=2)


def test_hip_shapes_and_portable_decode():
    p = policy(MI300, d=128)
    assert p["kernel"] == 1 and p["rows"] == 64 and p["decode"] == 2
    with pytest.raises(RuntimeError, match="decode_backend='tensor_core'"):
        policy(MI300, decode_kernel=1)


def test_hip_extend_needs_cdna_mfma():
    # The HIP extend kernel's MFMA loop is compiled for CDNA2/CDNA3 only: on another AMD GPU the
    # policy refuses (at wrapper build / plan time, before anything is launched or written).
    for kw in ({}, dict(extend_kernel=1), dict(kv_fp8=1), dict(d=64)):
        with pytest.raises(RuntimeError, match=r"needs an AMD CDNA2/CDNA3 GPU \(gfx90a, gfx94x\) with MFMA"):
            policy(RDNA3, **kw)
    with pytest.raises(RuntimeError, match=r"needs an AMD CDNA2/CDNA3 GPU"):
        plan(RDNA3, [4], [32])
    # The flag means nothing off HIP.
    assert policy(dict(A100, device_hip_mfma=0))["kernel"] == 1


def test_impossible_overrides_are_errors_naming_the_argument():
    with pytest.raises(RuntimeError, match="extend_backend='sm90' needs an sm_90a build"):
        policy(A100, extend_kernel=2)
    with pytest.raises(RuntimeError, match="extend_tma=1 needs"):
        policy(H200, extend_tma=1, kv_fp8=1)
    with pytest.raises(RuntimeError, match="is a GPU kernel: the plan is for the CPU"):
        policy({}, extend_kernel=1)
    with pytest.raises(RuntimeError, match="device_kind must be in"):
        policy(dict(H200, device_kind=7))


def test_overrides_are_recorded():
    p = policy(H200, extend_kernel=1)
    assert p["kernel"] == 1 and p["rows"] == 128
    p = policy(H200, decode_kernel=2)
    assert p["decode"] == 2
    p = policy(H200, extend_tile_tokens=7)
    assert p["tile"] == 7


# The KV split from the step-cost estimate (csrc/include/mixed_attn/step_cost.h): a CTA's fixed
# cost (about 770 keys' worth) is what a split doubles, so few long tiles split and many or
# short ones do not. Case D at d128 is 22 tiles x 8 head groups = 176 CTAs of ~17k keys on 132
# SMs: split (measured 0.60 ms split); a 2048-token prefill chunk over no prefix (344 CTAs of
# 48..2048 keys) was split by the old wave rule and measured 1.5x slower than unsplit.
@pytest.mark.parametrize("ext,pre,splits,hq,hkv", [
    ([1024], [16384], 2, 32, 8),  # case D at d128: 176 CTAs
    ([4096], [4096], 1, 32, 8),   # case B: 688 CTAs, five-plus waves
    ([2048], [0], 1, 32, 8),      # a prefill chunk, no prefix: short tiles
    ([64], [8192], 2, 32, 8),     # 16 CTAs of 8k keys
    ([50], [100], 1, 32, 8),      # a small launch: 16 CTAs, one wave either way. Split until session 22
                                  # (measured 26 vs 28 us before Q by TMA); a KV-split CTA now costs
                                  # 5 us more (step_cost.h), and this one is not re-measured
    ([2048], [0], 2, 8, 1),  # case F's extend half (MQA, 24-query tiles): 86 CTAs fill half the
                             # SMs unsplit (measured 0.049 ms split vs 0.059)
])
def test_kv_split_from_the_step_cost(ext, pre, splits, hq, hkv):
    # Against the whole-item persistent launch (cut items, below, may beat both), in the kernel's
    # default shape (the 128-row one, chosen per step in step 3e, has its own test below).
    info = plan(H200, ext, pre, hq=hq, hkv=hkv, mode=1, extend_item_parts=1, extend_block_rows=192)
    assert field(info, "extend_kernel") == 2
    assert field(info, "extend_kv_splits") == splits


# Cut items (plan.cc, step 3c; docs/extend_work_balance.md): a persistent launch's costliest items
# in 2-4 parts, dealt after the whole items, where the estimate gains at least 3% over the best
# whole-item launch. The choices on B and D are the model's of docs/extend_work_balance.md (B:
# 104 items in 2 parts, 832 -> 781 us; D: 44 in 3, 594 -> 534 us).
def test_cut_items_from_the_step_cost():
    def cut(info):
        return field(info, "extend_cut_items"), field(info, "extend_item_parts")

    b = plan(H200, [4096], [4096], mode=1)
    assert cut(b) == (104, 2) and field(b, "extend_ctas") == 132 and field(b, "extend_kv_splits") == 1
    # Each part's partial: 192 rows x (128 + 8) floats, in 7 slots of 32 x 128 floats.
    assert field(b, "num_partials") == 104 * 2 * 7 and field(b, "extend_cut_slot0") == 0
    d = plan(H200, [1024], [16384], mode=1)  # was a KV split of 2
    assert cut(d) == (44, 3) and field(d, "extend_ctas") == 132 and field(d, "extend_kv_splits") == 1
    # Split mode: the parts' slots follow the decode partials.
    ds = plan(H200, [1024] + [1] * 4, [16384] + [32768] * 4, mode=0)
    assert cut(ds)[0] == 44 and field(ds, "extend_cut_slot0") > 0
    assert field(ds, "num_partials") == field(ds, "extend_cut_slot0") + 44 * 3 * 7
    assert cut(plan(H200, [2048], [0], mode=1)) == (0, 1)  # short tiles: balanced already
    # Never in graph-safe plans, nor (unless fixed) in deterministic ones, nor with
    # extend_item_parts=1, extend_persistent=0 or a fixed KV split of 2.
    g = dict(graph_safe=1, graph_max_rows=8, graph_max_tokens=8192, graph_max_extend_tokens=8192)
    assert cut(plan(H200, [4096], [4096], mode=0, **g)) == (0, 1)
    assert cut(plan(H200, [4096], [4096], mode=1, deterministic=1)) == (0, 1)
    assert cut(plan(H200, [4096], [4096], mode=1, extend_item_parts=1)) == (0, 1)
    assert cut(plan(H200, [4096], [4096], mode=1, extend_persistent=0)) == (0, 1)
    assert cut(plan(H200, [1024], [16384], mode=1, extend_kv_splits=2)) == (0, 1)
    assert policy(H200, extend_persistent=0)["max_parts"] == 1 and policy(A100)["max_parts"] == 1
    # Fixed: every item, deterministic plans included (a fixed cut is batch-invariant).
    assert cut(plan(H200, [4096], [4096], mode=1, extend_item_parts=3)) == (688, 3)
    assert cut(plan(H200, [4096], [4096], mode=1, deterministic=1, extend_item_parts=4)) == (688, 4)
    for kw, msg in ((dict(dev=A100), "needs the sm90 extend kernel"),
                    (dict(extend_persistent=0), "extend_persistent left on"),
                    (dict(extend_kv_splits=2), "exclude each other"),
                    (dict(extend_tile_tokens=96), "tiles of one pass")):
        dev = kw.pop("dev", H200)
        with pytest.raises(RuntimeError, match=msg):
            policy(dev, extend_item_parts=2, **kw)
    with pytest.raises(RuntimeError, match=r"extend_item_parts must be in \[-1, 4\]"):
        policy(H200, extend_item_parts=5)


# extend_leave_sms (launch_policy.h): the persistent extend launch on at most num_sms - N CTAs,
# never KV-split, its cut and estimate made for those SMs, so that N SMs are free for the decode.
def test_an_extend_launch_may_leave_sms_to_the_decode():
    def launch(info):
        return (field(info, "extend_ctas"), field(info, "extend_kv_splits"), field(info, "extend_cut_items"))

    f = ([2048] + [1] * 128, [0] + [8191] * 128)  # case F: MQA, 86 items
    # Leaving none, the policy cuts 46 items to fill 132 SMs.
    assert launch(plan(H200, *f, hq=8, hkv=1, extend_leave_sms=0)) == (132, 1, 46)
    assert launch(plan(H200, *f, hq=8, hkv=1, extend_leave_sms=46)) == (86, 1, 0)
    assert launch(plan(H200, *f, hq=8, hkv=1, extend_leave_sms=100)) == (32, 1, 0)
    # A launch the estimate KV-splits is persistent on the rest instead, its 16 long items cut in
    # 4 (cut items are part of the persistent launch).
    assert field(plan(H200, [64], [8192], mode=1), "extend_kv_splits") == 2
    assert launch(plan(H200, [64], [8192], mode=1, extend_leave_sms=66)) == (64, 1, 16)
    assert launch(plan(H200, [4096], [4096], mode=1, extend_leave_sms=66)) == (66, 1, 0)
    assert field(plan(H200, [4096], [4096], mode=1, extend_leave_sms=66), "extend_leave_sms") == 66
    g = dict(graph_safe=1, graph_max_rows=8, graph_max_tokens=8192, graph_max_extend_tokens=8192)
    assert field(plan(H200, [4096], [4096], mode=0, extend_leave_sms=32, **g), "extend_ctas") == 100
    for kw, msg in ((dict(dev=A100), "needs the sm90 extend kernel"),
                    (dict(extend_persistent=0), "extend_persistent left on"),
                    (dict(extend_kv_splits=2), "exclude each other")):
        dev = kw.pop("dev", H200)
        with pytest.raises(RuntimeError, match=msg):
            policy(dev, extend_leave_sms=8, **kw)
    for bad in (-2, 132):
        with pytest.raises(RuntimeError,
                           match=r"extend_leave_sms must be -1 \(policy\) or in \[0, num_sms - 1 = 131\]"):
            policy(H200, extend_leave_sms=bad)


# decode_first (launch_policy.h): the decode's stage 1 launches first and the extend as its
# programmatic dependent, in the steps whose decode has no merge, in split, non-graph-safe plans:
# on request (1), never (0), or by the policy (-1, the default; plan.cc step 3g).
def test_the_decode_launches_first_where_the_request_and_the_step_allow():
    def first(info):
        return field(info, "decode_first"), field(info, "extend_leave_sms"), field(info, "max_splits")

    a = ([512] + [1] * 128, [0] + [4095] * 128)  # case A: a small extend beside 128 decodes at 4k
    b = ([4096] + [1] * 64, [4096] + [8191] * 64)  # case B: the policy would leave 33 SMs
    assert first(plan(H200, *a, decode_first=0)) == (0, 0, 1)  # never: the extend first
    assert first(plan(H200, *a, decode_first=1)) == (1, 0, 1)
    assert first(plan(H200, *b, decode_first=1)) == (1, 0, 1)  # the request replaces the leave rule
    assert first(plan(H200, *b, decode_first=0)) == (0, 33, 1)
    # Not in this step or plan: decode rows that split (their merge), no extend or no decode rows,
    # fold mode, a graph-safe plan, a KV-split extend launch.
    long_rows = ([512] + [1] * 2, [0] + [131071] * 2)
    assert field(plan(H200, *long_rows, decode_first=1), "max_splits") > 1
    assert field(plan(H200, *long_rows, decode_first=1), "decode_first") == 0
    assert field(plan(H200, [1] * 8, [4095] * 8, decode_first=1), "decode_first") == 0
    assert field(plan(H200, [512], [0], decode_first=1), "decode_first") == 0
    assert field(plan(H200, *a, mode=1, decode_first=1), "decode_first") == 0
    g = dict(graph_safe=1, graph_max_rows=129, graph_max_tokens=640, graph_max_extend_tokens=512)
    assert field(plan(H200, *a, decode_first=1, **g), "decode_first") == 0
    assert field(plan(H200, [64] + [1] * 4, [8192] + [4095] * 4, decode_first=1, extend_kv_splits=2),
                 "decode_first") == 0
    # Devices without programmatic launches refuse it (the order alone would change nothing).
    for dev in (A100, MI300):
        with pytest.raises(RuntimeError, match="decode_first=1 needs programmatic launches"):
            policy(dev, decode_first=1)


def test_the_policy_puts_the_decode_first_beside_a_small_extend():
    # decode_first=-1 (the default): step_cost.h's estimate of each order. Cases A and C (a small
    # extend beside a large decode of rows that do not split) take it; B, D and K leave SMs to the
    # decode instead (step 3f); E and F split their decode rows (a merge); fold plans, graph-safe
    # plans, a request that leaves SMs and devices without programmatic launches never take it.
    def taken(ext, pre, d=128, hq=32, hkv=8, **kw):
        return field(plan(H200, ext, pre, d=d, hq=hq, hkv=hkv, **kw), "decode_first")

    K = 1024
    a = ([512] + [1] * 128, [0] + [4 * K - 1] * 128)
    c = ([256] + [1] * 256, [0] + [2 * K - 1] * 256)
    assert taken(*a) == 1 and taken(*c) == 1
    assert taken([4096] + [1] * 64, [4096] + [8 * K - 1] * 64) == 0  # B
    assert taken([1024] + [1] * 32, [16 * K] + [32 * K - 1] * 32) == 0  # D
    assert taken([1024] + [1] * 128, [0] + [4 * K - 1] * 128, d=64) == 0  # K
    assert taken([2048] + [1] * 128, [0] + [8 * K - 1] * 128, hq=8, hkv=1) == 0  # F: its rows split
    assert taken(*a, mode=1) == 0 and taken(*a, extend_leave_sms=8) == 0 and taken(*a, pdl=0) == 0
    g = dict(graph_safe=1, graph_max_rows=129, graph_max_tokens=640, graph_max_extend_tokens=512)
    assert taken(*a, **g) == 0
    # An extend as large as the decode: the extend first (with SMs left, or none worth leaving).
    assert taken([8 * K] + [1] * 128, [0] + [4 * K - 1] * 128) == 0


# The policy's choice (extend_leave_sms = -1, the default; plan.cc step 3f): a split step whose
# decode half outweighs its extend leaves SMs to the decode where the estimate of the two halves
# side by side (step_cost.h, overlapped_step_us) beats the launch planned for the extend alone.
def test_a_step_whose_decode_outweighs_its_extend_leaves_sms_to_it():
    def leave(info):
        return field(info, "extend_leave_sms"), field(info, "extend_ctas")

    b = ([4096] + [1] * 64, [4096] + [8191] * 64)  # case B: the halves about equal
    f = ([2048] + [1] * 128, [0] + [8191] * 128)  # case F: MQA, the decode ~5x the extend
    c = ([256] + [1] * 256, [0] + [2047] * 256)  # case C: 64 extend CTAs leave 68 SMs already
    assert leave(plan(H200, *b)) == (33, 99) and leave(plan(H200, *b, mode=2)) == (33, 99)
    # Mode auto weighs the overlapped split against fold (on every SM), keeps split, and records
    # the request and both estimates as any auto plan does.
    a = plan(H200, *b, mode=2)
    assert field(a, "mode") == 0 and field(a, "mode_requested") == 2
    assert 0 < field(a, "est_split_ns") < field(a, "est_fold_ns")
    assert leave(plan(H200, *f, hq=8, hkv=1)) == (66, 66)
    assert leave(plan(H200, *c)) == (0, 64)
    # Deterministic plans too (where the whole items and the decode's CTAs run, not what they
    # compute: their items are never cut, their decode splits fixed in tokens).
    assert leave(plan(H200, *b, deterministic=1)) == (33, 99)
    assert field(plan(H200, *b, deterministic=1), "extend_cut_items") == 0
    # None: no decode rows, a decode too small to hide the longer extend, fold mode, a request of
    # 0, graph-safe plans, KV splits fixed, every item cut, no programmatic launch of the decode
    # (pdl=0), a GPU without the sm90 kernel.
    assert leave(plan(H200, [4096], [4096])) == (0, 132)
    assert leave(plan(H200, [4096, 1], [4096, 1023]))[0] == 0
    # Nor where the overlap was measured to lose: an extend streaming its K/V near the HBM rate
    # (case J: 64 extends of 32 tokens over 2k) or several times the decode half (case I).
    assert leave(plan(H200, [32] * 64 + [1] * 64, [2048] * 64 + [4095] * 64))[0] == 0
    assert leave(plan(H200, [2048] + [1] * 8, [65536] + [131071] * 8))[0] == 0
    assert leave(plan(H200, [2048] + [1] * 64, [0] + [4095] * 64, d=256, hq=16))[0] > 0  # case G
    assert leave(plan(H200, *b, mode=1))[0] == 0
    assert leave(plan(H200, *b, extend_leave_sms=0))[0] == 0
    g = dict(graph_safe=1, graph_max_rows=80, graph_max_tokens=8192, graph_max_extend_tokens=8192)
    assert leave(plan(H200, *b, **g))[0] == 0
    assert leave(plan(H200, *b, extend_kv_splits=2))[0] == 0
    assert leave(plan(H200, *b, extend_item_parts=2))[0] == 0
    assert leave(plan(H200, *b, pdl=0))[0] == 0
    assert leave(plan(A100, *b)) == (0, 0)


def test_cut_counters_are_zero_in_the_metadata_and_fit_its_capacity():
    # One counter per cut item, zero as uploaded (the kernel's merging part sets it back to zero);
    # a buffer sized without them (head_groups 0) gets no cut rather than an error.
    qo, kv, sl = batch_indptrs([1024], [16384], 16, tensors=True)
    cfg = make_config("cpu", 16, 32, 8, 128, **H200, mode=1)
    cap = torch.ops.mixed_attn.plan_meta_capacity(1, 1024, 48, 8)
    meta = torch.full((cap,), 7, dtype=torch.int32)
    info = torch.ops.mixed_attn.plan(qo, kv, sl, meta, cfg)
    off, n = field(info, "off_extend_cut_counters"), field(info, "extend_cut_items")
    assert n == 44 and field(info, "meta_len") == off + n and (meta[off:off + n] == 0).all()
    small = torch.zeros(torch.ops.mixed_attn.plan_meta_capacity(1, 1024, 48), dtype=torch.int32)
    assert field(torch.ops.mixed_attn.plan(qo, kv, sl, small, cfg), "extend_cut_items") == 0


def test_kv_split_never_in_deterministic_plans_unless_fixed():
    assert field(plan(H200, [64], [8192], mode=1), "extend_kv_splits") == 2
    assert field(plan(H200, [64], [8192], mode=1, deterministic=1), "extend_kv_splits") == 1
    assert field(plan(H200, [50], [100], mode=1, deterministic=1, extend_kv_splits=2), "extend_kv_splits") == 2
    assert field(plan(H200, [50], [100], mode=1, extend_kv_splits=4), "extend_kv_splits") == 2  # clamped


def test_kv_split_needs_one_pass_tiles():
    # A tile larger than one CTA pass (rows / pack = 48 queries) runs in passes: no cluster merge.
    assert field(plan(H200, [50], [100], mode=1, extend_tile_tokens=300), "extend_kv_splits") == 1
    assert field(plan(H200, [50], [100], mode=1, extend_tile_tokens=300, extend_kv_splits=2),
                 "extend_kv_splits") == 1


# Persistent sm_90a launches: where the tiles are not KV-split, min(num_sms, tiles x head groups)
# CTAs serve the items (the kernel deals them out, extend/sm90/traits.cuh); KV-split launches, the
# other kernels and extend_persistent=0 keep one CTA per item.
def test_persistent_extend_launch_where_not_split():
    assert policy(H200)["persistent"] == 1
    assert policy(H200, extend_persistent=0)["persistent"] == 0
    assert policy(A100)["persistent"] == 0 and policy(H200, kv_fp8=1, d=256)["persistent"] == 1
    b = plan(H200, [4096], [4096], mode=1)  # case B: 86 tiles x 8 head groups
    assert field(b, "extend_kv_splits") == 1 and field(b, "extend_ctas") == 132
    assert field(plan(H200, [50], [100], mode=1, extend_kv_splits=1), "extend_ctas") == 16  # 2 tiles x 8
    assert field(plan(H200, [64], [8192], mode=1), "extend_ctas") == 0  # split: a cluster per item
    assert field(plan(H200, [4096], [4096], mode=1, extend_persistent=0), "extend_ctas") == 0
    assert field(plan(dict(H200, num_sms=3), [4096], [4096], mode=1), "extend_ctas") == 3
    assert field(plan(A100, [4096], [4096], mode=1), "extend_ctas") == 0
    assert field(plan({}, [4096], [4096], mode=1), "extend_ctas") == 0
    # Deterministic plans (the items' bits do not depend on which CTA serves them) and tiles of
    # several passes run persistent too.
    assert field(plan(H200, [4096], [4096], mode=1, deterministic=1), "extend_ctas") == 132
    assert field(plan(H200, [4096], [4096], mode=1, extend_tile_tokens=96), "extend_ctas") == 132
    # A 128k-key decode row folded into a prefill chunk's launch: its 8 items dwarf the chunk's
    # 688, which the hardware's dynamic scheduling spreads better than the kernel's static deal
    # (estimated 2.90 against 3.10 ms): one CTA per item (step_cost.h, kPersistentMargin).
    assert field(plan(H200, [4096, 1], [0, 131071], mode=1, extend_kv_splits=1, extend_item_parts=1),
                 "extend_ctas") == 0
    assert field(plan(H200, [4096, 1], [0, 131071], mode=1, extend_kv_splits=1, extend_persistent=1),
                 "extend_ctas") == 132  # asked for: always
    assert field(plan(H200, [2048], [0], mode=1), "extend_ctas") == 132  # estimates 1.5% apart: persistent
    # Split mode: decode rows do not count (they run on the decode kernel).
    assert field(plan(H200, [1] * 40 + [96], [500] * 40 + [0], mode=0, extend_kv_splits=1), "extend_ctas") == 16
    # Graph-safe: the bucket's items, whatever the step (a captured geometry).
    g = dict(graph_safe=1, graph_max_rows=8, graph_max_tokens=4096, graph_max_extend_tokens=4096)
    assert field(plan(H200, [5], [10], mode=0, **g), "extend_ctas") == 132
    assert field(plan(H200, [5], [10], mode=0, extend_persistent=0, **g), "extend_ctas") == 0
    with pytest.raises(RuntimeError, match="extend_persistent=1 needs the sm90 extend kernel"):
        policy(A100, extend_persistent=1)
    with pytest.raises(RuntimeError, match="extend_persistent must be in"):
        policy(H200, extend_persistent=2)


def test_mma_and_cpu_plans_never_split():
    assert field(plan(A100, [50], [100], mode=1), "extend_kv_splits") == 1
    assert field(plan({}, [50], [100], mode=1), "extend_kv_splits") == 1
    assert field(plan({}, [50], [100], mode=1), "extend_kernel") == 3


@pytest.mark.parametrize("d, hq, hkv, expect", [(128, 32, 8, 8), (64, 32, 8, 8), (128, 8, 1, 4),
                                                (256, 16, 8, 4), (256, 32, 8, 2), (256, 16, 1, 1)])
def test_default_decode_max_q_is_two_blocks_or_one_half_at_head_dim_256(d, hq, hkv, expect):
    """Default decode-class bound: 32 (query, head) pairs per row, but 8 (one MMA half) at head
    dim 256, where graph-safe / deterministic launches sized for more ran one-token rows 1.2-1.4x
    slower (RESULTS.md, session 6); an explicit decode_max_q still wins."""
    cfg = make_config("cpu", 16, hq, hkv, d, **H200)
    assert int(torch.ops.mixed_attn.launch_policy(cfg)[8]) == expect
    cfg = make_config("cpu", 16, hq, hkv, d, decode_max_q=6, **H200)
    assert int(torch.ops.mixed_attn.launch_policy(cfg)[8]) == 6


@pytest.mark.parametrize("hq, hkv, expect", [(32, 8, 2), (16, 2, 1), (8, 8, 8), (8, 1, 1)])
def test_narrow_decode_takes_the_rows_that_fit_one_cta(hq, hkv, expect):
    """decode_backend='tensor_core_narrow' (decode_kernel=4): at most 8 (query, head) pairs of a kv
    head a CTA, so by default rows of up to 8 / group tokens are decode rows, and the plan of a
    step records the narrow kernel."""
    p = policy(H200, hq=hq, hkv=hkv, decode_kernel=4)
    assert p["decode"] == 4
    cfg = make_config("cpu", 16, hq, hkv, 128, decode_kernel=4, **H200)
    assert int(torch.ops.mixed_attn.launch_policy(cfg)[8]) == expect
    info = plan(H200, [1, 1, expect, expect + 1], [4000, 30, 900, 50], hq=hq, hkv=hkv, decode_kernel=4)
    assert field(info, "decode_kernel") == 4 and field(info, "num_decode_rows") == 3
    assert field(info, "decode_cta_blocks") == 1


def test_narrow_decode_refuses_what_it_cannot_serve():
    with pytest.raises(RuntimeError, match="GQA group is 16"):
        policy(H200, hq=16, hkv=1, decode_kernel=4)
    with pytest.raises(RuntimeError, match="decode_max_q=3 with decode_backend='tensor_core_narrow'"):
        policy(H200, hq=32, hkv=8, decode_kernel=4, decode_max_q=3)
    with pytest.raises(RuntimeError, match="decode_backend='tensor_core_narrow' is a CUDA"):
        policy(MI300, decode_kernel=4)
    cfg = make_config("cpu", 16, 32, 8, 128, decode_kernel=4)  # the CPU device
    with pytest.raises(RuntimeError, match="decode_backend='tensor_core_narrow' is a GPU kernel"):
        torch.ops.mixed_attn.launch_policy(cfg)


def test_a_step_whose_rows_fit_takes_the_narrow_decode_at_head_dim_256():
    """The policy's tensor-core choice (decode_backend='auto') runs the narrow stage 1 at head dim
    256 on a step whose decode rows all fit one CTA of 8 (query, head) pairs (the wide one at 128,
    where it measured level or faster); graph-safe and deterministic plans size the launch by
    the policy's decode_max_q, so the choice never depends on the rest of the batch there."""
    k = lambda ext, pre, **kw: field(plan(H200, ext, pre, d=256, hq=16, hkv=4, **kw), "decode_kernel")  # noqa: E731
    assert k([1, 1, 300], [4000, 9, 50]) == 4  # group 4, one-token rows: 4 pairs
    assert k([1, 2, 300], [4000, 9, 50]) == 4  # a verify row of 2: 8 pairs
    assert k([1, 2, 300], [4000, 9, 50], decode_max_q=3) == 4  # the step's longest decides
    assert k([1, 3, 300], [4000, 9, 50], decode_max_q=3) == 1  # 3 tokens: 12 pairs, the wide kernel
    assert k([1, 1], [4000, 9], deterministic=1) == 4  # the policy's bound: 2 queries x 4
    assert k([1, 1], [4000, 9], deterministic=1, decode_max_q=3) == 1  # bound 3 x 4 = 12 pairs
    assert k([1, 1], [4000, 9], decode_kernel=1) == 1  # forced wide
    assert field(plan(H200, [1, 1], [4000, 9], d=256, hq=16, hkv=1), "decode_kernel") == 1  # group 16
    assert field(plan(H200, [1, 1, 300], [4000, 9, 50]), "decode_kernel") == 1  # head dim 128: wide


def test_two_kv_heads_a_decode_cta_at_head_dim_64():
    """decode_kv_pack: at head dim 64 (16-bit or fp8 cache) the tensor-core decode reads two adjacent
    kv heads a CTA (one 128-wide row a key) on a step whose rows' pairs of both heads fit a CTA's
    4 MMA blocks; the grid then has half the kv-head slots, so the SM-aware split cuts twice as many.
    Elsewhere (head dim 128, odd kv heads, rows past the 4 blocks, the narrow kernel) one head."""
    pk = lambda ext, pre, **kw: field(plan(H200, ext, pre, **kw), "decode_kv_pack")  # noqa: E731
    dec = ([1] * 8, [4000] * 8)
    assert pk(*dec, d=64) == 2 and pk(*dec, d=128) == 1
    assert pk(*dec, d=64, kv_fp8=1) == 2 and pk(*dec, d=64, kv_fp8=1, decode_kv_pack=1) == 1
    assert pk(*dec, d=64, decode_kv_pack=1) == 1
    assert pk(*dec, d=64, hq=12, hkv=3) == 1  # odd kv heads: by the policy, one head a CTA
    assert pk(*dec, d=64, hq=64, hkv=8) == 2  # group 8: 16 pairs, one block
    assert pk(*dec, d=64, hq=64, hkv=4) == 2  # group 16: 32 pairs, two blocks
    assert pk(*dec, d=64, hq=128, hkv=2) == 1  # group 64: 128 pairs
    assert pk([1, 8, 300], [4000, 9, 50], d=64) == 2  # a verify row of 8 x group 4 x 2 heads = 64
    assert pk([1, 9, 300], [4000, 9, 50], d=64, decode_max_q=9) == 1  # 9 tokens: 72 pairs
    assert pk(*dec, d=64, deterministic=1) == 2  # the policy's bound (8 queries): 4 blocks
    assert pk(*dec, d=64, deterministic=1, decode_max_q=9) == 1
    assert pk(*dec, d=64, decode_kernel=2) == 1  # portable
    assert pk(*dec, d=64, decode_kernel=4) == 1  # narrow
    # Half the kv-head slots: twice the splits fill the GPU (8 rows at 4k: 8 heads x 4 splits of
    # 1024 keys, or 4 slots x 8 splits of 512, about 264 CTAs either way).
    one = plan(H200, *dec, d=64, decode_kv_pack=1)
    two = plan(H200, *dec, d=64)
    assert field(one, "max_splits") == 4 and field(two, "max_splits") == 8
    with pytest.raises(RuntimeError, match="decode_kv_pack=2 needs the tensor_core decode kernel at head dim 64"):
        policy(H200, d=128, decode_kv_pack=2)
    with pytest.raises(RuntimeError, match="decode_kv_pack=2 needs the tensor_core decode kernel"):
        policy(H200, d=64, decode_kernel=4, decode_kv_pack=2)
    with pytest.raises(RuntimeError, match="num_kv_heads must be even"):
        plan(H200, *dec, d=64, hq=12, hkv=3, decode_kv_pack=2)
    with pytest.raises(RuntimeError, match="decode_kv_pack must be in"):
        policy(H200, d=64, decode_kv_pack=3)


@pytest.mark.parametrize("decode_max_q", [1, 2])
def test_paired_decode_graph_bucket_bound_holds(decode_max_q):
    """A graph bucket at head dim 64 pairs kv heads (its launch bound, decode_max_q x group 4 x 2,
    fits one MMA block): half the kv-head slots, so the SM-aware split may cut twice as many
    slots, and the arena bound counts that (64 decode tokens + 264 CTAs / 4 slots, against + 264 /
    8 with one head a CTA); random steps inside the bucket never need more."""
    import random

    graph = dict(graph_safe=1, graph_max_rows=64, graph_max_tokens=512, graph_max_extend_tokens=512,
                 decode_max_q=decode_max_q)
    bound = lambda **kw: int(torch.ops.mixed_attn.launch_policy(  # noqa: E731
        make_config("cpu", 16, 32, 8, 64, **H200, **graph, **kw))[7])
    tokens = 64 * decode_max_q
    assert bound() == tokens + decode_max_q * 66 and bound(decode_kv_pack=1) == tokens + decode_max_q * 33
    rng = random.Random(decode_max_q)
    worst = 0
    for _ in range(200):
        n = rng.randint(1, 64)
        ext = [rng.randint(1, decode_max_q) for _ in range(n)]
        pre = [rng.choice([0, 5, 300, 4000, 60000, 100000]) for _ in ext]
        info = plan(H200, ext, pre, d=64, **graph)
        assert field(info, "decode_kv_pack") == 2
        worst = max(worst, field(info, "num_partials"))
    assert worst <= bound()


def test_sm90_128_row_shape_where_the_estimate_finds_it_faster():
    # Rows of 32 new tokens at a group of 4 fill a 128-row tile and two thirds of a 192-row one: a
    # step of them takes the sm_90a kernel's 128-row shape (measured on the H200, session 20: case
    # J's extend half 0.226 -> 0.190 ms). Long extends and MQA keep 192 rows (B 0.793 -> 0.876 ms
    # at 128 rows, D 0.556 -> 0.578, F's half 0.040 -> 0.047, E's 0.153 -> 0.159).
    def rows(info):
        return field(info, "extend_block_rows")

    j = ([32] * 64, [2048] * 64)
    info = plan(H200, *j)
    assert rows(info) == 128 and field(info, "num_extend_tiles") == 64
    # Short prefill chunks, one wave of short items, whose fixed part the 128-row shape shortens
    # (session 21: case C's extend half, 256 new tokens, 0.023 -> 0.019 ms; kExtendTwoWgItemFactor).
    for ext in ([256], [768], [256] * 4):
        assert rows(plan(H200, ext, [0] * len(ext))) == 128, ext
    for ext, pre, hq, hkv in (([4096], [4096], 32, 8), ([1024], [16384], 32, 8), ([2048], [0], 8, 1),
                              ([1024, 2048], [1000, 0], 32, 8)):
        assert rows(plan(H200, ext, pre, hq=hq, hkv=hkv)) == 192
    # Mode auto plans the chosen shape too (no decode rows here: split).
    assert rows(plan(H200, *j, mode=2)) == 128
    # A fixed geometry or launch keeps the default shape: deterministic and graph-safe plans (a
    # row's shape would depend on its batch), a fixed KV split, fixed item parts; fp8 caches and
    # the other head dims have one shape.
    graph = dict(graph_safe=1, graph_max_rows=64, graph_max_tokens=4096, graph_max_extend_tokens=4096)
    for kw in (dict(deterministic=1), graph, dict(extend_kv_splits=1), dict(extend_item_parts=2),
               dict(kv_fp8=1), dict(extend_persistent=1)):
        assert rows(plan(H200, *j, **kw)) == 192, kw
    assert rows(plan(H200, *j, d=64)) == 192 and rows(plan(H200, *j, d=256, hq=16)) == 128
    # Asked for: every step in that shape (tiles of 128 / 4 = 32 tokens).
    info = plan(H200, [4096], [4096], extend_block_rows=128)
    assert rows(info) == 128 and field(info, "num_extend_tiles") == 128
    assert rows(plan(H200, *j, extend_block_rows=192)) == 192
    # A graph-safe plan takes the shape the wrapper fixes (its bucket's tiles are of that shape).
    info = plan(H200, *j, extend_block_rows=128, **graph)
    assert rows(info) == 128 and field(info, "graph_safe") == 1
    assert rows(plan(H200, [4096], [4096], d=256, hq=16, extend_block_rows=128)) == 128
    # Shapes the kernel does not have are refused, naming the argument and the shapes there are.
    with pytest.raises(RuntimeError, match=r"extend_block_rows=160: the sm90 extend kernel at head dim 128 has "
                                           r"tiles of 192 or 128 rows"):
        plan(H200, *j, extend_block_rows=160)
    with pytest.raises(RuntimeError, match=r"extend_block_rows=128: .* head dim 128 with an fp8 cache has tiles of "
                                           r"192 rows"):
        plan(H200, *j, kv_fp8=1, extend_block_rows=128)
    with pytest.raises(RuntimeError, match=r"extend_block_rows=128: .* head dim 64 has tiles of 192 rows"):
        plan(H200, *j, d=64, extend_block_rows=128)
    # The mma.sync kernel has one shape (128 rows at head dim 128).
    assert rows(plan(H200_NO_90A, *j, extend_block_rows=128)) == 128
    with pytest.raises(RuntimeError, match=r"extend_block_rows=192: the mma extend kernel at head dim 128 has tiles "
                                           r"of 128 rows \(0: the policy's\)"):
        plan(H200_NO_90A, *j, extend_block_rows=192)


def test_metadata_capacity_counts_the_smaller_shape():
    # launch_policy's last entry is the fewest tokens a tile may hold, which sizes the metadata:
    # 128 / 4 = 32 where a step may take the 128-row shape, the one tile size elsewhere.
    def min_tile(**kw):
        return int(torch.ops.mixed_attn.launch_policy(make_config("cpu", 16, 32, 8, 128, **H200, **kw))[11])

    assert min_tile() == 32 and min_tile(kv_fp8=1) == 48 and min_tile(deterministic=1) == 32
    assert min_tile(extend_block_rows=192) == 48 and min_tile(extend_block_rows=128) == 32
    # plan_info.meta_capacity (the wrapper's and OpExtend's buffers): those tiles, and a counter
    # per item where the policy may cut items (head groups 32 / 4).
    from mixed_attn.plan_info import meta_capacity

    cap = torch.ops.mixed_attn.plan_meta_capacity
    assert meta_capacity(make_config("cpu", 16, 32, 8, 128, **H200), 3, 1000) == cap(3, 1000, 32, 8)
    assert meta_capacity(make_config("cpu", 16, 32, 8, 128, **H200, kv_fp8=1), 3, 1000) == cap(3, 1000, 48, 8)
    assert meta_capacity(make_config("cpu", 16, 32, 8, 128, **H200, extend_item_parts=1), 3, 1000) == cap(3, 1000, 32)


def test_the_other_shape_falls_back_where_the_metadata_cannot_hold_it():
    # Step 3e plans the 128-row shape only where that plan fits the caller's metadata buffer: a
    # row of 40 tokens is one 192-row tile but two 128-row ones, so a buffer sized exactly for the
    # 192-row plan gets that plan (not an error), and a larger one the 128-row plan.
    ext, pre = [32] * 64 + [40], [2048] * 64 + [100]
    big = plan(H200, ext, pre)
    exact = field(plan(H200, ext, pre, extend_block_rows=192), "meta_len")
    assert field(big, "extend_block_rows") == 128 and field(big, "meta_len") > exact
    meta = torch.zeros(exact, dtype=torch.int32)
    info = torch.ops.mixed_attn.plan(*batch_indptrs(ext, pre, 16, tensors=True), meta,
                                     make_config("cpu", 16, 32, 8, 128, **H200))
    assert field(info, "extend_block_rows") == 192 and field(info, "num_extend_tiles") == 65
