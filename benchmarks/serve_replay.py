"""Continuous-batching replay with chunked prefill, driving the real mixed_attn op.

    PYTHONPATH=python python benchmarks/serve_replay.py [--quick] [--markdown PATH] [--json PATH]

Requests arrive on a trace (burst: all at t=0, the saturation case; poisson: exponential gaps at
a fraction of the measured capacity; trickle: evenly spaced at a low rate); prompt and output
lengths are drawn from clipped log-normal distributions (seeded: every dispatch mode replays the
very same requests). A scheduler in the style of sglang/vLLM chunked prefill forms each step:

  * every running request decodes one token (decode rows, placed last: sglang's order);
  * what is left of the step's token budget goes to prompt chunks, first to requests already
    prefilling, then to waiting requests in arrival order (extend rows, placed first);
  * a request is admitted only when the page allocator can reserve its whole KV footprint
    (prompt + output) and fewer than --max-running requests are in flight, so nothing is ever
    preempted; pages come from a shuffled free list, so every request's pages are scattered.

Each step plans once (wrapper.plan) and runs the op through N layers (attention only:
synthetic random q/k/v activations, KV save of the step's new tokens into a real paged cache
that the layers share: the pool is far larger than the L2, so each layer's traffic is what a
separate pool would cost), then synchronises, as a server does before sampling. The step's wall
time (plan + kv_indices upload + N layers + sync) advances a virtual clock; scheduler
bookkeeping is excluded, and an idle engine jumps to the next arrival. A request's first token
is produced by the step that finishes its prompt; its later tokens by its decode steps.

Mode "split2s" is split with the two halves on two streams: each step's extend rows and decode
rows planned as two batches on two wrappers, each layer launching the extend batch on one stream
and the decode batch on a high-priority one, joined before the next layer (a model's next GEMM
needs both), so the decode launch can take the SMs the extend launch's last wave leaves idle
(issue 14's cheapest candidate; on the CPU the two run one after the other).
Mode "auto" is the wrapper's mode="auto": each step planned split or fold by the planner's
step-cost estimate (the replay tallies which one it chose per step kind).
Mode "best" runs every step both ways (split and fold, alternating which goes first) and charges
the faster: the upper bound of a per-step choice between the two, and which one each kind of step
picks (the second run of a step sees a warmer L2, which flatters whichever goes second; the
alternation spreads that over both).

Reported per trace and dispatch mode (split vs fold): served (generated) tokens/s, all tokens/s
(prompt + generated), TTFT p50/p95, inter-token latency p50/p95, steps, mean step time, and the
share of steps that mix prefill and decode rows. Attention only: a real model adds its GEMMs to
every step, so end-to-end gains are smaller than these. For scale: sglang's split-dispatch
change reported +25% served tokens at saturation and -35% TTFT p95 on an MI325X (whole model).
Without a GPU it replays a tiny model through the CPU implementation and says so plainly.
"""

import argparse
import collections
import dataclasses
import json
import math
import os
import random
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

SGLANG_NOTE = ("for scale: sglang's split-dispatch change reported +25% served tokens at "
               "saturation and -35% TTFT p95 on an MI325X (whole model, not re-measured here)")


@dataclasses.dataclass
class Request:
    rid: int
    arrival: float
    prompt_len: int
    output_len: int
    prefilled: int = 0
    generated: int = 0
    pages: torch.Tensor = None
    admitted: float = None  # clock when the scheduler reserved its pages (first prompt chunk)
    first_token: float = None
    last_token: float = None
    finish: float = None
    itl: list = dataclasses.field(default_factory=list)

    @property
    def seq_len(self):
        return self.prefilled + max(0, self.generated)


# ---------------------------------------------------------------------------------------------
# Traces
# ---------------------------------------------------------------------------------------------

def draw_lengths(n, cfg, seed):
    rnd = random.Random(seed)

    def lognormal(median, sigma, lo, hi):
        return int(min(hi, max(lo, round(median * math.exp(rnd.gauss(0.0, sigma))))))

    return [(lognormal(cfg.prompt_median, cfg.prompt_sigma, cfg.prompt_min, cfg.prompt_max),
             lognormal(cfg.output_median, cfg.output_sigma, cfg.output_min, cfg.output_max))
            for _ in range(n)]


def make_trace(kind, n, rate, cfg, seed):
    """[(arrival_s, prompt_len, output_len)] for one trace kind."""
    lens = draw_lengths(n, cfg, seed)
    rnd = random.Random(seed + 1)
    if kind == "burst":
        arrivals = [0.0] * n
    elif kind == "poisson":
        t, arrivals = 0.0, []
        for _ in range(n):
            arrivals.append(t)
            t += rnd.expovariate(rate)
    elif kind == "trickle":
        arrivals = [i / rate for i in range(n)]
    else:
        raise ValueError(f"unknown trace {kind!r}")
    return [(a, p, o) for a, (p, o) in zip(arrivals, lens)]


