"""Sweep of sm_90a extend launches for fitting the planner's launch estimates (step_cost.h): random
step compositions at 32/8/128, page 16, each planned in fold mode by the real planner and timed as
one CTA per item (KV split 1 and 2) and as the persistent launch (split 1). Writes one JSON record
per launch: the composition, the variant, the plan's tile keys (costliest first, as the estimates
see them) and the median time. tools/estimate_models.py --sweep FILE compares the estimate models
on it and refits them.
    PYTHONPATH=python python3 tools/sweep_extend_launches.py --n 120 --json sweep.json  (GPU, ~2 min)
    PYTHONPATH=python python3 tools/sweep_extend_launches.py --n 8 --dry-run --json x.json  (CPU: plans)
(any importable mixed_attn: the source tree's with PYTHONPATH=python, or an installed one).
"""

import argparse
import json
import random

import torch

HQ, HKV, D, PAGE = 32, 8, 128, 16
VARIANTS = [("split1", dict(extend_kv_splits=1, extend_persistent=0)),
            ("split2", dict(extend_kv_splits=2, extend_persistent=0)),
            ("persistent", dict(extend_kv_splits=1, extend_persistent=1))]
MAX_KEYS = 1 << 20  # K/V of a composition, summed over rows (4 KB a key at 32/8/128 bf16)


def compositions(n, seed):
    """(new tokens, prefixes) of n random steps: prefill chunks over short and long prefixes, alone
    or with decode rows folded in (1 new token over 512-128k keys), and ragged small extends."""
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        kind = rng.choice(["prefill", "prefill", "fold", "small"])
        ext, pre = [], []
        if kind in ("prefill", "fold"):
            for _ in range(rng.choice([1, 1, 2, 4])):
                ext.append(rng.choice([256, 512, 1024, 2048, 4096, rng.randint(32, 4096)]))
                pre.append(0 if rng.random() < 0.3 else rng.randint(0, 32768))
        if kind == "fold":
            k = rng.choice([4, 8, 16, 64, 128, 256])
            long_rows = rng.random() < 0.3
            for _ in range(k):
                ext.append(1)
                pre.append(rng.randint(65536, 131071) if long_rows else rng.randint(512, 16384))
        if kind == "small":
            for _ in range(rng.choice([8, 32, 64])):
                ext.append(rng.randint(2, 64))
                pre.append(rng.randint(0, 8192))
        if sum(e + p for e, p in zip(ext, pre)) <= MAX_KEYS:
            out.append((ext, pre))
    return out


def tile_keys(info, meta):
    from mixed_attn.plan_info import field, unpack_meta

    m = unpack_meta(info, meta.cpu())
    qo, sl = m["qo_indptr"], m["seq_lens"]
    tt = field(info, "extend_tile_tokens")
    keys = []
    for row, q0 in m["extend_tiles"].tolist():
        e = int(qo[row + 1] - qo[row])
        keys.append(int(sl[row]) - e + min(q0 + tt, e))
    return keys


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=120, help="compositions")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", required=True)
    ap.add_argument("--dry-run", action="store_true", help="plan only (CPU description of an H200), no timing")
    args = ap.parse_args()
    import mixed_attn  # noqa: F401
    from mixed_attn.plan_info import field, make_config
    from mixed_attn.testing import OpExtend, batch_indptrs, make_batch

    h200 = dict(device_kind=1, device_arch=90, num_sms=132, device_sm90_extend=1, device_tma_encoder=1)
    lib = None if args.dry_run else OpExtend()
    if lib is not None:
        import triton.testing
    records = []
    for ci, (ext, pre) in enumerate(compositions(args.n, args.seed)):
        b = None
        if lib is not None:
            b = make_batch(ext, pre, HQ, HKV, D, PAGE, dtype=torch.bfloat16, device="cuda", seed=ci, spare_pages=4)
            out = torch.empty_like(b.q)
        for name, request in VARIANTS:
            if lib is None:
                meta = torch.zeros(1 << 22, dtype=torch.int32)
                qo, kv, sl, *_ = batch_indptrs(ext, pre, PAGE, tensors=True)
                info = torch.ops.mixed_attn.plan(qo, kv, sl, meta, make_config("cpu", PAGE, HQ, HKV, D, **h200,
                                                                              mode=1, **request))
                us = 0.0
            else:
                info, meta = lib.plan(b.qo_indptr, b.kv_indptr, b.seq_lens, PAGE, HQ, HKV, D, **request)
                fn = lambda: lib.run(info, meta, b.q, b.k_cache, b.v_cache, b.kv_indices, out)  # noqa: E731
                fn()
                torch.cuda.synchronize()
                us = 1e3 * triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")
            records.append(dict(ext=ext, pre=pre, variant=name, kv_splits=field(info, "extend_kv_splits"),
                                ctas=field(info, "extend_ctas"), tile_keys=tile_keys(info, meta), us=us))
        print(f"{ci:4d} rows {len(ext):3d} new {sum(ext):6d} " +
              " ".join(f"{r['variant']} {r['us']:8.1f}" for r in records[-len(VARIANTS):]), flush=True)
        b = out = None  # frees the composition's cache before the next
    with open(args.json, "w") as f:
        json.dump(dict(heads=[HQ, HKV, D], page_size=PAGE, records=records), f)
    print(f"wrote {len(records)} launches to {args.json}")


if __name__ == "__main__":
    main()
