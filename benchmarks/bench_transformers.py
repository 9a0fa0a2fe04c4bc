"""transformers' continuous batching (generate_batch) with paged|mixed_attn vs its own paged paths.

    PYTHONPATH=python python benchmarks/bench_transformers.py            # GPU: the real run
    PYTHONPATH=python python benchmarks/bench_transformers.py --tiny     # CPU smoke test

A random-weight Llama-style model of realistic shape (default: 2.3B parameters, 20 layers,
hidden 3072, 32 query heads / 8 KV heads, head dim 128, bf16; no download) serves a burst of a
few hundred requests (all submitted at t=0, prompt lengths drawn from a seeded log-uniform
range, greedy, a fixed number of new tokens, EOS off) through model.generate_batch once per
attention implementation, in one process, with the same ContinuousBatchingConfig (block size,
cache blocks, token budget per step: every implementation gets the same cache, so no
implementation is sized differently by transformers' memory heuristics), after one warm-up
generate_batch of a few requests per implementation.

Reported per implementation: served (generated) tokens/s over the whole generate_batch wall
time, time to first token p50/p95 (first token's timestamp minus the request's creation: queueing
included, as in a burst), the number of steps and the share of mixed steps (mixed_attn's
counters), and the speed-up over paged|sdpa.

Token identity (bf16): the greedy tokens of paged|mixed_attn against paged|sdpa for the same
requests. Reported: the fraction of requests whose tokens are all identical and the fraction of
tokens before each request's first divergence. bf16 kernels that sum in different orders pick
different tokens where two candidates are within rounding of each other (ties); after that the
sequences legitimately differ. Each first divergence is classified from the two runs' logprobs
of the token each chose (return_logprobs): |lp_a - lp_b| < --tie-nats is a tie; anything
else is listed as a suspect divergence (a real error shows up as large gaps, and early).
"""

import argparse
import json
import math
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402

IMPL_NAMES = {"mixed_attn": "paged|mixed_attn", "sdpa": "paged|sdpa", "eager": "paged|eager"}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tiny", action="store_true",
                   help="tiny model, few requests, fp32 on the CPU: proves the script runs")
    p.add_argument("--cpu", action="store_true", help="run on the CPU even with a GPU")
    p.add_argument("--impls", default="mixed_attn,sdpa",
                   help="comma list of mixed_attn, sdpa, eager (paged|eager materialises "
                        "[Hq, tokens, all keys] scores per layer: only for small runs)")
    p.add_argument("--requests", type=int, default=256)
    p.add_argument("--prompt-min", type=int, default=64)
    p.add_argument("--prompt-max", type=int, default=2048)
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--layers", type=int, default=20)
    p.add_argument("--hidden", type=int, default=3072)
    p.add_argument("--intermediate", type=int, default=8192)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--block-size", type=int, default=256, help="transformers' default block size")
    p.add_argument("--max-batch-tokens", type=int, default=2048, help="token budget per step")
    p.add_argument("--mode", default="split", choices=["split", "fold"], help="mixed_attn dispatch")
    p.add_argument("--tie-nats", type=float, default=0.1,
                   help="a first divergence whose two logprobs are this close is a tie")
    p.add_argument("--adjudicate", type=int, default=1,
                   help="1: run the fp32 adjudication of every first divergence (see adjudicate)")
    p.add_argument("--adjudicate-limit", type=int, default=0,
                   help="adjudicate only the first N divergences (0: all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--markdown", default=None, help="also write the markdown tables here")
    p.add_argument("--json", default=None, help="write the raw numbers here")
    p.add_argument("--commit", default=None, help="commit label (default: git, $MIXED_ATTN_COMMIT)")
    a = p.parse_args(argv)
    if a.tiny:
        a.requests, a.prompt_min, a.prompt_max, a.new_tokens = 12, 3, 60, 8
        a.layers, a.hidden, a.intermediate, a.heads, a.kv_heads, a.head_dim = 2, 128, 256, 4, 2, 64
        a.vocab, a.block_size, a.max_batch_tokens = 256, 16, 48
        if a.impls == "mixed_attn,sdpa":
            a.impls = "mixed_attn,sdpa,eager"
    return a


