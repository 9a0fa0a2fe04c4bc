"""The estimate of an extend launch of one CTA per item (step_cost.h ExtendLaunchEstimate, "rounds")
against greedy list scheduling ("list": each CTA, costliest first, to the SM freed first, as the
hardware dispatches them) and the persistent estimate's snake deal ("snake"), on the launches
measured in benchmarks/RESULTS.md (session 9, 32/8/128, page 16) and case I's fold launch
(session 10); then a refit of the list model's two constants. CPU only (the planner's own tiles):
    PYTHONPATH=python python3 tools/estimate_models.py
With --sweep FILE (tools/sweep_extend_launches.py's output, measured on the GPU), the same over
the sweep's launches of one CTA per item, the persistent estimate (PersistentLaunchEstimate) over
its persistent ones, the refit on the sweep, and the launch each model would pick per composition
(benchmarks/results/extend_launch_sweep.json is the sweep of session 11, H200).
"""

import argparse

import heapq
import json
import statistics

import torch

import mixed_attn  # noqa: F401  (registers torch.ops.mixed_attn)
from mixed_attn.plan_info import field, make_config, unpack_meta
from mixed_attn.testing import batch_indptrs

H200 = dict(device_kind=1, device_arch=90, num_sms=132, device_sm90_extend=1, device_tma_encoder=1)
SPLIT_CTA = 1.0  # step_cost.h kExtendSplitCtaUs
FIT = dict(cta=17.0, key=0.022)  # step_cost.h kExtendCtaUs, kExtendKeyUs
LIST_FIT = dict(cta=15.5, key=0.022)  # the list-schedule patch's refit (tools/pending)
PERSISTENT_ITEM_US, PERSISTENT_START_US = 9.5, 7.5  # step_cost.h kPersistentItemUs, kPersistentStartUs

# (name, new tokens, prefixes, measured us with one CTA per item, measured us with KV split 2)
CASES = [
    ("P", [2048], [0], 106.4, 154.7),
    ("P-4k", [4096], [0], 312.2, 406.6),
    ("P-1k", [1024], [0], 44.6, 68.5),
    ("P-512", [512], [0], 26.4, 40.3),
    ("B", [4096], [4096], 887.4, 910.7),
    ("D", [1024], [16384], 757.9, 618.2),
    ("C2", [256], [8192], 192.9, 110.0),
    ("2x1k", [1024, 1024], [0, 3000], 174.4, 212.2),
    ("fold64", [2048] + [1] * 64, [0] + [4095] * 64, 489.5, 589.0),
]
# Case I's fold launch (2048 new over 64k + 8 decodes at 128k, KV split 2): the step measured
# 6.04 ms (bench_mixed, session 10), 3.8 us of it the step's fixed part.
CASE_I = ([2048] + [1] * 8, [65536] + [131071] * 8, 6040.0 - 3.8)


def tile_keys(ext, pre, **kw):
    """Keys of each tile of a fold plan, in the plan's (costliest-first) order."""
    meta = torch.zeros(1 << 22, dtype=torch.int32)
    qo, kv, sl, *_ = batch_indptrs(ext, pre, 16, tensors=True)
    cfg = make_config("cpu", 16, 32, 8, 128, **H200, mode=1, **kw)
    info = torch.ops.mixed_attn.plan(qo, kv, sl, meta, cfg)
    m = unpack_meta(info, meta)
    tt = field(info, "extend_tile_tokens")
    keys = []
    for row, q0 in m["extend_tiles"].tolist():
        e = int(qo[row + 1] - qo[row])
        keys.append(int(sl[row]) - e + min(q0 + tt, e))
    assert field(info, "extend_kv_splits") == kw["extend_kv_splits"]
    return keys


