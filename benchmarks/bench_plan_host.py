"""Host cost of MixedAttention.plan(), per step, and where it goes.

    python3 benchmarks/bench_plan_host.py [--device cpu|cuda] [--calls 20000] [--breakdown]
                                          [--kinds normal,graph] [--markdown F]

Method. 32/8 heads, head dim 128, page 16 (bench_graph.py's geometry). Steps: 1, 16 and 256
decode rows at 1000 keys, and a mixed step of 8 extend rows (256 new tokens over a 1024-token
prefix) + 248 decode rows at 1000 keys. Host int32 tensors are built once and passed to every
call (what an engine's persistent host buffers do). `normal` is a wrapper with max_batch=256,
max_tokens=4096; `graph` is a graph bucket of the step's own rows and tokens (decode-only steps:
max_extend_tokens=0). The time is the lowest of three medians of --calls single calls each
(time.perf_counter_ns around each call, after 2000 warm-up calls; the process's first
measurement is made twice and the first one dropped). On a CUDA device plan()
includes the pinned H2D copy and the event record of plan_upload; on the CPU the "upload" is a
memcpy into the wrapper's device-side (host) metadata buffer.

`wrapper, op call` is the same wrapper with its _fastplan call turned off (plan() then makes the
regular torch.ops call, as builds without mixed_attn._fastplan do).

--breakdown adds the parts, each timed the same way: the bare _fastplan.plan_upload call, the
three _host_int32 calls, the bare plan_upload op (pre-bound OpOverload), the bare plan op with
the config as a Python list, the cheapest op call of the library (plan_meta_capacity: three ints
in, one int out: the dispatcher floor) and an info[...] lookup.
"""

import argparse
import itertools
import os
import statistics
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# This checkout's package, after any PYTHONPATH entries (so another build can be timed with
# PYTHONPATH=that/python), before an installed one.
sys.path.insert(1 + len([p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]),
                os.path.join(ROOT, "python"))

import mixed_attn  # noqa: E402
from mixed_attn import wrapper as _wrapper  # noqa: E402

HQ, HKV, D, PAGE = 32, 8, 128, 16


def step(decode_rows, extend_rows=0, extend_len=256, prefix=1024, ctx=1000):
    """Host int32 qo_indptr, kv_indptr (pages), seq_lens: extend rows first, then decode rows.
    (Built here, not by mixed_attn.testing.batch_indptrs: this script also times other builds'
    packages through PYTHONPATH, older ones included.)"""
    ext = [extend_len] * extend_rows + [1] * decode_rows
    seq = [prefix + extend_len] * extend_rows + [ctx] * decode_rows
    qo, kv = [0], [0]
    for e, s in zip(ext, seq):
        qo.append(qo[-1] + e)
        kv.append(kv[-1] + (s + PAGE - 1) // PAGE)
    t = lambda x: torch.tensor(x, dtype=torch.int32)  # noqa: E731
    return t(qo), t(kv), t(seq)


STEPS = {
    "1 decode": dict(decode_rows=1),
    "16 decode": dict(decode_rows=16),
    "256 decode": dict(decode_rows=256),
    "8 extend + 248 decode": dict(decode_rows=248, extend_rows=8),
}


def timed_ns(fn, calls, warmup=None, repeats=3):
    """The lowest of `repeats` medians of `calls` single calls, in µs (the lowest: a shared
    host's other load only ever adds time)."""
    for _ in range(min(2000, calls) if warmup is None else warmup):
        fn()
    clock = time.perf_counter_ns
    ts = [0] * calls
    best = None
    for _ in range(repeats):
        for i in range(calls):
            t0 = clock()
            fn()
            ts[i] = clock() - t0
        m = statistics.median(ts) / 1e3
        best = m if best is None else min(best, m)
    return best


def make_wrapper(device, kind, qo):
    rows, tokens = qo.numel() - 1, int(qo[-1])
    if kind == "normal":
        return mixed_attn.MixedAttention(HQ, HKV, D, PAGE, device=device, q_dtype=torch.bfloat16,
                                         max_batch=256, max_tokens=4096)
    decode_only = tokens == rows
    return mixed_attn.MixedAttention(HQ, HKV, D, PAGE, device=device, q_dtype=torch.bfloat16,
                                     max_batch=rows, max_tokens=tokens, cuda_graph=True,
                                     **({"max_extend_tokens": 0} if decode_only else {}))


def measure(device, kind, name, calls, breakdown):
    qo, kv, sl = step(**STEPS[name])
    w = make_wrapper(device, kind, qo)
    sync = torch.cuda.synchronize if torch.device(device).type == "cuda" else (lambda: None)
    r = {"wrapper": timed_ns(lambda: w.plan(qo, kv, sl), calls)}
    sync()
    fast = getattr(w, "_fast_plan", None)
    if fast is not None:  # the same wrapper with the regular op call (builds without _fastplan)
        w._fast_plan = None
        r["wrapper, op call"] = timed_ns(lambda: w.plan(qo, kv, sl), calls)
        w._fast_plan = fast
        sync()
    if breakdown:
        if fast is not None:
            # The two host buffers in turn, as plan() uses them (on a GPU, reusing one would wait
            # for its last copy every call).
            mh = itertools.cycle(w._meta_host).__next__
            md, ct, rows = w.plan_meta, w._config_t, w._fast_rows
            r["_fastplan call"] = timed_ns(lambda: fast(qo, kv, sl, mh(), md, ct, rows), calls)
            sync()
        h = _wrapper._host_int32
        r["_host_int32 x3"] = timed_ns(lambda: (h(qo, "qo_indptr"), h(kv, "kv_indptr"), h(sl, "seq_lens")), calls)
        op, md, ct = w._plan_upload, w.plan_meta, w._config_t
        mh = itertools.cycle(w._meta_host).__next__
        r["plan_upload op"] = timed_ns(lambda: op(qo, kv, sl, mh(), md, ct), calls)
        sync()
        cfg, plan, host = list(w._config), torch.ops.mixed_attn.plan.default, w._meta_host[0]
        r["plan op (list config)"] = timed_ns(lambda: plan(qo, kv, sl, host, cfg), calls)
        cap = torch.ops.mixed_attn.plan_meta_capacity.default
        r["dispatcher floor"] = timed_ns(lambda: cap(1, 1, 1), calls)
        info = w.plan(qo, kv, sl)
        i = mixed_attn.plan_info.INDEX["num_partials"]
        r["info[i]"] = timed_ns(lambda: info[i], calls)
    return r


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--kinds", default="normal,graph")
    ap.add_argument("--breakdown", action="store_true")
    ap.add_argument("--markdown", default=None)
    args = ap.parse_args(argv)
    dev = torch.device(args.device)
    print(f"device: {torch.cuda.get_device_name(dev) if dev.type == 'cuda' else 'cpu'}  "
          f"torch {torch.__version__}  calls per median: {args.calls}")
    cols = None
    lines = []
    # A throwaway first measurement: the first one of a process reads high on a shared host.
    measure(args.device, args.kinds.split(",")[0], next(iter(STEPS)), min(args.calls, 5000), False)
    for kind in args.kinds.split(","):
        for name in STEPS:
            r = measure(args.device, kind, name, args.calls, args.breakdown)
            if cols is None:
                cols = list(r)
                lines += ["| wrapper | step | " + " | ".join(f"{c} µs" for c in cols) + " |",
                          "|---|---|" + "---:|" * len(cols)]
                print("\n".join(lines))
            line = f"| {kind} | {name} | " + " | ".join(f"{r[c]:.2f}" for c in cols) + " |"
            print(line, flush=True)
            lines.append(line)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