def build_model(a, device, dtype):
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=a.vocab, hidden_size=a.hidden, intermediate_size=a.intermediate,
                      num_hidden_layers=a.layers, num_attention_heads=a.heads,
                      num_key_value_heads=a.kv_heads, head_dim=a.head_dim,
                      max_position_embeddings=max(4096, a.prompt_max + a.new_tokens + 16),
                      tie_word_embeddings=False)
    torch.manual_seed(a.seed)
    prev = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # random init directly in the serving dtype, on the device
    try:
        with torch.device(device):
            model = LlamaForCausalLM(cfg)
    finally:
        torch.set_default_dtype(prev)
    return model.eval()


def make_prompts(a, n, seed):
    g = torch.Generator().manual_seed(seed)
    lo, hi = math.log(a.prompt_min), math.log(a.prompt_max)
    lens = [int(math.exp(lo + (hi - lo) * float(torch.rand((), generator=g)))) for _ in range(n)]
    return [torch.randint(0, a.vocab, (L,), generator=g).tolist() for L in lens]


def cb_config(a, num_blocks):
    from transformers import ContinuousBatchingConfig
    # CUDA graphs off for every implementation: transformers turns them off by default for
    # non-flash implementations anyway, and mixed_attn plans from host lengths each step.
    return ContinuousBatchingConfig(block_size=a.block_size, num_blocks=num_blocks,
                                    max_batch_tokens=a.max_batch_tokens, use_cuda_graph=False,
                                    use_async_batching=False, return_logprobs=True,
                                    allow_block_sharing=False)


def gen_config(a):
    from transformers import GenerationConfig
    return GenerationConfig(max_new_tokens=a.new_tokens, do_sample=False, eos_token_id=-1,
                            pad_token_id=0)


def run_impl(model, impl, prompts, a, num_blocks, sync):
    model.set_attn_implementation(impl)
    sync()
    t0 = time.perf_counter()
    out = model.generate_batch(inputs=prompts, generation_config=gen_config(a),
                               continuous_batching_config=cb_config(a, num_blocks),
                               record_timestamps=True, warmup=False)
    sync()
    wall = time.perf_counter() - t0
    res, ttft, errors = [], [], []
    for i in range(len(prompts)):
        o = out[f"req_{i}"]
        if o.error is not None:
            errors.append(o.error)
        res.append((list(o.generated_tokens), list(o.logprobs or [])))
        if o.timestamps:
            ttft.append(o.timestamps[0] - o.created_time)
    gen = sum(len(t) for t, _ in res)
    return {"impl": impl, "wall_s": wall, "generated": gen, "tok_s": gen / wall if wall else 0.0,
            "ttft": ttft, "tokens": res, "errors": errors}


def _sec(v):
    return "-" if v is None else f"{v:.3f}"


def pct(xs, q):
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def first_divergences(ref, got):
    """(request, step) of each request's first differing token, where both runs have one."""
    out = []
    for i, ((ta, _), (tb, _)) in enumerate(zip(ref, got)):
        k = next((j for j in range(min(len(ta), len(tb))) if ta[j] != tb[j]), None)
        if k is not None:
            out.append({"request": i, "step": k})
    return out


def identity(ref, got, tie_nats):
    """ref, got: lists of (tokens, logprobs) per request."""
    same_req, agree, total, ties, suspects = 0, 0, 0, 0, []
    for i, ((ta, la), (tb, lb)) in enumerate(zip(ref, got)):
        n = min(len(ta), len(tb))
        total += max(len(ta), len(tb))
        k = next((j for j in range(n) if ta[j] != tb[j]), n)
        agree += k
        if k == n and len(ta) == len(tb):
            same_req += 1
            continue
        if k < n and k < len(la) and k < len(lb):
            gap = abs(la[k] - lb[k])
            if gap < tie_nats:
                ties += 1
            else:
                suspects.append({"request": i, "step": k, "logprob_gap": gap})
        else:
            suspects.append({"request": i, "step": k, "logprob_gap": None})
    nreq = len(ref)
    return {"requests": nreq, "identical_requests": same_req,
            "frac_identical_requests": same_req / nreq if nreq else 0.0,
            "frac_tokens_before_divergence": agree / total if total else 0.0,
            "tie_divergences": ties, "suspect_divergences": suspects}