# ---------------------------------------------------------------------------------------------
# Engine: the real op over a real paged cache
# ---------------------------------------------------------------------------------------------

class Engine:
    def __init__(self, ma, cfg, mode, device, triton_forward=None):
        self.cfg, self.mode, self.device = cfg, mode, device
        self.triton_forward = triton_forward  # None: the op; else the Triton oracle
        Hq, Hkv, D, P = cfg.num_qo_heads, cfg.num_kv_heads, cfg.head_dim, cfg.page_size
        dt = cfg.dtype
        self.max_tokens = cfg.token_budget + cfg.max_running
        # "best": one wrapper per dispatch mode, each step timed on both (step()); "split2s": one
        # split wrapper per half, the halves on two streams (_run_two_streams()).
        # split_leave0: a split wrapper with no SMs left to the decode (the halves one after the
        # other: the planner before session 27), against split's overlapped steps.
        kinds = {"best": {"split": "split", "fold": "fold"},
                 "split2s": {"extend": "split", "decode": "split"},
                 "split_leave0": {"split_leave0": "split"}}.get(mode, {mode: mode})
        extra = dict(extend_leave_sms=0) if mode == "split_leave0" else {}
        if mode == "split2s" and triton_forward is not None:
            raise C.NotAvailable("split2s drives the op, not the Triton oracle")
        self.wrappers = {}
        for name, m in kinds.items():
            w = ma.MixedAttention(Hq, Hkv, D, P, device=device, q_dtype=dt, max_batch=cfg.max_running + 8,
                                  max_tokens=self.max_tokens, mode=m, **extra)
            if w.mode != m:
                raise C.NotAvailable("MIXED_ATTN_SPLIT_DISPATCH=0 forces fold")
            self.wrappers[name] = w
        self.streams = None
        if mode == "split2s" and device.type == "cuda":
            self.streams = (torch.cuda.Stream(device), torch.cuda.Stream(device, priority=-1))
        self.choices = {}  # best: {step kind: {"split": steps, "fold": steps}}
        self.steps_run = 0
        from mixed_attn.testing import random_kv_cache

        g = torch.Generator(device=device)
        g.manual_seed(cfg.seed)

        def randn(*shape):
            return torch.empty(*shape, dtype=dt, device=device).normal_(generator=g)

        self.num_pages = cfg.num_pages
        self.k_cache, self.v_cache = random_kv_cache(self.num_pages, P, Hkv, D, dt, g)
        T = self.max_tokens
        self.q, self.k, self.v = randn(T, Hq, D), randn(T, Hkv, D), randn(T, Hkv, D)
        self.out = torch.empty(T, Hq, D, dtype=dt, device=device)
        pin = device.type == "cuda"
        self.idx_host = torch.empty(self.num_pages, dtype=torch.int32, pin_memory=pin)
        self.idx_dev = torch.empty(self.num_pages, dtype=torch.int32, device=device)

    def step(self, rows, kind=None):
        """rows: [(request, prefix_len, extend_len)] (extend rows first); kind: the replay's step
        class (prefill / mixed / decode), tallied by mode "best". Returns wall seconds."""
        if self.mode == "split2s":
            return self._run_two_streams(rows)
        (qo_t, kv_t, seq_t), T, npg = self._stage(rows)
        order = list(self.wrappers)
        if self.steps_run % 2:
            order.reverse()
        self.steps_run += 1
        times = {m: self._run_step(self.wrappers[m], qo_t, kv_t, seq_t, T, npg) for m in order}
        best = min(times, key=times.get)
        if self.mode == "auto" and kind is not None:  # the mode the plan chose
            best = "split" if self.wrappers["auto"].last_path == "split" else "fold"
            tally = self.choices.setdefault(kind, {"split": 0, "fold": 0})
            tally[best] += 1
            return times["auto"]
        if len(times) > 1 and kind is not None:  # (None: the warm-up step outside any replay)
            tally = self.choices.setdefault(kind, {m: 0 for m in self.wrappers})
            tally[best] += 1
        return times[best]

    def _stage(self, rows, page0=0):
        """rows as one batch: its (qo_indptr, kv_indptr, seq_lens), tokens and pages, with its
        page table (each request's first pages, from the allocator) at idx_host[page0:]."""
        from mixed_attn.testing import batch_indptrs

        qo_t, kv_t, seq_t = batch_indptrs([e for _, _, e in rows], [p for _, p, _ in rows],
                                          self.cfg.page_size, tensors=True)
        T, npg = int(qo_t[-1]), int(kv_t[-1])
        n = (kv_t[1:] - kv_t[:-1]).tolist()
        torch.cat([r.pages[:k] for (r, _, _), k in zip(rows, n)], out=self.idx_host[page0:page0 + npg])
        return (qo_t, kv_t, seq_t), T, npg

    def _run_two_streams(self, rows):
        """split2s: the step's extend rows and its decode rows (the one-token rows the replay puts
        last) as two batches, planned on two wrappers and run on two streams, joined per layer."""
        n_dec = 0
        while n_dec < len(rows) and rows[len(rows) - 1 - n_dec][2] == 1:
            n_dec += 1
        parts, tok0, page0 = [], 0, 0
        for name, grp in (("extend", rows[:len(rows) - n_dec]), ("decode", rows[len(rows) - n_dec:])):
            if not grp:
                continue
            plan_args, T, npg = self._stage(grp, page0)
            parts.append((self.wrappers[name], plan_args, slice(tok0, tok0 + T), slice(page0, page0 + npg)))
            tok0, page0 = tok0 + T, page0 + npg
        cuda = self.device.type == "cuda"
        t0 = time.perf_counter()
        for w, plan_args, _, _ in parts:
            w.plan(*plan_args)
        self.idx_dev[:page0].copy_(self.idx_host[:page0], non_blocking=True)

        def run(w, ts, ps):
            w.run(self.q[ts], self.k_cache, self.v_cache, self.idx_dev[ps], k=self.k[ts], v=self.v[ts],
                  out=self.out[ts])

        for _ in range(self.cfg.layers):
            if self.streams is not None and len(parts) == 2:
                cur = torch.cuda.current_stream(self.device)
                for st in self.streams:
                    st.wait_stream(cur)
                for (w, _, ts, ps), st in zip(parts, self.streams):
                    with torch.cuda.stream(st):
                        run(w, ts, ps)
                for st in self.streams:
                    cur.wait_stream(st)
            else:
                for w, _, ts, ps in parts:
                    run(w, ts, ps)
        if cuda:
            torch.cuda.synchronize(self.device)
        return time.perf_counter() - t0

    def _run_step(self, w, qo_t, kv_t, seq_t, T, npg):
        """One step on wrapper w: plan, kv_indices upload, every layer, sync. Wall seconds."""
        cuda = self.device.type == "cuda"
        t0 = time.perf_counter()
        w.plan(qo_t, kv_t, seq_t)
        self.idx_dev[:npg].copy_(self.idx_host[:npg], non_blocking=True)
        q, k, v, out = self.q[:T], self.k[:T], self.v[:T], self.out[:T]
        tf = self.triton_forward
        for _ in range(self.cfg.layers):
            if tf is None:
                w.run(q, self.k_cache, self.v_cache, self.idx_dev, k=k, v=v, out=out)
            else:
                tf(q, k, v, self.k_cache, self.v_cache, self.idx_dev, w.plan_meta, w.plan_info,
                   w.partial_out, w.partial_lse, out, None, None, w.sm_scale, 0.0, -1, 1.0, 1.0)
        if cuda:
            torch.cuda.synchronize(self.device)
        return time.perf_counter() - t0


