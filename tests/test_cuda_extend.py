"""CUDA extend kernel (csrc/cuda/extend*.cu) against the fp64 reference.

The kernel runs through torch.ops.mixed_attn (fold-mode plans from the real
planner). Lab path only: with MA_EXTEND_LIB set, through a variant library built by
tools/extend_shim.py instead (tools/sweep_extend.py's tile-shape sweeps). Every test
draws fresh random inputs (mixed_attn.testing.make_batch), poisons out/lse with NaN and the
unused cache slots with NaN (so a kernel that reads a key outside the row, or leaves an output
unwritten, fails).
"""

import os

import pytest
import torch

import mixed_attn
from mixed_attn.reference import reference_attention
from mixed_attn.plan_info import EXTEND_KERNEL_NAMES, field, make_config
from mixed_attn import testing
from mixed_attn.testing import OpExtend

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FP8 = torch.float8_e4m3fn
MODE_SPLIT, MODE_FOLD = 0, 1
EXTEND_KERNEL_SM90 = EXTEND_KERNEL_NAMES.index("sm90")  # launch_policy's first value


@pytest.fixture(scope="module")
def lib():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    path = os.environ.get("MA_EXTEND_LIB")
    if path:  # a variant built by tools/sweep_extend.py
        import sys

        sys.path.insert(0, os.path.join(ROOT, "tools"))
        from extend_shim import ExtendLib

        return ExtendLib(path)
    if not mixed_attn.has_cuda_kernels():
        pytest.skip("this build has no CUDA kernels")
    return OpExtend()


@pytest.fixture(autouse=True, params=["auto", "nosplit", "classic", "few_ctas", "tma", "qcp", "cut", "cut_few",
                                      "rows128", "rows128_cut", "mma"])
def extend_kernel(request, lib):
    """Every test runs each of these ways: "auto" (the launch policy: the warp-specialised sm_90a kernel
    where the build and the GPU have it, the mma.sync kernel elsewhere; its KV-split policy splits
    some of these small launches over 2 CTAs of a cluster, the others run persistent),
    "nosplit" (extend_kv_splits=1: the same kernel, a persistent launch where the plan's estimate
    keeps it), "classic" (extend_kv_splits=1, extend_persistent=0: one CTA per (tile, head group)
    item), "few_ctas" (extend_persistent=1, planned for 3 SMs: each CTA serves many items in a
    row, the ring and the Q slot carried across them), "tma" (extend_tma=1: interior K/V tiles by
    TMA, which the policy no longer picks by itself; configs it cannot serve are skipped), "qcp"
    (extend_q_tma=0: every Q tile by the producer's 16-byte copies, where the policy copies a tile
    whose every row is a query by TMA), "cut"
    (extend_item_parts=3: every item of a persistent launch in 3 parts over shares of its K/V
    tiles, merged through the arena by the last to finish; cut_merge.cuh), "cut_few" (2 parts,
    planned for 3 SMs: a CTA serves whole items and parts in a row, both parts of one item
    included), "rows128" (extend_block_rows=128: the sm_90a kernel's 128-row shape at head dim 128
    with a 16-bit cache, two consumer warpgroups, which the planner picks per step where its
    estimate finds it faster; its launch chosen by the policy), "rows128_cut" (that shape with every
    item of a persistent launch in 2 parts) and "mma" (extend_backend="mma": the portable mma.sync
    kernel). The overrides go into
    every plan the test makes; configs a forced variant cannot serve are skipped."""
    lib.request = {"auto": {}, "nosplit": {"extend_kv_splits": 1},
                   "classic": {"extend_kv_splits": 1, "extend_persistent": 0},
                   "few_ctas": {"extend_kv_splits": 1, "num_sms": 3, "extend_persistent": 1},
                   "tma": {"extend_tma": 1},
                   "qcp": {"extend_q_tma": 0},
                   "cut": {"extend_item_parts": 3},
                   "cut_few": {"extend_item_parts": 2, "num_sms": 3, "extend_persistent": 1},
                   "rows128": {"extend_block_rows": 128},
                   "rows128_cut": {"extend_block_rows": 128, "extend_item_parts": 2},
                   "mma": {"extend_kernel": 1}}[request.param]
    yield request.param
    lib.request = {}


