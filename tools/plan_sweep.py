"""The planner over a fixed sweep of random steps, on the CPU (no GPU needed): what a planner or
step-cost change does to the plans.

    python tools/plan_sweep.py dump OUT.json [--steps 500] [--seed 7]
        plans each step with the build in place for an H200's description and writes every
        plan_info field but the estimates (est_split_ns / est_fold_ns), with the step;
    python tools/plan_sweep.py diff BEFORE.json AFTER.json [--cases CASES.json]
        counts the fields that differ, lists the launch decisions that moved, and writes the steps
        whose decisions moved to CASES.json (tools/pending/refit_check.py times those).

A refactor of the planner must leave `diff` empty; a cost change says here which plans it moves.
Steps: 1-40 rows, each a decode (one token over up to 32k), a short extend (2-600 new tokens over
up to 8k) or a long one (600-8192 over up to 16k); head dims 64/128/256, 1/2/8 KV heads of
groups 1/4/8, mode auto in 30%, deterministic 10%, fp8 caches 10%; page size 16."""

import argparse
import collections
import json
import os
import random
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
from mixed_attn.plan_info import FIELDS, make_config  # noqa: E402
from mixed_attn.testing import batch_indptrs  # noqa: E402

H200 = dict(device_kind=1, device_arch=90, num_sms=132, device_sm90_extend=1, device_tma_encoder=1)
ESTIMATES = {"est_split_ns", "est_fold_ns"}
DECISIONS = ("mode", "extend_block_rows", "extend_kv_splits", "extend_ctas", "extend_cut_items",
             "extend_item_parts", "decode_kernel", "extend_leave_sms")


def steps(n, seed):
    rng = random.Random(seed)
    for _ in range(n):
        ext, pre = [], []
        for _ in range(rng.randint(1, 40)):
            r = rng.random()
            if r < 0.5:
                ext.append(1), pre.append(rng.randint(1, 32768))
            elif r < 0.8:
                ext.append(rng.randint(2, 600)), pre.append(rng.randint(0, 8192))
            else:
                ext.append(rng.randint(600, 8192)), pre.append(rng.randint(0, 16384))
        d = rng.choice([64, 128, 128, 256])
        hkv = rng.choice([1, 2, 8])
        hq = hkv * rng.choice([1, 4, 8])
        kw = {}
        if rng.random() < 0.3:
            kw["mode"] = 2
        if rng.random() < 0.1:
            kw["deterministic"] = 1
        if rng.random() < 0.1:
            kw["kv_fp8"] = 1
        yield dict(ext=ext, pre=pre, d=d, hq=hq, hkv=hkv, **kw)


def dump(path, n, seed):
    out = []
    for case in steps(n, seed):
        kw = {k: v for k, v in case.items() if k not in ("ext", "pre", "d", "hq", "hkv")}
        meta = torch.zeros(1 << 20, dtype=torch.int32)
        try:
            info = torch.ops.mixed_attn.plan(*batch_indptrs(case["ext"], case["pre"], 16, tensors=True), meta,
                                             make_config("cpu", 16, case["hq"], case["hkv"], case["d"], **H200, **kw))
            rec = {f: int(info[i]) for i, f in enumerate(FIELDS) if f not in ESTIMATES}
        except RuntimeError as e:
            rec = {"error": str(e)}
        rec["case"] = case
        out.append(rec)
    with open(path, "w") as f:
        json.dump(out, f)
    print(f"{len(out)} steps planned into {path}")


def diff(before, after, cases_path):
    a, b = json.load(open(before)), json.load(open(after))
    assert [x["case"] for x in a] == [y["case"] for y in b], "the two sweeps are not of the same steps"
    fields, moves, moved = collections.Counter(), collections.Counter(), []
    for x, y in zip(a, b):
        changed = [k for k in x if k != "case" and x.get(k) != y.get(k)]
        fields.update(changed)
        decision = tuple((k, x.get(k), y.get(k)) for k in DECISIONS if x.get(k) != y.get(k))
        if decision:
            moved.append(x["case"])
            moves[tuple(m for m in decision if m[0] not in ("extend_ctas", "extend_cut_items"))] += 1
    print(f"{sum(1 for x, y in zip(a, b) if x != y)} of {len(a)} plans differ; fields: {dict(fields.most_common())}")
    print(f"{len(moved)} steps change a launch decision:")
    for m, count in moves.most_common():
        print(f"  {count:3d}  " + (", ".join(f"{k} {u} -> {v}" for k, u, v in m) or "cut items / persistence only"))
    if cases_path:
        with open(cases_path, "w") as f:
            json.dump(moved, f)
        print(f"wrote {cases_path}")


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump")
    d.add_argument("out")
    d.add_argument("--steps", type=int, default=500)
    d.add_argument("--seed", type=int, default=7)
    f = sub.add_parser("diff")
    f.add_argument("before")
    f.add_argument("after")
    f.add_argument("--cases", default=None)
    args = ap.parse_args()
    if args.cmd == "dump":
        dump(args.out, args.steps, args.seed)
    else:
        diff(args.before, args.after, args.cases)


if __name__ == "__main__":
    main()