@torch.no_grad()
def adjudicate(model, prompts, ref, got, divergences, dtype):
    """Which token a higher-precision model prefers at each first divergence.

    For a first divergence (request i, step k) the two runs agree on prompt + tokens[:k] and then
    choose token a (reference run) and token b (mixed_attn). The same weights, upcast to fp32, run
    teacher-forced over that common prefix without a paged cache (transformers' own sdpa path,
    fp32 throughout), and so does the serving-dtype model: per divergence
      gap_fp32 = logp_fp32(a) - logp_fp32(b)   (> 0: fp32 prefers the reference run's token)
      err_lowp = |gap_lowp - gap_fp32|          (the serving-dtype model's own error on that gap)
    A divergence where |gap_fp32| <= err_lowp is one that the serving dtype cannot resolve even
    without any paged kernel: a tie by measurement, not by a threshold. One where fp32 clearly
    prefers the reference token by more than that error would point at a wrong result."""
    import copy
    model32 = copy.deepcopy(model).float()
    for m in (model, model32):
        m.set_attn_implementation("sdpa")
    dev = next(model.parameters()).device
    rows = []
    for d in divergences:
        i, k = d["request"], d["step"]
        ta, tb = ref[i][0], got[i][0]
        ids = torch.tensor([prompts[i] + ta[:k]], device=dev)
        lp32 = torch.log_softmax(model32(input_ids=ids).logits[0, -1].double(), -1)
        lp16 = torch.log_softmax(model(input_ids=ids).logits[0, -1].double(), -1)
        a, b = ta[k], tb[k]
        g32 = float(lp32[a] - lp32[b])
        g16 = float(lp16[a] - lp16[b])
        top = int(torch.argmax(lp32))
        rows.append({"request": i, "step": k, "token_ref": a, "token_mixed": b,
                     "gap_fp32": g32, "err_lowp": abs(g16 - g32),
                     "fp32_argmax_is": "ref" if top == a else "mixed" if top == b else "neither",
                     "unresolvable": abs(g32) <= abs(g16 - g32)})
    del model32
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    n = len(rows)
    return {"divergences": rows, "count": n,
            "fp32_prefers_mixed": sum(r["gap_fp32"] < 0 for r in rows),
            "unresolvable": sum(r["unresolvable"] for r in rows),
            "max_abs_gap_fp32": max((abs(r["gap_fp32"]) for r in rows), default=0.0),
            "median_err_lowp": statistics.median([r["err_lowp"] for r in rows]) if rows else 0.0,
            "dtype": str(dtype).replace("torch.", "")}