def make_batch(ext_lens, prefix_lens, hq, hkv, d, page_size, q_dtype=torch.bfloat16, kv_dtype=None, seed=0):
    """mixed_attn.testing.make_batch on the GPU, pages scattered over 3 spare ones, the slots no row
    covers poisoned with NaN; fp8 caches hold randn * 4 (the kernel's scales come on top)."""
    kv_dtype = kv_dtype or q_dtype
    return testing.make_batch(ext_lens, prefix_lens, hq, hkv, d, page_size, dtype=q_dtype,
                              kv_dtype=kv_dtype, device="cuda", seed=seed, spare_pages=3,
                              cache_std=4.0 if kv_dtype == FP8 else 1.0, poison_unused=True)


def skip_forced_variant_it_cannot_serve(lib, page_size, hq, hkv, d, **fields):
    """The few_ctas variant forces the persistent launch, which only the sm_90a kernel has (the
    plan refuses it elsewhere); a config the policy sends to the mma.sync kernel is the "mma"
    variant's test. The tma variant forces TMA copies, which need the sm_90a kernel, pages of a
    multiple of 16 slots and a 16-bit cache; the cut variants force cut items, which need the
    sm_90a kernel's persistent launch and tiles of one pass; the rows128 variants force the sm_90a
    kernel's 128-row shape, which it has at head dim 128 with a 16-bit cache only; the other
    configs are the other variants' tests."""
    if not isinstance(lib, OpExtend):
        return
    # A forced variant the launch policy refuses for this config (its error names the override).
    active = [(refusal, reason) for forced, refusal, reason in (
        (lib.request.get("extend_item_parts", 1) > 1, "extend_item_parts=",
         "cut items need the sm_90a kernel's persistent launch and tiles of one pass"),
        (lib.request.get("extend_tma") == 1, "extend_tma=1 needs",
         "TMA copies do not serve this config (page size, fp8 cache or kernel)"),
        (lib.request.get("extend_block_rows", 0) > 0, "extend_block_rows=",
         "the 128-row shape is the sm_90a kernel's at head dim 128 with a 16-bit cache")) if forced]
    if active:
        try:
            torch.ops.mixed_attn.launch_policy(make_config(lib.device, page_size, hq, hkv, d,
                                                           **{**lib.request, **fields}))
        except RuntimeError as e:
            for refusal, reason in active:
                if refusal in str(e):
                    pytest.skip(reason)
            raise
    if lib.request.get("extend_persistent") != 1:
        return
    policy = {k: v for k, v in lib.request.items() if k != "extend_persistent"}
    cfg = make_config(lib.device, page_size, hq, hkv, d, **{**policy, **fields})
    if int(torch.ops.mixed_attn.launch_policy(cfg)[0]) != EXTEND_KERNEL_SM90:
        pytest.skip("the persistent launch is sm_90a-only; the policy runs this config on the mma.sync kernel")


