"""Mode "auto": the planner plans each step split or fold by its step-cost estimate
(csrc/include/mixed_attn/step_cost.h, fitted on the H200: benchmarks/RESULTS.md, session 8),
records the choice and both estimates, and computes what the chosen mode computes. CPU only."""

import pytest
import torch

from helpers import assert_close_to_reference, run_op, run_reference
from mixed_attn.plan_info import MODE_AUTO, MODE_FOLD, MODE_SPLIT, field
from mixed_attn.testing import make_batch
from test_launch_policy import H200, plan


def _mode(info):
    return field(info, "mode"), field(info, "mode_requested"), field(info, "est_split_ns"), field(info, "est_fold_ns")


# Steps whose faster mode was measured on the H200 (lab sweep, session 8): a prefill chunk with a
# few short decode rows (fold 117 us vs split 177 us a layer at the old KV-split rule), and
# steps whose decode half is large or long (split 2-5x faster).
# Case G (head dim 256, session 9: split 0.650 ms, fold 0.757): there an extend CTA's key costs
# its K/V copy, not its math (step_cost.h, extend_item_cost); without that the estimate put fold
# first (601 us against split's 635).
@pytest.mark.parametrize("ext,pre,want,heads", [
    ([2048] + [1] * 8, [0] + [255] * 8, MODE_FOLD, (32, 8, 128)),
    ([512] + [1] * 128, [0] + [4095] * 128, MODE_SPLIT, (32, 8, 128)),  # case A
    ([4096] + [1] * 64, [4096] + [8191] * 64, MODE_SPLIT, (32, 8, 128)),  # case B
    ([1], [16383], MODE_SPLIT, (32, 8, 128)),  # one long decode row: fold leaves it to 1-2 CTAs per head group
    ([1] * 32, [255] * 32, MODE_SPLIT, (32, 8, 128)),
    ([2048] + [1] * 64, [0] + [4095] * 64, MODE_SPLIT, (16, 8, 256)),  # case G
])
def test_auto_picks_the_measured_faster_mode(ext, pre, want, heads):
    hq, hkv, d = heads
    mode, requested, est_split, est_fold = _mode(plan(H200, ext, pre, hq=hq, hkv=hkv, d=d, mode=MODE_AUTO))
    assert requested == MODE_AUTO and mode == want
    assert est_split > 0 and est_fold > 0 and (est_fold < est_split) == (want == MODE_FOLD)


def test_auto_estimates_the_fold_launch_with_its_cut_items():
    # The fold plan cuts its launch's costliest items by the same rule as the split plan (plan.cc,
    # step 3c), so mode auto's fold estimate is that of the cut launch: below the whole-item one
    # on case B (a sixth item on 28 of 132 CTAs), equal where nothing is cut.
    ext, pre = [4096] + [1] * 64, [4096] + [8191] * 64
    cut = _mode(plan(H200, ext, pre, mode=MODE_AUTO))[3]
    whole = _mode(plan(H200, ext, pre, mode=MODE_AUTO, extend_item_parts=1))[3]
    assert cut < whole * 0.97
    assert field(plan(H200, ext, pre, mode=MODE_FOLD), "extend_cut_items") > 0
    ext, pre = [2048] + [1] * 8, [0] + [255] * 8  # short tiles: balanced already
    assert _mode(plan(H200, ext, pre, mode=MODE_AUTO))[3] == _mode(plan(H200, ext, pre, mode=MODE_AUTO,
                                                                       extend_item_parts=1))[3]


def test_auto_plan_is_the_plan_of_the_chosen_mode():
    # The fold plan an auto step makes is the fold mode's plan, field for field (but the three
    # fields that record the request and the estimates).
    ext, pre = [2048] + [1] * 8, [0] + [255] * 8
    a, f = plan(H200, ext, pre, mode=MODE_AUTO), plan(H200, ext, pre, mode=MODE_FOLD)
    skip = {"mode_requested", "est_split_ns", "est_fold_ns"}
    from mixed_attn.plan_info import FIELDS
    assert [x for n, x in zip(FIELDS, a) if n not in skip] == [x for n, x in zip(FIELDS, f) if n not in skip]
    ext, pre = [512] + [1] * 128, [0] + [4095] * 128
    a, s = plan(H200, ext, pre, mode=MODE_AUTO), plan(H200, ext, pre, mode=MODE_SPLIT)
    assert [x for n, x in zip(FIELDS, a) if n not in skip] == [x for n, x in zip(FIELDS, s) if n not in skip]


