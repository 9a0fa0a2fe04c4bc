"""Issue 14: when do the two halves of a split step run, launched on two streams (extend first)?
Events on each stream: extend start/end, decode start/end, relative to a common start; medians
of 30 reps (after 10 warm-up ones), for the policy's extend launch and one CTA per item. A decode
that ends before the extend does ran beside extend CTAs; how much of it did is its time alone
against what it runs after the extend ends (benchmarks/RESULTS.md, session 12).

Usage on the GPU machine (repository root, a build in place; carry .peers for nothing: no peer
rows): python3 tools/trace_two_streams.py B,E,D
The lab co-residency build is tools/pending/coresident_narrow.sh."""
import statistics
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "python"))
import bench_mixed as BM  # noqa: E402
import common as C  # noqa: E402

cases = sys.argv[1].split(",") if len(sys.argv) > 1 else ["B"]
args = BM.parse_args(["--cases", ",".join(cases), "--rows", "ma_split"])
dev = torch.device("cuda")
ctx = BM.Ctx(args, dev, ["ma_split"])
pool = {c.name: c for c in C.ALL_CASES}
for name in cases:
    step = C.make_step(pool[name], dev, torch.bfloat16, page_size=16, seed=0)
    for ext_kw in ({}, dict(extend_persistent=False)):
        run_ext, run_dec, _ = BM._halves(ctx, step, ext_kw, {})
        lo, hi = torch.cuda.Stream(dev), torch.cuda.Stream(dev, priority=-1)
        res = {k: [] for k in ("ext_end", "dec_start", "dec_end", "total", "ext_alone", "dec_alone")}
        for rep in range(40):
            ev = {k: torch.cuda.Event(enable_timing=True) for k in ("t0", "e1", "d0", "d1", "t1", "a0", "a1", "b1")}
            cur = torch.cuda.current_stream()
            torch.cuda.synchronize()
            ev["t0"].record(cur)
            lo.wait_stream(cur)
            hi.wait_stream(cur)
            with torch.cuda.stream(lo):
                run_ext()
                ev["e1"].record(lo)
            with torch.cuda.stream(hi):
                ev["d0"].record(hi)
                run_dec()
                ev["d1"].record(hi)
            cur.wait_stream(lo)
            cur.wait_stream(hi)
            ev["t1"].record(cur)
            ev["a0"].record(cur)
            run_ext()
            ev["a1"].record(cur)
            run_dec()
            ev["b1"].record(cur)
            torch.cuda.synchronize()
            if rep < 10:
                continue
            res["ext_end"].append(ev["t0"].elapsed_time(ev["e1"]))
            res["dec_start"].append(ev["t0"].elapsed_time(ev["d0"]))
            res["dec_end"].append(ev["t0"].elapsed_time(ev["d1"]))
            res["total"].append(ev["t0"].elapsed_time(ev["t1"]))
            res["ext_alone"].append(ev["a0"].elapsed_time(ev["a1"]))
            res["dec_alone"].append(ev["a1"].elapsed_time(ev["b1"]))
        cols = " ".join(f"{k}={statistics.median(v):.3f}" for k, v in res.items())
        print(name, ext_kw or "default", cols, flush=True)