def run_and_check(lib, ext_lens, prefix_lens, hq=4, hkv=2, d=128, page_size=16, q_dtype=torch.bfloat16,
                  kv_dtype=None, window_left=-1, logit_cap=0.0, use_sinks=False, want_lse=True,
                  mode=MODE_FOLD, tile_tokens=None, seed=0):
    kv_dtype = kv_dtype or q_dtype
    b = make_batch(ext_lens, prefix_lens, hq, hkv, d, page_size, q_dtype, kv_dtype, seed=seed)
    k_scale = 0.37 if kv_dtype == FP8 else 1.0
    v_scale = 0.61 if kv_dtype == FP8 else 1.0
    sinks = (torch.randn(hq, generator=torch.Generator().manual_seed(seed)) * 2.0) if use_sinks else None
    skip_forced_variant_it_cannot_serve(lib, page_size, hq, hkv, d, kv_fp8=kv_dtype == FP8,
                                        extend_tile_tokens=tile_tokens or 0)
    info, meta = lib.plan(b.qo_indptr, b.kv_indptr, b.seq_lens, page_size, hq, hkv, d,
                          window_left=window_left, mode=mode, tile_tokens=tile_tokens,
                          kv_fp8=kv_dtype == FP8)
    dev = "cuda"
    q = b.q
    out = torch.full_like(q, float("nan"))
    lse = torch.full((q.shape[0], hq), float("nan"), device=dev) if want_lse else None
    lib.run(info, meta, q, b.k_cache, b.v_cache, b.kv_indices, out, lse=lse,
            sinks=sinks.to(dev) if sinks is not None else None, logit_cap=logit_cap,
            window_left=window_left, k_scale=k_scale, v_scale=v_scale)
    torch.cuda.synchronize()
    ref_out, ref_lse = reference_attention(
        q.cpu(), b.k_cache.cpu(), b.v_cache.cpu(), b.qo_indptr, b.seq_lens, b.kv_indptr,
        b.kv_indices.cpu(), page_size, logit_cap=logit_cap, window_left=window_left, sinks=sinks,
        k_scale=k_scale, v_scale=v_scale)
    got = out.double().cpu()
    assert torch.isfinite(got).all(), "out has unwritten (NaN) or non-finite elements"
    rel = ((got - ref_out).norm() / ref_out.norm()).item()
    tol = 1.2e-2 if q_dtype == torch.bfloat16 else 2.5e-3
    assert rel < tol, f"relative error {rel:.3g} >= {tol}"
    atol = 3e-2 if q_dtype == torch.bfloat16 else 6e-3
    max_err = (got - ref_out).abs().max().item()
    assert max_err < atol + 2e-2 * ref_out.abs().max().item(), f"max abs error {max_err:.3g}"
    if want_lse:
        got_lse = lse.double().cpu()
        assert torch.isfinite(got_lse).all(), "lse has unwritten (NaN) elements"
        lse_err = (got_lse - ref_lse).abs().max().item()
        assert lse_err < 2e-3, f"lse max error {lse_err:.3g}"
    return rel


DTYPES = [torch.bfloat16, torch.float16]


@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("q_dtype", DTYPES)
@pytest.mark.parametrize("fp8", [False, True])
@pytest.mark.parametrize("page_size", [1, 16, 64])
def test_dtypes_head_dims_pages(lib, d, q_dtype, fp8, page_size):
    # Odd lengths, prefix 0 and a prefix that is not a multiple of any tile.
    run_and_check(lib, ext_lens=[37, 1, 130], prefix_lens=[0, 45, 301], hq=4, hkv=2, d=d,
                  page_size=page_size, q_dtype=q_dtype, kv_dtype=FP8 if fp8 else None,
                  seed=d * 7 + page_size + fp8)


@pytest.mark.parametrize("window_left", [-1, 0, 5, 70])
@pytest.mark.parametrize("logit_cap", [0.0, 20.0])
@pytest.mark.parametrize("use_sinks", [False, True])
@pytest.mark.parametrize("fp8", [False, True])
def test_features(lib, window_left, logit_cap, use_sinks, fp8):
    run_and_check(lib, ext_lens=[200, 3, 77], prefix_lens=[150, 0, 1000], hq=8, hkv=2, d=128,
                  page_size=16, kv_dtype=FP8 if fp8 else None, window_left=window_left,
                  logit_cap=logit_cap, use_sinks=use_sinks, seed=window_left + 3 * use_sinks + 11 * fp8)


@pytest.mark.parametrize("d", [64, 256])
def test_features_other_head_dims(lib, d):
    run_and_check(lib, ext_lens=[150, 9], prefix_lens=[40, 333], hq=4, hkv=1, d=d, page_size=16,
                  q_dtype=torch.float16, window_left=50, logit_cap=15.0, use_sinks=True, seed=d)


@pytest.mark.parametrize("hq,hkv", [(1, 1), (3, 1), (6, 2), (5, 5), (16, 1), (32, 8)])
def test_gqa_groups(lib, hq, hkv):
    run_and_check(lib, ext_lens=[70, 5], prefix_lens=[20, 130], hq=hq, hkv=hkv, d=64, page_size=16,
                  seed=hq * 10 + hkv)


