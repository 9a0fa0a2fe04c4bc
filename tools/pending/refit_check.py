"""Times the steps whose plans a step-cost candidate moves, on the build in place: each step of
refit_cases.json (tools/plan_sweep.py diff --cases: the sweep's steps whose mode / tile shape / KV
split / persistence / cut items differ between the committed constants and the candidate's)
planned by this build's planner and timed whole (common.Timer, L2 flushed). refit_check.sh runs it
on both builds and compares. The committed refit_cases.json is session 22's candidate's (the item's
fixed part after Q by TMA: benchmarks/RESULTS.md, session 22).
Usage: python3 tools/pending/refit_check.py OUT.json [CASES.json] (default: refit_cases.json)
       python3 tools/pending/refit_check.py --compare BASE.json ALT.json
         (alt / base per step with the plan fields that moved, then the median, min and max)"""

import json
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
from common import Timer  # noqa: E402
from mixed_attn.plan_info import field  # noqa: E402
from mixed_attn.testing import OpExtend, make_batch  # noqa: E402

FIELDS = ("mode", "extend_block_rows", "extend_kv_splits", "extend_ctas", "extend_cut_items", "extend_item_parts",
          "max_splits", "num_partials", "est_split_ns", "est_fold_ns")


def compare(base_path, alt_path):
    base = {r["case"]: r for r in json.load(open(base_path))}
    alt = {r["case"]: r for r in json.load(open(alt_path))}
    ratios = []
    for i in sorted(alt):
        a, b = base[i], alt[i]
        ratios.append(b["ms"] / a["ms"])
        print(f"{i:3d} base {a['ms']:.4f} alt {b['ms']:.4f} alt/base {b['ms'] / a['ms']:.3f}  "
              + " ".join(f"{k}:{a[k]}->{b[k]}" for k in FIELDS[:8] if a[k] != b[k]))
    ratios.sort()
    print(f"alt/base: median {ratios[len(ratios) // 2]:.3f}, min {ratios[0]:.3f}, max {ratios[-1]:.3f}, "
          f"n {len(ratios)}")


def main():
    if sys.argv[1] == "--compare":
        return compare(sys.argv[2], sys.argv[3])
    here = os.path.dirname(os.path.abspath(__file__))
    cases = json.load(open(sys.argv[2] if len(sys.argv) > 2 else os.path.join(here, "refit_cases.json")))
    timer, lib, rows = Timer("cuda"), OpExtend(), []
    for i, c in enumerate(cases):
        fp8 = bool(c.get("kv_fp8"))
        b = make_batch(c["ext"], c["pre"], c["hq"], c["hkv"], c["d"], 16, dtype=torch.bfloat16,
                       kv_dtype=torch.float8_e4m3fn if fp8 else None, device="cuda", seed=i)
        info, meta = lib.plan(b.qo_indptr, b.kv_indptr, b.seq_lens, 16, c["hq"], c["hkv"], c["d"],
                              mode=c.get("mode", 0), deterministic=bool(c.get("deterministic")), kv_fp8=int(fp8))
        out = torch.empty_like(b.q)
        ms = timer.time(lambda: lib.run(info, meta, b.q, b.k_cache, b.v_cache, b.kv_indices, out))["ms"]
        rows.append(dict(case=i, ms=ms, **{f: field(info, f) for f in FIELDS}))
        print(i, f"{ms:.4f} ms", {f: rows[-1][f] for f in FIELDS[:8]}, flush=True)
    json.dump(rows, open(sys.argv[1], "w"), indent=1)


if __name__ == "__main__":
    main()