class PageAllocator:
    """A free list of page ids, shuffled once so a request's pages are scattered."""

    def __init__(self, num_pages, seed):
        self.free = list(range(num_pages))
        random.Random(seed).shuffle(self.free)

    def alloc(self, n):
        if n > len(self.free):
            return None
        got, self.free = self.free[-n:], self.free[:-n]
        return torch.tensor(got, dtype=torch.int32)

    def release(self, pages):
        self.free.extend(pages.tolist())


# ---------------------------------------------------------------------------------------------
# Replay
# ---------------------------------------------------------------------------------------------

def replay(engine, trace, cfg, desc, max_wall_s):
    engine.choices = {}  # one engine serves every trace: tally this replay's steps only
    reqs = [Request(i, a, p, o) for i, (a, p, o) in enumerate(trace)]
    pending = collections.deque(sorted(reqs, key=lambda r: r.arrival))
    waiting, prefilling, running = collections.deque(), [], []
    alloc = PageAllocator(engine.num_pages, cfg.seed)
    P = cfg.page_size
    clock, steps, mixed_steps, step_times, dec_rows, ext_tokens = 0.0, 0, 0, [], 0, 0
    by_kind = {}
    done = 0
    bar = C.Progress(len(reqs), desc)
    wall0 = time.perf_counter()
    truncated = False
    too_big = [r for r in reqs if -(-(r.prompt_len + r.output_len) // P) > engine.num_pages]
    if too_big:
        raise RuntimeError(f"a request needs more pages than the pool's {engine.num_pages}")
    while done < len(reqs):
        if time.perf_counter() - wall0 > max_wall_s:
            truncated = True
            break
        while pending and pending[0].arrival <= clock:
            waiting.append(pending.popleft())
        budget = cfg.token_budget
        dec = [(r, r.seq_len - 1, 1) for r in running]
        budget -= len(dec)
        ext = []
        for r in prefilling:
            if budget <= 0:
                break
            c = min(r.prompt_len - r.prefilled, budget)
            ext.append((r, r.prefilled, c))
            budget -= c
        while (budget > 0 and waiting and
               len(running) + len(prefilling) < cfg.max_running):
            r = waiting[0]
            pages = alloc.alloc(-(-(r.prompt_len + r.output_len) // P))
            if pages is None:
                break
            waiting.popleft()
            r.pages = pages
            r.admitted = clock
            prefilling.append(r)
            c = min(r.prompt_len, budget)
            ext.append((r, 0, c))
            budget -= c
        rows = ext + dec
        if not rows:
            if pending:
                clock = max(clock, pending[0].arrival)
                continue
            raise RuntimeError("scheduler stalled: requests wait but none can be admitted")
        # Step classes for the TTFT question (split vs fold): what each kind of step costs.
        kind = "mixed" if ext and dec else ("prefill" if ext else "decode")
        dt = engine.step(rows, kind)
        clock += dt
        steps += 1
        step_times.append(dt)
        k = by_kind.setdefault(kind, [0, 0.0, 0, 0])  # steps, seconds, prefill tokens, decode rows
        k[0] += 1
        k[1] += dt
        k[2] += sum(e for _, _, e in ext)
        k[3] += len(dec)
        mixed_steps += bool(ext) and bool(dec)
        dec_rows += len(dec)
        ext_tokens += sum(e for _, _, e in ext)
        finished = []
        for r, _, _ in dec:
            r.generated += 1
            r.itl.append(clock - r.last_token)
            r.last_token = clock
            if r.generated >= r.output_len:
                finished.append(r)
        for r, _, c in ext:
            r.prefilled += c
            if r.prefilled == r.prompt_len:
                prefilling.remove(r)
                r.generated = 1
                r.first_token = r.last_token = clock
                if r.output_len <= 1:
                    finished.append(r)
                else:
                    running.append(r)
        for r in finished:
            if r in running:
                running.remove(r)
            r.finish = clock
            alloc.release(r.pages)
            done += 1
        if finished:
            bar.update(len(finished), t=f"{clock:.2f}s", run=len(running))
    bar.close()
    m = metrics(reqs, clock, steps, mixed_steps, step_times, dec_rows, ext_tokens,
                truncated, time.perf_counter() - wall0)
    m["step_kinds"] = {kind: {"steps": n, "mean_ms": 1e3 * t / n, "prefill_tokens_per_step": pt / n,
                              "decode_rows_per_step": dr / n, "share_of_time": t / clock if clock else None}
                       for kind, (n, t, pt, dr) in by_kind.items()}
    if engine.choices:
        m["per_step_choice"] = engine.choices
    return m


def pct(xs, q):
    if not xs:
        return None
    xs = sorted(xs)
    i = q * (len(xs) - 1)
    lo = int(math.floor(i))
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (i - lo)


def metrics(reqs, clock, steps, mixed_steps, step_times, dec_rows, ext_tokens, truncated, wall):
    fin = [r for r in reqs if r.finish is not None]
    ttft = [r.first_token - r.arrival for r in reqs if r.first_token is not None]
    # TTFT = queueing (arrival to admission: waits for pages / a running slot / budget) + prefill
    # (admission to the step that finishes the prompt: its chunks and the steps between them).
    queue = [r.admitted - r.arrival for r in reqs if r.first_token is not None]
    prefill = [r.first_token - r.admitted for r in reqs if r.first_token is not None]
    itl = [x for r in reqs for x in r.itl]
    span = (max(r.finish for r in fin) - min(r.arrival for r in reqs)) if fin else 0.0
    out_tokens = sum(r.generated for r in reqs)
    # Capacity: requests finished per second until 80% of them are done (the long tail of the
    # last few decodes would understate what a full engine sustains).
    fin_times = sorted(r.finish for r in fin)
    k = max(1, int(0.8 * len(reqs)))
    req_s_80 = (k / (fin_times[k - 1] - min(r.arrival for r in reqs))
                if len(fin_times) >= k and fin_times[k - 1] > 0 else None)
    all_tokens = out_tokens + sum(r.prefilled for r in reqs)
    return {
        "requests": len(reqs), "finished": len(fin), "truncated": truncated,
        "span_s": span, "clock_s": clock, "wall_s": wall, "steps": steps,
        "served_tok_s": out_tokens / clock if clock else None,
        "all_tok_s": all_tokens / clock if clock else None,
        "req_s": len(fin) / span if span else None, "req_s_80": req_s_80,
        "ttft_p50_ms": _ms(pct(ttft, 0.5)), "ttft_p95_ms": _ms(pct(ttft, 0.95)),
        "ttft_queue_p50_ms": _ms(pct(queue, 0.5)), "ttft_queue_p95_ms": _ms(pct(queue, 0.95)),
        "ttft_prefill_p50_ms": _ms(pct(prefill, 0.5)), "ttft_prefill_p95_ms": _ms(pct(prefill, 0.95)),
        "itl_p50_ms": _ms(pct(itl, 0.5)), "itl_p95_ms": _ms(pct(itl, 0.95)),
        "step_mean_ms": _ms(statistics.mean(step_times)) if step_times else None,
        "mixed_step_share": mixed_steps / steps if steps else None,
        "decode_rows_per_step": dec_rows / steps if steps else None,
        "prefill_tokens_per_step": ext_tokens / steps if steps else None,
        "generated_tokens": out_tokens, "all_tokens": all_tokens,
    }


def _ms(s):
    return None if s is None else 1e3 * s


# ---------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Config:
    num_qo_heads: int = 32
    num_kv_heads: int = 8
    head_dim: int = 128
    page_size: int = 16
    layers: int = 8
    token_budget: int = 2048
    max_running: int = 128
    prompt_median: int = 1024
    prompt_sigma: float = 1.0
    prompt_min: int = 32
    prompt_max: int = 8192
    output_median: int = 128
    output_sigma: float = 0.7
    output_min: int = 8
    output_max: int = 512
    num_pages: int = 0
    seed: int = 0
    dtype: torch.dtype = torch.bfloat16


def config_for(args, gpu):
    if gpu:
        cfg = Config()
        if args.quick:
            cfg.layers, cfg.max_running = 4, 64
            cfg.prompt_median, cfg.output_median = 768, 64
            cfg.prompt_max, cfg.output_max = 4096, 256
    else:
        cfg = Config(num_qo_heads=8, num_kv_heads=2, head_dim=64, layers=2, token_budget=64,
                     max_running=8, prompt_median=32, prompt_sigma=0.6, prompt_min=4,
                     prompt_max=96, output_median=6, output_sigma=0.5, output_min=2,
                     output_max=12)
    for name in ("layers", "token_budget", "max_running", "page_size", "seed"):
        v = getattr(args, name)
        if v is not None:
            setattr(cfg, name, v)
    if args.model:
        cfg.num_qo_heads, cfg.num_kv_heads, cfg.head_dim = (int(x) for x in args.model.split("/"))
    cfg.max_running = min(cfg.max_running, cfg.token_budget)
    page_bytes = cfg.page_size * cfg.num_kv_heads * cfg.head_dim * 2 * 2
    need = cfg.max_running * -(-(cfg.prompt_max + cfg.output_max) // cfg.page_size)
    kv_gib = args.kv_gib if args.kv_gib is not None else (12.0 if gpu else 0.05)
    cfg.num_pages = max(-(-(cfg.prompt_max + cfg.output_max) // cfg.page_size) + 1,
                        min(need, int(kv_gib * (1 << 30) // page_bytes)))
    return cfg


def default_counts(args, gpu):
    if not gpu:
        return {"burst": 6, "poisson": 6, "trickle": 4}
    if args.quick:
        return {"burst": 48, "poisson": 48, "trickle": 16}
    return {"burst": 160, "poisson": 160, "trickle": 32}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="fewer requests and layers")
    p.add_argument("--traces", default="burst,poisson,trickle",
                   help="burst first: it measures the capacity the other rates derive from")
    p.add_argument("--modes", default="split,fold",
                   help="comma list of split, fold, auto (the planner picks per step), split2s (split's halves "
                        "on two streams), split_leave0 (split with extend_leave_sms=0: no SMs left to the "
                        "decode), best (each step timed split and fold, the faster charged)")
    p.add_argument("--backend", default="auto", choices=["auto", "op", "triton"],
                   help="op: torch.ops.mixed_attn.forward; triton: the Triton oracle with the "
                        "same plans; auto: the op, or the oracle when the op has no CUDA kernels")
    p.add_argument("--requests", type=int, default=None, help="requests per trace")
    p.add_argument("--rate", type=float, default=None,
                   help="poisson arrivals per second (default: --load x measured capacity)")
    p.add_argument("--load", type=float, default=0.8,
                   help="poisson rate as a fraction of the slowest mode's burst capacity")
    p.add_argument("--trickle-load", type=float, default=0.3)
    p.add_argument("--layers", type=int, default=None)
    p.add_argument("--model", default=None, help="Hq/Hkv/D, default 32/8/128")
    p.add_argument("--page-size", type=int, default=None)
    p.add_argument("--token-budget", type=int, default=None)
    p.add_argument("--max-running", type=int, default=None)
    p.add_argument("--kv-gib", type=float, default=None, help="KV pool size cap (GPU default 12)")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--time-budget-s", type=float, default=None,
                   help="wall-clock budget of all replays together (default 96 s, quick 40 s), "
                        "shared equally; a replay that runs out is reported as truncated")
    p.add_argument("--max-wall-s", type=float, default=None,
                   help="wall-clock cap of one replay (overrides the equal share)")
    p.add_argument("--json", default=None)
    p.add_argument("--markdown", default=None)
    p.add_argument("--out-dir", default=None)
    p.add_argument("--commit", default=None)
    p.add_argument("--cpu", action="store_true", help="the CPU version even with a GPU")
    p.add_argument("--no-ceilings", action="store_true",
                   help="skip the quick copy/read/matmul ceilings printed with the tables")
    return p.parse_args(argv)


def fmt(v, d=1):
    return "-" if v is None else f"{v:.{d}f}"


TABLE_HDR = ["trace", "mode", "req", "served tok/s", "all tok/s", "TTFT p50 ms", "TTFT p95 ms",
             "ITL p50 ms", "ITL p95 ms", "steps", "step ms", "mixed steps", "dec rows/step",
             "note"]


def table_rows(results):
    rows = []
    for r in results:
        m = r.get("metrics")
        if m is None:
            rows.append([r["trace"], r["mode"]] + ["-"] * (len(TABLE_HDR) - 3) +
                        [f"{r['status']}: {r['why']}"])
            continue
        note = f"TRUNCATED ({m['finished']}/{m['requests']} done)" if m["truncated"] else ""
        if r.get("rate"):
            note = (note + " " if note else "") + f"rate {r['rate']:.1f} req/s"
        rows.append([r["trace"], r["mode"], f"{m['finished']}/{m['requests']}",
                     fmt(m["served_tok_s"], 0), fmt(m["all_tok_s"], 0), fmt(m["ttft_p50_ms"]),
                     fmt(m["ttft_p95_ms"]), fmt(m["itl_p50_ms"], 2), fmt(m["itl_p95_ms"], 2),
                     m["steps"], fmt(m["step_mean_ms"], 2), C.fmt_pct(m["mixed_step_share"]),
                     fmt(m["decode_rows_per_step"]), note])
    return rows


def comparisons(results, mode="split", against="fold"):
    """`mode` vs `against` per trace: served tok/s gain and TTFT / ITL change."""
    by = {(r["trace"], r["mode"]): r.get("metrics") for r in results}
    out = []
    for trace in dict.fromkeys(r["trace"] for r in results):
        s, f = by.get((trace, mode)), by.get((trace, against))
        if not s or not f:
            continue
        ch = lambda a, b: (f"{100 * (a / b - 1):+.0f}%" if a and b else "-")  # noqa: E731
        out.append([trace, ch(s["served_tok_s"], f["served_tok_s"]),
                    ch(s["ttft_p50_ms"], f["ttft_p50_ms"]), ch(s["ttft_p95_ms"], f["ttft_p95_ms"]),
                    ch(s["itl_p50_ms"], f["itl_p50_ms"]), ch(s["itl_p95_ms"], f["itl_p95_ms"]),
                    "yes" if s["truncated"] or f["truncated"] else ""])
    return ["trace", "served tok/s", "TTFT p50", "TTFT p95", "ITL p50", "ITL p95",
            "truncated"], out


def choice_rows(results):
    """Modes "best" (which was faster) and "auto" (which the plan chose): per trace and step
    kind, steps split / fold."""
    rows = []
    for r in results:
        choice = (r.get("metrics") or {}).get("per_step_choice")
        for kind, tally in sorted((choice or {}).items()):
            rows.append([r["trace"], r["mode"], kind, str(tally.get("split", 0)), str(tally.get("fold", 0))])
    return ["trace", "mode", "step kind", "split", "fold"], rows


def markdown(env, cfg, results, args, total_s, gpu, backend, ceilings, final=True):
    hdr, cmp_rows = comparisons(results)
    lines = [f"## serve_replay.py ({'quick' if args.quick else 'full'} run"
             + ("" if final else "; PARTIAL: the run was still going or was cut short") + ")", "",
             f"- date: {env['date']}", f"- commit: `{env['commit']}`",
             f"- device: {env['gpu'] or 'NO GPU (CPU; tiny model, numbers not meaningful)'}",
             f"- torch {env['torch']}, CUDA {env['cuda_runtime']}, triton {env['triton']}",
             f"- backend: {backend} ("
             + ("torch.ops.mixed_attn.forward" if backend == "op" else "the Triton oracle, "
                "python/mixed_attn/triton_ref.py, driven by the same plans") + ")",
             f"- model (attention only): Hq/Hkv/D {cfg.num_qo_heads}/{cfg.num_kv_heads}/"
             f"{cfg.head_dim}, {cfg.layers} layers, page {cfg.page_size}, bf16; token budget "
             f"{cfg.token_budget}/step, max running {cfg.max_running}, KV pool {cfg.num_pages} "
             f"pages",
             f"- lengths: prompt lognormal(median {cfg.prompt_median}, sigma {cfg.prompt_sigma}) "
             f"in [{cfg.prompt_min}, {cfg.prompt_max}], output lognormal(median "
             f"{cfg.output_median}, sigma {cfg.output_sigma}) in [{cfg.output_min}, "
             f"{cfg.output_max}]",
             "- ceilings (this run, quick): "
             + (C.ceilings_line(ceilings) if ceilings else "not measured (--no-ceilings)"),
             f"- wall time of the run: {total_s:.0f} s", "",
             "Step time = wall time of plan + kv_indices upload + all layers + sync (virtual "
             "clock; scheduler bookkeeping excluded). served tok/s = generated tokens / virtual "
             "time; TTFT from arrival to the step that finishes the prompt; ITL between "
             "consecutive tokens of a request. Attention only: end-to-end gains are smaller. "
             + SGLANG_NOTE + ".", "",
             C.md_table(TABLE_HDR, table_rows(results)), ""]
    if cmp_rows:
        lines += ["split relative to fold (negative latency = better):", "",
                  C.md_table(hdr, cmp_rows), ""]
    hdr_b, best_rows = comparisons(results, "best", "split")
    if best_rows:
        lines += ["best (per step the faster of split and fold) relative to split:", "",
                  C.md_table(hdr_b, best_rows), ""]
    hdr_c, ch_rows = choice_rows(results)
    if ch_rows:
        lines += ["best: which mode was faster; auto: which the plan chose (steps per step kind):", "",
                  C.md_table(hdr_c, ch_rows), ""]
    for against in ("split", "best"):
        hdr_a, auto_rows = comparisons(results, "auto", against)
        if auto_rows:
            lines += [f"auto relative to {against}:", "", C.md_table(hdr_a, auto_rows), ""]
    kind_rows = []
    for r in results:
        m = r.get("metrics")
        if not m:
            continue
        kinds = m.get("step_kinds", {})
        cell = lambda k: (f"{kinds[k]['steps']} x {kinds[k]['mean_ms']:.2f} ms"  # noqa: E731
                          f" ({kinds[k]['prefill_tokens_per_step']:.0f} pf tok, "
                          f"{kinds[k]['decode_rows_per_step']:.0f} dec)" if k in kinds else "-")
        kind_rows.append([r["trace"], r["mode"], fmt(m["ttft_queue_p50_ms"]), fmt(m["ttft_queue_p95_ms"]),
                          fmt(m["ttft_prefill_p50_ms"]), fmt(m["ttft_prefill_p95_ms"]),
                          cell("prefill"), cell("mixed"), cell("decode")])
    if kind_rows:
        lines += ["TTFT = queueing (arrival to admission) + prefill (admission to the first token); "
                  "steps by kind: count x mean time (prefill tokens, decode rows per step):", "",
                  C.md_table(["trace", "mode", "queue p50 ms", "queue p95 ms", "prefill p50 ms",
                              "prefill p95 ms", "prefill-only steps", "mixed steps",
                              "decode-only steps"], kind_rows), ""]
    return "\n".join(lines)


def main(argv=None):
    args = parse_args(argv)
    t_start, gpu, device, env = C.start_run("serve_replay", args)
    cfg = config_for(args, gpu)
    print(f"model {cfg.num_qo_heads}/{cfg.num_kv_heads}/{cfg.head_dim}, {cfg.layers} layers "
          f"(attention only), page {cfg.page_size}, budget {cfg.token_budget} tokens/step, "
          f"max running {cfg.max_running}, KV pool {cfg.num_pages} pages "
          f"({cfg.num_pages * cfg.page_size} tokens)", flush=True)
    print(SGLANG_NOTE, flush=True)
    ceilings = {}
    if not args.no_ceilings:
        ceilings = C.measure_ceilings(device, quick=True)
        print("ceilings (quick): " + C.ceilings_line(ceilings), flush=True)
    traces = [t for t in args.traces.split(",") if t]
    modes = [m for m in args.modes.split(",") if m]
    counts = default_counts(args, gpu)
    # Each replay gets an equal share of the time budget; one that runs out is reported as
    # truncated (its requests so far), so the whole script stays within the budget.
    budget_s = args.time_budget_s or (40.0 if (args.quick or not gpu) else 96.0)
    max_wall = args.max_wall_s or budget_s / max(1, len(traces) * len(modes))

    ma, why = C.import_mixed_attn()
    backend, triton_forward = args.backend, None
    if ma is not None and backend == "auto":
        backend = "op" if (not gpu or ma.has_cuda_kernels()) else "triton"
        if backend == "triton":
            print("note: this _C.so has no CUDA kernels: replaying with the Triton oracle "
                  "(same plans, same split/fold dispatch)", flush=True)
    if ma is not None and backend == "op" and gpu and not ma.has_cuda_kernels():
        ma, why = None, "this build of _C.so has no CUDA kernels"
    if ma is not None and backend == "triton":
        if not gpu and os.environ.get("TRITON_INTERPRET") != "1":
            ma, why = None, "the Triton oracle needs a GPU (or TRITON_INTERPRET=1)"
        else:
            try:
                from mixed_attn.triton_ref import triton_forward
            except Exception as e:  # noqa: BLE001
                ma, why = None, "Triton oracle missing: " + C.short_error(e, 80)
    print(f"backend: {backend if ma is not None else 'none'}"
          + ("" if ma is not None else f" ({why})"), flush=True)
    engines = {}
    results = []
    for mode in modes:
        if ma is None:
            continue
        try:
            eng = Engine(ma, cfg, mode, device, triton_forward)
            # Warm-up: one mixed step (first launches, lazy init) outside any replay.
            r0 = Request(-1, 0.0, 64, 2)
            r0.pages = torch.arange(-(-(64 + 2) // cfg.page_size), dtype=torch.int32)
            r1 = Request(-2, 0.0, 1, 2)
            r1.pages = torch.arange(8, 8 + -(-(40) // cfg.page_size), dtype=torch.int32)
            eng.step([(r0, 0, min(64, cfg.token_budget - 1)), (r1, 31, 1)])
            engines[mode] = eng
        except C.NotAvailable as e:
            engines[mode] = ("n/a", str(e))
        except Exception as e:  # noqa: BLE001
            engines[mode] = ("error", C.short_error(e))

    out_dir = args.out_dir or C.default_out_dir("serve_replay")
    json_path = args.json or os.path.join(out_dir, "serve_replay.json")
    cfg_d = dataclasses.asdict(cfg)
    cfg_d["dtype"] = str(cfg.dtype)

    def save(results, final):
        """JSON (and markdown) after every replay, so a run cut short still leaves its tables."""
        total = time.perf_counter() - t_start
        try:
            C.write_text(json_path, json.dumps(
                {"env": env, "config": cfg_d, "args": vars(args), "backend": backend,
                 "ceilings": ceilings, "results": results, "wall_s": total, "gpu": gpu,
                 "complete": final}, indent=1, default=str))
            if args.markdown:
                C.write_text(args.markdown, markdown(env, cfg, results, args, total, gpu,
                                                     backend, ceilings, final))
        except Exception as e:  # noqa: BLE001
            print(f"(could not write the outputs: {C.short_error(e)})", flush=True)

    capacity = None
    for trace in traces:
        n = args.requests or counts.get(trace, 32)
        rate = None
        if trace in ("poisson", "trickle"):
            base = args.rate if (args.rate and trace == "poisson") else None
            if base is None:
                load = args.load if trace == "poisson" else args.trickle_load
                base = load * capacity if capacity else None
            if base is None:
                base = 50.0 if gpu else 200.0
                print(f"note: no burst capacity measured; {trace} uses {base} req/s")
            rate = base
        tr = make_trace(trace, n, rate, cfg, seed=cfg.seed + 1000 * (traces.index(trace) + 1))
        print(f"\n=== trace {trace}: {n} requests"
              + (f", {rate:.1f} req/s" if rate else ", all at t=0 (saturation)")
              + f"; prompt tokens {sum(p for _, p, _ in tr)}, output tokens "
              f"{sum(o for _, _, o in tr)}", flush=True)
        caps = []
        for mode in modes:
            rec = {"trace": trace, "mode": mode, "rate": rate, "backend": backend}
            eng = engines.get(mode)
            if ma is None:
                rec.update(status="n/a", why=why)
            elif isinstance(eng, tuple):
                rec.update(status=eng[0], why=eng[1])
            else:
                try:
                    if gpu:
                        torch.cuda.synchronize()
                    m = replay(eng, tr, cfg, f"{trace}/{mode}", max_wall)
                    rec.update(status="ok", metrics=m)
                    if trace == "burst" and m["req_s_80"]:
                        caps.append(m["req_s_80"])
                except Exception as e:  # noqa: BLE001
                    rec.update(status="error", why=C.short_error(e))
            results.append(rec)
            print(C.text_table(TABLE_HDR, table_rows([rec])).splitlines()[-1], flush=True)
            save(results, False)
        if trace == "burst" and caps:
            capacity = min(caps)
            print(f"capacity (slowest mode, burst, until 80% done): {capacity:.1f} req/s",
                  flush=True)

    total_s = time.perf_counter() - t_start
    print("\n=== serve_replay summary (" + ("GPU" if gpu else "NO GPU: CPU, tiny model") + ")")
    print(C.text_table(TABLE_HDR, table_rows(results)))
    hdr, cmp_rows = comparisons(results)
    if cmp_rows:
        print("\nsplit relative to fold:")
        print(C.text_table(hdr, cmp_rows))
    hdr_b, best_rows = comparisons(results, "best", "split")
    if best_rows:
        print("\nbest (per step the faster of split and fold) relative to split:")
        print(C.text_table(hdr_b, best_rows))
    for against in ("split", "best"):
        hdr_a, auto_rows = comparisons(results, "auto", against)
        if auto_rows:
            print(f"\nauto relative to {against}:")
            print(C.text_table(hdr_a, auto_rows))
    hdr_c, ch_rows = choice_rows(results)
    if ch_rows:
        print(C.text_table(hdr_c, ch_rows))
    print(SGLANG_NOTE)
    if not gpu:
        print(C.NO_GPU_BANNER)
    save(results, True)
    print(f"wrote {json_path}" + (f" and {args.markdown}" if args.markdown else ""))
    print(f"total {total_s:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