@pytest.mark.parametrize("num_rows", [1, 17, 64])
def test_ragged_batches(lib, num_rows):
    gen = torch.Generator().manual_seed(num_rows)
    ext = torch.randint(1, 160, (num_rows,), generator=gen).tolist()
    pre = torch.randint(0, 600, (num_rows,), generator=gen).tolist()
    pre[0] = 0
    run_and_check(lib, ext_lens=ext, prefix_lens=pre, hq=4, hkv=1, d=128, page_size=16,
                  use_sinks=num_rows == 17, window_left=100 if num_rows == 64 else -1, seed=num_rows)


@pytest.mark.parametrize("window_left", [-1, 1000])
def test_long_prefix(lib, window_left):
    run_and_check(lib, ext_lens=[97, 300], prefix_lens=[16384 + 17, 20000], hq=4, hkv=2, d=128,
                  page_size=16, window_left=window_left, seed=5 + window_left)


def test_fold_mode_decode_rows(lib):
    # Fold: decode rows (extend_len 1) go through the extend kernel too.
    run_and_check(lib, ext_lens=[1, 33, 1, 1, 260, 1], prefix_lens=[900, 10, 0, 4000, 64, 17],
                  hq=8, hkv=2, d=128, page_size=16, use_sinks=True, mode=MODE_FOLD, seed=99)


@pytest.mark.parametrize("tile_tokens", [7, 64, 300])
def test_plan_tile_tokens_other_than_kernel(lib, tile_tokens):
    # A plan made with another tile size (smaller, or larger than one CTA pass) still works.
    run_and_check(lib, ext_lens=[333, 20], prefix_lens=[50, 7], hq=4, hkv=4, d=128, page_size=16,
                  tile_tokens=tile_tokens, seed=tile_tokens)


def test_tile_tokens_values(lib):
    # Packed GQA heads: a tile of tt queries x group heads fills at most the rows of a group-1 tile
    # (the policy's tiles at every head dim: the forced 128-row shape has no head dim 64 or fp8).
    if lib.request.get("extend_block_rows"):
        pytest.skip("the policy's tile sizes: the auto variant's test")
    for d in (64, 128, 256):
        rows = lib.tile_tokens(d, 1)
        for group in (1, 2, 3, 4, 8, 16):
            tt = lib.tile_tokens(d, group)
            assert tt >= 1 and tt * group <= rows and (tt + 1) * group > rows, (d, group, tt, rows)


def test_repeatable(lib):
    # Same inputs twice: bitwise identical (a moving result is a race).
    b = make_batch([300, 45], [700, 3], 8, 2, 128, 16, seed=3)
    info, meta = lib.plan(b.qo_indptr, b.kv_indptr, b.seq_lens, 16, 8, 2, 128)
    q, kc, vc, idx = b.q, b.k_cache, b.v_cache, b.kv_indices
    outs = []
    for _ in range(2):
        out = torch.full_like(q, float("nan"))
        lib.run(info, meta, q, kc, vc, idx, out)
        outs.append(out)
    torch.cuda.synchronize()
    assert torch.equal(outs[0], outs[1])


@pytest.mark.parametrize("d", [64, 128, 256])
def test_out_views_give_a_contiguous_outs_bits(lib, d):
    """out may be any view whose last dim is contiguous, its rows not 16-byte aligned included (out
    is the one b16 tensor the op does not require aligned): rows padded by 8 elements, and the same
    view moved 4 bytes off. Every form gives the contiguous out's bits, and no element outside the
    view is written (a wider store in the epilogue would have to keep both true)."""
    b = make_batch([300, 45, 1], [700, 3, 90], 8, 2, d, 16, seed=d)
    skip_forced_variant_it_cannot_serve(lib, 16, 8, 2, d)
    info, meta = lib.plan(b.qo_indptr, b.kv_indptr, b.seq_lens, 16, 8, 2, d)
    q, kc, vc, idx = b.q, b.k_cache, b.v_cache, b.kv_indices
    want = torch.full_like(q, float("nan"))
    lib.run(info, meta, q, kc, vc, idx, want)
    for pad, offset in ((8, 8), (8, 2)):  # 16-byte aligned rows; rows 4 bytes off
        buf = torch.full((q.shape[0], q.shape[1], d + pad), float("nan"), dtype=q.dtype, device="cuda")
        view = buf[:, :, offset:offset + d]
        lib.run(info, meta, q, kc, vc, idx, view)
        torch.cuda.synchronize()
        assert torch.equal(view, want), f"pad {pad}, offset {offset}"
        outside = torch.cat([buf[:, :, :offset], buf[:, :, offset + d:]], dim=-1)
        assert outside.isnan().all(), f"pad {pad}, offset {offset}: written outside the view"