def cta_costs(keys, splits, cta, key, groups=8):
    fixed = cta + (SPLIT_CTA if splits > 1 else 0.0)
    for k in keys:
        yield groups * splits, fixed + key * (k if splits == 1 else -(-k // splits))


def rounds(keys, splits, cta, key, sms=132):
    """step_cost.h ExtendLaunchEstimate, line for line."""
    pos, last, longest, before, done = 0, 0.0, -1.0, 0.0, 0.0
    for per, t in cta_costs(keys, splits, cta, key):
        left = per
        while left > 0:
            if pos == 0:
                if longest >= 0.0:
                    done = max(done, before + longest)
                    before += last if left == per else t
                longest = t
            take = min(left, sms - pos)
            left -= take
            pos = 0 if pos + take == sms else pos + take
        last = t
    return max(done, before + longest)


def list_schedule(keys, splits, cta, key, sms=132):
    free = [0.0] * sms
    end = 0.0
    for per, t in cta_costs(keys, splits, cta, key):
        for _ in range(per):
            start = heapq.heappop(free)
            heapq.heappush(free, start + t)
            end = max(end, start + t)
    return end


def deal(tiles, ctas):
    """Loads of `ctas` CTAs dealt the (count, cost) tiles in alternating directions, a run of
    consecutive CTAs a tile (step_cost.h PersistentLaunchEstimate, the kernel's Sm90Schedule)."""
    loads, pos, forward = [0.0] * ctas, 0, True
    for per, t in tiles:
        left = per
        while left > 0:
            take = min(left, ctas - pos)
            base = pos if forward else ctas - pos - take
            for j in range(take):
                loads[base + j] += t
            left -= take
            pos += take
            if pos == ctas:
                pos, forward = 0, not forward
    return loads


def snake(keys, splits, cta, key, sms=132):
    return max(deal(cta_costs(keys, splits, cta, key), sms))


def persistent(keys, ctas, key, groups=8, start=PERSISTENT_START_US):
    """step_cost.h PersistentLaunchEstimate: the items dealt to `ctas` CTAs."""
    return start + max(deal(((groups, PERSISTENT_ITEM_US + key * k) for k in keys), ctas))


def refit(launches):
    best = None
    for cta in [x * 0.5 for x in range(16, 41)]:
        for key in [0.0200 + 0.0002 * i for i in range(21)]:
            e = [abs(list_schedule(k, s, cta, key) / us - 1) for _, s, k, us in launches]
            if best is None or statistics.median(e) < best[0]:
                best = (statistics.median(e), max(e), cta, key)
    return best


def report(launches, models):
    errors = {m: [] for m in models}
    for name, s, keys, us in launches:
        for m, fn in models.items():
            errors[m].append(abs(fn(keys, s, **FIT) / us - 1))
    for m, e in errors.items():
        e = sorted(e)
        print(f"{m}: median error {statistics.median(e):.1%}, p90 {e[int(0.9 * (len(e) - 1))]:.1%}, "
              f"max {e[-1]:.1%} over {len(e)} launches")


def main_sweep(path):
    with open(path) as f:
        data = json.load(f)
    assert data["heads"] == [32, 8, 128], "the constants are for 32/8/128"
    recs = [r for r in data["records"] if r["us"] > 0]
    launches = [(r["variant"], r["kv_splits"], r["tile_keys"], r["us"]) for r in recs if r["variant"] != "persistent"]
    report(launches, {"rounds": rounds, "list": list_schedule, "snake": snake})
    e = sorted(abs(persistent(r["tile_keys"], r["ctas"], FIT["key"]) / r["us"] - 1)
               for r in recs if r["variant"] == "persistent")
    if e:
        print(f"persistent: median error {statistics.median(e):.1%}, max {e[-1]:.1%} over {len(e)} launches")
    med, worst, cta, key = refit(launches)
    print(f"list refit: {cta} us a CTA, {key:.4f} us a key: median {med:.1%}, max {worst:.1%}")
    decisions(recs)


PERSISTENT_MARGIN = 0.05  # step_cost.h kPersistentMargin


def decisions(recs):
    """The launch each model would pick for each composition of the sweep (the KV split with the
    lower estimate; unsplit, persistent unless one CTA per item is estimated 5% faster), and what
    the pick costs against the fastest of the three measured launches."""
    comps = {}
    for r in recs:
        comps.setdefault((tuple(r["ext"]), tuple(r["pre"])), {})[r["variant"]] = r
    for label, fn, fit in (("rounds", rounds, FIT), ("list", list_schedule, LIST_FIT)):
        regret, wrong = [], 0
        for v in comps.values():
            if len(v) < 3:
                continue
            est = {s: fn(v[f"split{s}"]["tile_keys"], s, **fit) for s in (1, 2)}
            pick = "split2" if est[2] < est[1] else "split1"
            if pick == "split1":
                p = v["persistent"]
                # kPersistentStartUs is kExtendCtaUs - kPersistentItemUs in step_cost.h.
                pers = persistent(p["tile_keys"], p["ctas"], fit["key"], start=fit["cta"] - PERSISTENT_ITEM_US)
                if not est[1] < (1 - PERSISTENT_MARGIN) * pers:
                    pick = "persistent"
            best = min(x["us"] for x in v.values())
            regret.append(v[pick]["us"] / best - 1)
            wrong += regret[-1] > 0.02
        regret.sort()
        print(f"{label} picks: {wrong} of {len(regret)} compositions more than 2% off the fastest launch; "
              f"mean cost {statistics.mean(regret):.1%}, p90 {regret[int(0.9 * (len(regret) - 1))]:.1%}, "
              f"max {regret[-1]:.1%}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sweep", help="tools/sweep_extend_launches.py output")
    args = ap.parse_args()
    if args.sweep:
        return main_sweep(args.sweep)
    launches = [(name, s, tile_keys(ext, pre, extend_kv_splits=s, extend_persistent=0), us)
                for name, ext, pre, us1, us2 in CASES for s, us in ((1, us1), (2, us2))]
    i_keys = tile_keys(CASE_I[0], CASE_I[1], extend_kv_splits=2, extend_persistent=0)
    models = {"rounds": rounds, "list": list_schedule, "snake": snake}
    print(f"{'launch':16s} {'measured':>9s} " + " ".join(f"{m:>16s}" for m in models))
    errors = {m: [] for m in models}
    for name, s, keys, us in launches:
        cells = []
        for m, fn in models.items():
            v = fn(keys, s, **FIT)
            errors[m].append(abs(v / us - 1))
            cells.append(f"{v:8.1f} ({v / us - 1:+5.1%})")
        print(f"{name + ' split ' + str(s):16s} {us:9.1f} " + " ".join(cells))
    cells = [f"{fn(i_keys, 2, **FIT):8.0f} ({fn(i_keys, 2, **FIT) / CASE_I[2] - 1:+5.1%})" for fn in models.values()]
    print(f"{'I fold split 2':16s} {CASE_I[2]:9.0f} " + " ".join(cells))
    for m, e in errors.items():
        print(f"{m}: median error {statistics.median(e):.1%}, max {max(e):.1%} over {len(e)} launches")
    med, worst, cta, key = refit(launches)
    i_us = list_schedule(i_keys, 2, cta, key)
    print(f"list refit: {cta} us a CTA, {key:.4f} us a key: median {med:.1%}, max {worst:.1%}; "
          f"I fold {i_us:.0f} us against {CASE_I[2]:.0f} measured")


if __name__ == "__main__":
    main()