def test_auto_without_decode_rows_or_with_fixed_geometry_is_split():
    # No decode rows: split and fold are one plan; deterministic and graph-safe plans never
    # choose (a decode row's bits and a captured geometry must not depend on the batch).
    ext, pre = [2048] + [1] * 8, [0] + [255] * 8
    assert _mode(plan(H200, [300, 70], [0, 9], mode=MODE_AUTO)) == (MODE_SPLIT, MODE_AUTO, 0, 0)
    assert _mode(plan(H200, ext, pre, mode=MODE_AUTO, deterministic=1)) == (MODE_SPLIT, MODE_AUTO, 0, 0)
    graph = dict(graph_safe=1, graph_max_rows=16, graph_max_tokens=4096, graph_max_extend_tokens=4096)
    assert _mode(plan(H200, ext, pre, mode=MODE_AUTO, **graph)) == (MODE_SPLIT, MODE_AUTO, 0, 0)
    assert _mode(plan(H200, ext, pre, mode=MODE_SPLIT)) == (MODE_SPLIT, MODE_SPLIT, 0, 0)


@pytest.mark.parametrize("ext,pre", [
    ([300, 1, 1, 2], [0, 40, 17, 90]),  # a large extend half, a few short decode rows (and a verify row)
    ([1] * 128 + [20], [2000] * 128 + [5]),  # long decode rows
])
def test_auto_computes_what_its_mode_computes(ext, pre):
    b = make_batch(ext, pre, num_qo_heads=8, num_kv_heads=2, head_dim=64, page_size=16, seed=sum(ext))
    out, lse, kc, vc, w = run_op(b, mode="auto", num_sms=132)
    ro, rl, rk, rv = run_reference(b)
    assert_close_to_reference(out, lse, ro, rl, torch.bfloat16)
    assert torch.equal(kc, rk) and torch.equal(vc, rv)
    chosen = "split" if field(w.plan_info, "mode") == MODE_SPLIT else "fold"
    assert w.last_path == chosen and w.plan_launch["mode_requested"] == "auto"
    # The same bits as a wrapper of the chosen mode.
    o2, l2, *_ = run_op(b, mode=chosen, num_sms=132)
    assert torch.equal(out, o2) and torch.equal(lse, l2)


def test_auto_takes_both_modes_on_the_cpu_plan():
    # The two steps above choose differently on a CPU wrapper too (the tests above cover both).
    modes = set()
    for ext, pre in (([300, 1, 1, 2], [0, 40, 17, 90]), ([1] * 128 + [20], [2000] * 128 + [5])):
        b = make_batch(ext, pre, num_qo_heads=8, num_kv_heads=2, head_dim=64, page_size=16, seed=1)
        modes.add(run_op(b, mode="auto", num_sms=132)[4].last_path)
    assert modes == {"split", "fold"}


def test_auto_mode_is_accepted_and_named():
    with pytest.raises(ValueError, match="'split', 'fold' or 'auto'"):
        run_op(make_batch([1], [3], 4, 1, 64, 16), mode="fast")


@pytest.mark.parametrize("heads", [(32, 8, 128), (16, 8, 256)])
def test_an_fp8_cache_costs_more_per_key_not_less(heads):
    # The sm_90a producer copies an fp8 tile's bytes and widens them into the 16-bit ring, so an
    # fp8 key costs about 1.2x a 16-bit one at every head dim (benchmarks/RESULTS.md, session 16):
    # the estimate of an extend-heavy step must rise with an fp8 cache, never fall (it fell at head
    # dim 256 when the copy term counted one byte an element).
    hq, hkv, d = heads
    ext, pre = [4096] + [1] * 8, [4096] + [4095] * 8
    est = {}
    for fp8 in (0, 1):
        info = plan(H200, ext, pre, hq=hq, hkv=hkv, d=d, mode=MODE_AUTO, kv_fp8=fp8)
        est[fp8] = (field(info, "est_split_ns"), field(info, "est_fold_ns"))
    for split_or_fold in (0, 1):
        assert est[1][split_or_fold] > 1.1 * est[0][split_or_fold], est


# Decode halves measured on the H200 (bench_mixed's ma_dec and bench_decode, benchmarks/RESULTS.md
# sessions 11 and 17; us): the split estimate of a decode-only step must be within 6% of each.
# The session-8 wave term put them 9-13% high (B 549, D 1076, H 549, I 1076).
@pytest.mark.parametrize("rows,context,heads,measured_us", [
    (64, 8192, (32, 8, 128), 491),     # B's decode half
    (32, 32768, (32, 8, 128), 956),    # D's
    (64, 4096, (16, 8, 256), 500),     # G's (head dim 256, the narrow kernel)
    (128, 4096, (32, 8, 128), 512),    # H (504-521)
    (2, 131072, (32, 8, 128), 271),    # L (267-275)
    (8, 131072, (32, 8, 128), 1001),   # I's (996-1007)
])
def test_the_decode_half_estimate_matches_measured_halves(rows, context, heads, measured_us):
    hq, hkv, d = heads
    info = plan(H200, [1] * rows, [context - 1] * rows, hq=hq, hkv=hkv, d=d, mode=MODE_AUTO)
    est_us = field(info, "est_split_ns") / 1000.0
    assert abs(est_us / measured_us - 1.0) < 0.06, (est_us, measured_us)