def test_extend_backend_selects_the_portable_kernel(lib, extend_kernel):
    # On an H100/H200 the default is the sm_90a kernel; extend_backend="mma" must reach the
    # mma.sync kernel. Their tiles (128 vs 64 keys) rescale the softmax at different points, so the
    # two give different bits (both within tolerance: the other tests); equal bits mean one kernel ran.
    if extend_kernel != "auto":
        pytest.skip("one run compares both kernels")
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the sm_90a kernel exists only on compute capability 9.0")
    b = make_batch([200], [1000], 8, 2, 128, 16, seed=4)
    q, kc, vc, idx = b.q, b.k_cache, b.v_cache, b.kv_indices
    outs = []
    for kernel in (0, 1):  # auto, mma
        info, meta = lib.plan(b.qo_indptr, b.kv_indptr, b.seq_lens, 16, 8, 2, 128,
                              extend_kernel=kernel)
        assert field(info, "extend_kernel") == (2 if kernel == 0 else 1)
        out = torch.full_like(q, float("nan"))
        lib.run(info, meta, q, kc, vc, idx, out)
        outs.append(out)
    torch.cuda.synchronize()
    assert not torch.equal(outs[0], outs[1])


@pytest.mark.parametrize("splits", [2, 4])
def test_forced_kv_splits(lib, extend_kernel, splits):
    # extend_kv_splits=N splits every query tile's K/V range over N CTAs of a cluster (clamped to
    # the kernel's maximum, 2), here on long prefixes where the policy would not split; window,
    # sinks and LSE go through the merge. The bits must differ from the unsplit run (another
    # summation order), else the override did not reach the kernel. The tma variant runs the
    # same split cases with TMA copies (16-bit caches only).
    if extend_kernel not in ("auto", "tma"):
        pytest.skip("one run per split count, with and without TMA")
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("KV splits exist in the sm_90a kernel only")
    tma = extend_kernel == "tma"
    lib.request = {"extend_kv_splits": splits, **({"extend_tma": 1} if tma else {})}
    # fp8 caches: the producer's staging tiles rotate over each rank's share of the tiles.
    for window_left, d, kv_dtype in ((-1, 128, None), (700, 64, None), (-1, 256, None), (-1, 128, FP8),
                                     (700, 64, FP8)):
        if tma and kv_dtype == FP8:
            continue
        run_and_check(lib, ext_lens=[500, 9], prefix_lens=[5000, 3001], hq=8, hkv=2, d=d, page_size=16,
                      kv_dtype=kv_dtype, window_left=window_left, use_sinks=True, seed=splits * 31 + d)
    lib.request = {}
    if tma:
        return
    b = make_batch([300], [4000], 8, 2, 128, 16, seed=6)
    q, kc, vc, idx = b.q, b.k_cache, b.v_cache, b.kv_indices
    outs = []
    for n in (1, splits):
        info, meta = lib.plan(b.qo_indptr, b.kv_indptr, b.seq_lens, 16, 8, 2, 128,
                              extend_kv_splits=n)
        assert field(info, "extend_kv_splits") == min(n, 2)
        out = torch.full_like(q, float("nan"))
        lib.run(info, meta, q, kc, vc, idx, out)
        outs.append(out)
    torch.cuda.synchronize()
    assert not torch.equal(outs[0], outs[1])