def main(argv=None):
    a = parse_args(argv)
    name = "bench_transformers" + (" --tiny" if a.tiny else "")
    t_start, gpu, device, env = C.start_run(name, a)
    ma, why = C.import_mixed_attn()
    if ma is None:
        print(why)
        return 1
    try:
        import transformers
    except ImportError:
        print("transformers is not installed (pip install transformers==5.17.0)")
        return 1
    import mixed_attn.integrations.transformers as ma_tf
    ma_tf.register(mode=a.mode)
    dtype = torch.bfloat16 if gpu else torch.float32
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    impls = [s.strip() for s in a.impls.split(",") if s.strip()]
    for s in impls:
        if s not in IMPL_NAMES:
            raise SystemExit(f"--impls: unknown {s!r} (choose from {', '.join(IMPL_NAMES)})")

    model = build_model(a, device, dtype)
    nparams = sum(p.numel() for p in model.parameters())
    prompts = make_prompts(a, a.requests, a.seed + 1)
    # Cache: every request's whole sequence at once, plus a margin, so no implementation evicts.
    per_req = [math.ceil((len(p) + a.new_tokens) / a.block_size) for p in prompts]
    num_blocks = sum(per_req) + 16
    shape = (f"Llama-style random weights, {nparams / 1e9:.2f}B params, {a.layers} layers, "
             f"hidden {a.hidden}, {a.heads}/{a.kv_heads} heads, head dim {a.head_dim}, "
             f"{str(dtype).replace('torch.', '')}, {device.type}")
    work = (f"{a.requests} requests at t=0, prompts {min(map(len, prompts))}-"
            f"{max(map(len, prompts))} tokens (mean {statistics.mean(map(len, prompts)):.0f}), "
            f"{a.new_tokens} new tokens each, greedy; block_size {a.block_size}, "
            f"{num_blocks} blocks, max_batch_tokens {a.max_batch_tokens}; transformers "
            f"{transformers.__version__}; mixed_attn mode {a.mode}")
    print(shape, flush=True)
    print(work, flush=True)

    warm = make_prompts(a, 4, a.seed + 2)
    results = {}
    failures = {}
    for s in impls:
        impl = IMPL_NAMES[s]
        try:
            run_impl(model, impl, warm, a, num_blocks, sync)  # warm-up: kernels, allocator
            if s == "mixed_attn":
                ma_tf.reset_stats()
            r = run_impl(model, impl, prompts, a, num_blocks, sync)
        except Exception as e:  # noqa: BLE001  (e.g. an OOM of one path: report, keep the rest)
            failures[s] = C.short_error(e, 200)
            print(f"  {impl}: FAILED: {failures[s]}", flush=True)
            if gpu:
                torch.cuda.empty_cache()
            continue
        if s == "mixed_attn":
            r["stats"] = dict(ma_tf.stats)
        results[s] = r
        print(f"  {impl}: {r['wall_s']:.2f} s, {r['tok_s']:.1f} served tok/s, "
              f"{len(r['errors'])} failed requests", flush=True)

    base = results.get("sdpa")
    header = ["attention", "served tok/s", "vs paged|sdpa", "TTFT p50 (s)", "TTFT p95 (s)",
              "wall (s)", "failed"]
    rows = []
    for s, r in results.items():
        rows.append([IMPL_NAMES[s], f"{r['tok_s']:.1f}",
                     f"{r['tok_s'] / base['tok_s']:.2f}x" if base and base["tok_s"] else "-",
                     _sec(pct(r["ttft"], 0.5)), _sec(pct(r["ttft"], 0.95)),
                     f"{r['wall_s']:.2f}", str(len(r["errors"]))])
    for s, why in failures.items():
        rows.append([IMPL_NAMES[s], "-", "-", "-", "-", "-", f"run failed: {why}"])
    md = [f"### transformers generate_batch: {shape}", "", work, "", C.env_line(env), "",
          C.md_table(header, rows), ""]
    st = results.get("mixed_attn", {}).get("stats")
    if st:
        md += [f"mixed_attn: {st['steps']} steps ({st['mixed_steps']} mixed: decode and extend "
               f"rows), {st['layer_calls']} layer calls, {st['host_syncs']} host syncs "
               f"(one per step), {st['decode_rows']} decode rows, {st['extend_rows']} extend "
               f"rows.", ""]
    ident = None
    if "mixed_attn" in results and ("sdpa" in results or "eager" in results):
        ref_name = "sdpa" if "sdpa" in results else "eager"
        ident = identity(results[ref_name]["tokens"], results["mixed_attn"]["tokens"], a.tie_nats)
        md += [f"Token identity, paged|mixed_attn vs {IMPL_NAMES[ref_name]} "
               f"({str(dtype).replace('torch.', '')}, greedy):", "",
               C.md_table(["requests", "identical requests", "tokens before 1st divergence",
                           f"ties (|dlogprob| < {a.tie_nats})", "suspect divergences"],
                          [[ident["requests"],
                            f"{ident['identical_requests']} ({C.fmt_pct(ident['frac_identical_requests'])})",
                            C.fmt_pct(ident["frac_tokens_before_divergence"]),
                            ident["tie_divergences"], len(ident["suspect_divergences"])]]), ""]
        firsts = first_divergences(results[ref_name]["tokens"], results["mixed_attn"]["tokens"])
        if a.adjudicate_limit:
            firsts = firsts[: a.adjudicate_limit]
        if a.adjudicate and firsts:
            adj = adjudicate(model, prompts, results[ref_name]["tokens"],
                             results["mixed_attn"]["tokens"], firsts, dtype)
            ident["adjudication"] = adj
            verdict = {(r["request"], r["step"]): r for r in adj["divergences"]}
            for d in ident["suspect_divergences"]:
                r = verdict.get((d["request"], d["step"]))
                if r is not None:
                    d["explained"] = r["unresolvable"] or r["gap_fp32"] < 0
            md += [f"fp32 adjudication of the first divergences (same weights upcast, teacher-forced "
                   f"over each common prefix, no paged cache): {adj['count']} divergences; fp32 "
                   f"prefers mixed_attn's token in {adj['fp32_prefers_mixed']} and "
                   f"{IMPL_NAMES[ref_name]}'s in {adj['count'] - adj['fp32_prefers_mixed']}; "
                   f"{adj['unresolvable']} have |gap_fp32| within the non-paged "
                   f"{adj['dtype']} model's own error on that gap; largest |gap_fp32| "
                   f"{adj['max_abs_gap_fp32']:.4f} nats, median {adj['dtype']} error "
                   f"{adj['median_err_lowp']:.4f} nats.", ""]
            named = [r for r in adj["divergences"]
                     if any(r["request"] == s_["request"] for s_ in ident["suspect_divergences"])]
            named += sorted(adj["divergences"], key=lambda r: -r["gap_fp32"])[:5]
            seen, lines = set(), []
            for r in named:
                if r["request"] in seen:
                    continue
                seen.add(r["request"])
                lines.append([r["request"], r["step"], f"{r['gap_fp32']:+.4f}", f"{r['err_lowp']:.4f}",
                              r["fp32_argmax_is"], "yes" if r["unresolvable"] else "no"])
            md += [C.md_table(["request", "step", "gap_fp32 (+: ref's token)",
                               f"{adj['dtype']} error on the gap", "fp32 argmax", "unresolvable"],
                              lines), ""]
        if ident["suspect_divergences"]:
            items = []
            for d in ident["suspect_divergences"][:20]:
                gap = "-" if d["logprob_gap"] is None else f"{d['logprob_gap']:.3f}"
                items.append(f"({d['request']}, {d['step']}, {gap})")
            md += ["Suspect divergences (request, step, logprob gap): " + ", ".join(items), ""]
            if any("explained" in d for d in ident["suspect_divergences"]):
                left = [d for d in ident["suspect_divergences"] if not d.get("explained")]
                md += [f"After the fp32 adjudication, {len(left)} suspect divergences remain "
                       f"(a suspect is explained when fp32 prefers mixed_attn's token or cannot "
                       f"be resolved by the serving dtype).", ""]
    text = "\n".join(md)
    print()
    print(text, flush=True)
    if a.markdown:
        C.write_text(a.markdown, text + "\n")
    if a.json:
        C.write_text(a.json, json.dumps({
            "env": env, "args": vars(a), "params": nparams, "num_blocks": num_blocks,
            "results": {s: {k: v for k, v in r.items() if k != "tokens"} for s, r in results.items()},
            "identity": ident}, indent=1, default=str) + "\n")
    print(f"done in {time.perf_counter() - t_start:.1f} s")
    failed = sum(len(r["errors"]) for r in results.values()) + len(failures)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