def test_deterministic_plan_extend_row_is_batch_invariant(lib, extend_kernel):
    # With deterministic=True an extend row's bits do not depend on the rest of the batch: alone (a
    # launch small enough for the KV-split policy: 10 CTAs) and next to a long row (over 500 CTAs,
    # three waves of the H200's 132 SMs: never split) it must give the same bits.
    if extend_kernel != "auto":
        pytest.skip("the policy runs in the default configuration only")
    hq, hkv, d = 8, 2, 128
    b = make_batch([200, 12000], [3000, 100], hq, hkv, d, 16, seed=8)
    q, kc, vc, idx = b.q, b.k_cache, b.v_cache, b.kv_indices
    first = int(b.qo_indptr[1])
    alone = lib.plan(b.qo_indptr[:2], b.kv_indptr[:2], b.seq_lens[:1], 16, hq, hkv, d,
                     deterministic=True)
    both = lib.plan(b.qo_indptr, b.kv_indptr, b.seq_lens, 16, hq, hkv, d, deterministic=True)
    out_alone = torch.full_like(q[:first], float("nan"))
    lib.run(*alone, q[:first], kc, vc, idx, out_alone)
    out_both = torch.full_like(q, float("nan"))
    lib.run(*both, q, kc, vc, idx, out_both)
    torch.cuda.synchronize()
    assert torch.isfinite(out_alone).all()
    assert torch.equal(out_alone, out_both[:first])


@pytest.mark.parametrize("d", [64, 128, 256])
def test_cut_items_give_a_kv_splits_bits(lib, extend_kernel, d):
    # An item cut into 2 parts (extend_item_parts=2, merged through the arena by whichever part
    # finishes last, from part 0's state) covers the same K/V shares as a 2-CTA cluster's ranks and
    # merges them in the same order: the bits must equal the KV split's, fp8 caches included. Two
    # runs of the cut plan must agree too (the counters are back at zero after a launch; a stale
    # counter would leave the items unmerged and their rows NaN).
    if extend_kernel != "auto":
        pytest.skip("one run compares the two plans")
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("cut items and KV splits exist in the sm_90a kernel only")
    for kv_dtype in (None, FP8):
        b = make_batch([333, 50, 7], [4100, 900, 2500], 8, 2, d, 16, kv_dtype=kv_dtype, seed=d)
        q, kc, vc, idx = b.q, b.k_cache, b.v_cache, b.kv_indices
        fp8 = kv_dtype == FP8
        outs = []
        for request in ({"extend_kv_splits": 2}, {"extend_item_parts": 2}, {"extend_item_parts": 2}):
            info, meta = lib.plan(b.qo_indptr, b.kv_indptr, b.seq_lens, 16, 8, 2, d, kv_fp8=fp8, **request)
            if "extend_item_parts" in request:
                assert field(info, "extend_cut_items") == field(info, "num_extend_tiles") * 2  # 8 / pack 4
                assert field(info, "extend_ctas") > 0 and field(info, "extend_kv_splits") == 1
            else:
                assert field(info, "extend_kv_splits") == 2 and field(info, "extend_cut_items") == 0
            out = torch.full_like(q, float("nan"))
            lse = torch.full((q.shape[0], 8), float("nan"), device="cuda")
            lib.run(info, meta, q, kc, vc, idx, out, lse=lse, k_scale=0.37 if fp8 else 1.0,
                    v_scale=0.61 if fp8 else 1.0)
            outs.append((out, lse))
        torch.cuda.synchronize()
        assert torch.isfinite(outs[0][0]).all()
        for out, lse in outs[1:]:
            assert torch.equal(out, outs[0][0]) and torch.equal(lse, outs[0][1])


def test_the_planner_cuts_items_where_its_estimate_gains(lib, extend_kernel):
    # Few long tiles on few SMs (planned for 10): whole items leave the last round mostly idle, so
    # the default policy cuts the costliest items; the result must match the fp64 reference, run
    # after run (the counters reset themselves).
    if extend_kernel != "auto":
        pytest.skip("the policy's own choice")
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("cut items exist in the sm_90a kernel only")
    lib.request = {"num_sms": 10}
    b = make_batch([300], [6000], 8, 2, 128, 16, seed=11)
    info, _ = lib.plan(b.qo_indptr, b.kv_indptr, b.seq_lens, 16, 8, 2, 128)
    assert field(info, "extend_cut_items") > 0 and field(info, "extend_item_parts") > 1
    for seed in (11, 11):
        run_and_check(lib, ext_lens=[300], prefix_lens=[6000], hq=8, hkv=2, d=128, page_size=16, seed=seed)
    lib.request = {}
