"""Smoke test of the benchmark scripts: their --quick CPU versions run end to end, the op they
time agrees with the fp32 reference, and the JSON / markdown outputs hold what the lead pastes.
The only test module that imports benchmarks/ (the others build their batches with
mixed_attn.testing).
"""

import json
import os
import sys

import pytest
import torch

BENCH_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks")
sys.path.insert(0, BENCH_DIR)

import bench_mixed  # noqa: E402
import bench_plan_host  # noqa: E402
import common  # noqa: E402
import serve_replay  # noqa: E402


def test_case_counts_match_baselines():
    a = common.CASES_BY_NAME["A"]
    assert a.decode_kv_bytes() == 128 * 4096 * 8 * 128 * 2 * 2
    assert a.extend_flops() == 4 * 128 * 32 * (512 * 513 // 2)
    b = common.CASES_BY_NAME["B"]
    assert common.attended_pairs(4096, 4096) == 4096 * 4096 + 4096 * 4097 // 2
    assert b.num_rows == 65 and b.num_tokens == 4096 + 64
    # floorD of baselines.md: decode bytes over its 4.25 TB/s copy figure, in ms.
    assert abs(a.decode_kv_bytes() / 4.25e12 * 1e3 - 0.505) < 0.01
    assert [c.name for c in common.BASELINE_CASES] == list("ABCDEFGH")
    assert common.attended_pairs(10, 4, window_left=2) == 4 * 3
    # E's decode lengths are random; their total matches baselines.md's floorD (0.811 ms).
    e = common.CASES_BY_NAME["E"]
    assert abs(e.decode_kv_bytes() / 4.25e12 * 1e3 - 0.811) < 0.0005
    assert all(512 <= s <= 16384 for s in e.decode_seq_lens) and len(e.decode_seq_lens) == 96
    assert set(common.reference_for("A")) == set(common.REFERENCE_COLUMNS)


def test_bench_mixed_quick_cpu(tmp_path, capsys):
    js, md = tmp_path / "bm.json", tmp_path / "bm.md"
    rc = bench_mixed.main(["--quick", "--cpu", "--rows", "ma_split,ma_fold,ma_auto,ma_dec,torch_sdpa,torch_batched",
                           "--json", str(js), "--markdown", str(md), "--no-plot",
                           "--commit", "test"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "NO GPU" in out
    data = json.loads(js.read_text())
    assert data["ceilings"]["copy_tbs"] and data["ceilings"]["matmul_tflops"]
    (case,) = data["cases"]
    for name in ("ma_split", "ma_fold", "ma_auto", "ma_dec", "torch_sdpa", "torch_batched"):
        row = case["rows"][name]
        assert row["status"] == "ok", (name, row)
        assert row["ms"] > 0
        assert row["err"] < bench_mixed.MISMATCH_TOL, (name, row["err"])
    assert case["speedup"]["ma_split"]["ma_split"] == pytest.approx(1.0)
    # Each of our rows records its plan's launch decisions.
    plans = {name: case["rows"][name]["plan"] for name in ("ma_split", "ma_fold", "ma_auto")}
    assert plans["ma_split"]["mode"] == "split" and plans["ma_fold"]["mode"] == "fold"
    assert plans["ma_auto"]["mode"] == case["rows"]["ma_auto"]["chose"]["mode"]
    assert all(p["extend_leave_sms"] >= 0 for p in plans.values())
    # A row whose plan left SMs to the decode says how many in its note; one that left none does not.
    assert bench_mixed.row_note("ma_split", {"plan": {"extend_leave_sms": 33}}) == "33 SMs left to the decode"
    assert bench_mixed.row_note("ma_split", {"plan": {"extend_leave_sms": 0}}) == ""
    chose = case["rows"]["ma_auto"]["chose"]  # the plan's choice and its two estimates
    assert chose["mode"] in ("split", "fold") and chose["est_split_us"] > 0 and chose["est_fold_us"] > 0
    assert data["plan_timing"]["rows"][-1]["rows"] == 256
    assert data["plan_timing"]["rows"][-1]["wrapper_split_us"] > 0
    text = md.read_text()
    assert "commit: `test`" in text and "ma_split ms (%floor)" in text
    assert "plan() on the host" in text
    # --from-json renders the same markdown from the saved run, running nothing.
    md2 = tmp_path / "bm2.md"
    bench_mixed.main(["--from-json", str(js), "--markdown", str(md2)])
    assert md2.read_text() == text


def test_serve_replay_quick_cpu(tmp_path, capsys):
    js, md = tmp_path / "sr.json", tmp_path / "sr.md"
    rc = serve_replay.main(["--quick", "--cpu", "--json", str(js), "--markdown", str(md),
                            "--commit", "test"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "NO GPU" in out
    data = json.loads(js.read_text())
    got = {(r["trace"], r["mode"]): r for r in data["results"]}
    assert set(got) == {(t, m) for t in ("burst", "poisson", "trickle") for m in ("split", "fold")}
    for key, r in got.items():
        assert r["status"] == "ok", (key, r)
        m = r["metrics"]
        assert not m["truncated"] and m["finished"] == m["requests"], key
        assert m["served_tok_s"] > 0 and m["ttft_p95_ms"] >= m["ttft_p50_ms"] > 0
        assert m["itl_p95_ms"] >= m["itl_p50_ms"] > 0
    # Same requests in both modes: the same tokens are generated.
    for t in ("burst", "poisson", "trickle"):
        assert (got[(t, "split")]["metrics"]["generated_tokens"] ==
                got[(t, "fold")]["metrics"]["generated_tokens"])
    assert got[("burst", "split")]["metrics"]["mixed_step_share"] > 0
    assert "split relative to fold" in md.read_text()


def test_serve_replay_best_mode_tallies_every_step(tmp_path):
    # Mode "best" times each step both ways and charges the faster, mode "auto" runs what the
    # plan chose: every step of a replay is counted once under its kind, and both generate the
    # same tokens as the single modes.
    js = tmp_path / "sr.json"
    rc = serve_replay.main(["--quick", "--cpu", "--modes", "split,best,auto", "--traces", "burst",
                            "--json", str(js), "--markdown", str(tmp_path / "sr.md"), "--commit", "test"])
    assert rc == 0
    got = {r["mode"]: r["metrics"] for r in json.loads(js.read_text())["results"]}
    best, split = got["best"], got["split"]
    assert best["generated_tokens"] == split["generated_tokens"]
    choice = best["per_step_choice"]
    assert set(choice) == set(best["step_kinds"])
    for kind, tally in choice.items():
        assert set(tally) == {"split", "fold"}
        assert sum(tally.values()) == best["step_kinds"][kind]["steps"], kind
    assert "per_step_choice" not in split
    auto = got["auto"]
    assert auto["generated_tokens"] == split["generated_tokens"]
    for kind, tally in auto["per_step_choice"].items():
        assert sum(tally.values()) == auto["step_kinds"][kind]["steps"], kind
    text = (tmp_path / "sr.md").read_text()
    assert "relative to split" in text and "auto relative to best" in text


def test_serve_replay_two_stream_step_matches_split():
    # split2s runs a step's extend rows and decode rows as two batches on two wrappers: the same
    # attention as one split step over the whole batch (CPU op; on a GPU the halves run on two streams).
    import mixed_attn
    import torch

    cfg = serve_replay.config_for(serve_replay.parse_args(["--quick", "--cpu"]), False)
    dev = torch.device("cpu")
    one, two = (serve_replay.Engine(mixed_attn, cfg, m, dev) for m in ("split", "split2s"))
    reqs = [serve_replay.Request(i, 0.0, 40, 4) for i in range(4)]
    pages = torch.randperm(cfg.num_pages, generator=torch.Generator().manual_seed(5)).to(torch.int32)
    for i, r in enumerate(reqs):
        r.pages = pages[8 * i:8 * i + 8]
    # a prompt chunk, a prompt's first chunk, then two decode rows (one token each, placed last)
    rows = [(reqs[0], 16, 20), (reqs[1], 0, 9), (reqs[2], 30, 1), (reqs[3], 21, 1)]
    T = 20 + 9 + 1 + 1
    for eng in (one, two):
        eng.out.fill_(float("nan"))
        eng.step(rows)
    assert torch.isfinite(two.out[:T].float()).all()
    torch.testing.assert_close(two.out[:T].float(), one.out[:T].float(), atol=2e-2, rtol=2e-2)


def test_page_allocator_and_scheduler_accounting():
    alloc = serve_replay.PageAllocator(10, seed=1)
    a = alloc.alloc(4)
    assert len(set(a.tolist())) == 4 and alloc.alloc(7) is None
    alloc.release(a)
    assert sorted(alloc.free) == list(range(10))
    cfg = serve_replay.Config(prompt_median=50, prompt_min=10, prompt_max=60, output_median=5,
                              output_min=2, output_max=9)
    tr = serve_replay.make_trace("poisson", 20, 100.0, cfg, seed=3)
    assert all(10 <= p <= 60 and 2 <= o <= 9 for _, p, o in tr)
    assert all(x[0] <= y[0] for x, y in zip(tr, tr[1:]))


def test_bench_plan_host_quick_cpu(tmp_path, capsys):
    md = tmp_path / "plan.md"
    assert bench_plan_host.main(["--device", "cpu", "--calls", "20", "--breakdown",
                                 "--markdown", str(md)]) == 0
    lines = md.read_text().splitlines()
    assert lines[0].startswith("| wrapper | step | wrapper µs |") and len(lines) == 2 + 2 * 4
    assert all(float(x) > 0 for line in lines[2:] for x in line.strip("|").split("|")[2:])


def test_bench_transformers_tiny(tmp_path):
    """benchmarks/bench_transformers.py --tiny runs end to end on the CPU; fp32 tokens identical.
    Needs the transformers version tests/test_transformers_integration.py pins."""
    transformers = pytest.importorskip("transformers")
    import mixed_attn.integrations.transformers as ma_tf

    if ma_tf._version_tuple(transformers.__version__) not in ma_tf.SUPPORTED_VERSIONS:
        pytest.skip(f"transformers {transformers.__version__} is installed; the adapter supports 5.17.x")
    import bench_transformers

    md, js = tmp_path / "bt.md", tmp_path / "bt.json"
    rc = bench_transformers.main(["--tiny", "--cpu", "--impls", "mixed_attn,sdpa",
                                  "--markdown", str(md), "--json", str(js)])
    assert rc == 0
    text = md.read_text()
    assert "| paged\\|mixed_attn |" in text and "| paged\\|sdpa |" in text
    ident = json.loads(js.read_text())["identity"]
    assert ident["frac_identical_requests"] == 1.0 and not ident["suspect_divergences"]


def test_bench_transformers_adjudicate_finds_a_planted_wrong_token():
    """The fp32 adjudication of bench_transformers: at a planted divergence where the 'mixed' run
    took a non-argmax token, fp32 prefers the reference token by a clear gap with no low-precision
    error (fp32 model), so the divergence is not called unresolvable; at a real tie it would be."""
    transformers = pytest.importorskip("transformers")
    import mixed_attn.integrations.transformers as ma_tf

    if ma_tf._version_tuple(transformers.__version__) not in ma_tf.SUPPORTED_VERSIONS:
        pytest.skip(f"transformers {transformers.__version__} is installed; the adapter supports 5.17.x")
    import torch

    import bench_transformers as bt
    a = bt.parse_args(["--tiny", "--cpu"])
    model = bt.build_model(a, torch.device("cpu"), torch.float32)
    model.set_attn_implementation("sdpa")
    prompts = bt.make_prompts(a, 3, 5)
    ref, got = [], []
    for p in prompts:
        ids = list(p)
        with torch.no_grad():
            for _ in range(4):
                ids.append(int(model(input_ids=torch.tensor([ids])).logits[0, -1].argmax()))
        toks = ids[len(p):]
        ref.append((toks, []))
        got.append((toks, []))
    with torch.no_grad():
        lp = torch.log_softmax(model(input_ids=torch.tensor([prompts[1] + ref[1][0][:2]])).logits[0, -1], -1)
    worst = int(lp.argmin())
    got[1] = (ref[1][0][:2] + [worst, 0], [])
    firsts = bt.first_divergences(ref, got)
    assert firsts == [{"request": 1, "step": 2}]
    adj = bt.adjudicate(model, prompts, ref, got, firsts, torch.float32)
    r = adj["divergences"][0]
    assert r["token_ref"] == ref[1][0][2] and r["token_mixed"] == worst
    assert r["gap_fp32"] > 1.0 and r["err_lowp"] < 1e-6 and not r["unresolvable"]
    assert r["fp32_argmax_is"] == "ref" and adj["fp32_prefers_mixed"] == 0


def test_serve_replay_split_leave0_mode_leaves_no_sms(tmp_path):
    # Mode split_leave0 is split with extend_leave_sms=0 (the halves one after the other), beside
    # split's policy (-1): the same requests generate the same tokens.
    import mixed_attn
    from mixed_attn import plan_info

    cfg = serve_replay.config_for(serve_replay.parse_args(["--quick", "--cpu"]), False)
    leave = plan_info.CONFIG_INDEX["extend_leave_sms"]
    for mode, want in (("split", -1), ("split_leave0", 0)):
        w = serve_replay.Engine(mixed_attn, cfg, mode, torch.device("cpu")).wrappers[mode]
        assert w.mode == "split" and w._config[leave] == want, mode
    js = tmp_path / "sr.json"
    rc = serve_replay.main(["--quick", "--cpu", "--modes", "split,split_leave0", "--traces", "burst",
                            "--json", str(js), "--markdown", str(tmp_path / "sr.md"), "--commit", "test"])
    assert rc == 0
    got = {r["mode"]: r for r in json.loads(js.read_text())["results"]}
    assert got["split_leave0"]["status"] == "ok"
    assert got["split_leave0"]["metrics"]["generated_tokens"] == got["split"]["metrics"]["generated_tokens"]


@pytest.mark.parametrize("page_size,heads,head_dim,dtype", [(16, 1, 128, torch.bfloat16), (1, 8, 128, torch.bfloat16),
                                                             (16, 2, 64, torch.float8_e4m3fn)])
def test_paged_read_ceiling_reads_every_named_page(page_size, heads, head_dim, dtype):
    # The paged-read ceiling (bench_decode's `paged` row) reads exactly the K and V pages the index
    # list names: each program's wrapped int32 sum equals the sum of its pages' words, and the
    # byte count is theirs (triton interpreted on the CPU: small pools).
    pytest.importorskip("triton")
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    g = torch.Generator().manual_seed(3)
    num_pages = 37
    shape = (num_pages, page_size, heads, head_dim * torch.empty(0, dtype=dtype).element_size())  # bytes
    k = torch.randint(0, 256, shape, generator=g, dtype=torch.uint8).view(dtype).to(dev)
    v = torch.randint(0, 256, shape, generator=g, dtype=torch.uint8).view(dtype).to(dev)
    idx = torch.randperm(num_pages, generator=g)[:29].to(torch.int32)  # some pages of the pool, unordered
    fn, out, nbytes = common.paged_read_fn(k, v, idx.to(dev))
    out.fill_(-1)
    fn()
    page_bytes = page_size * heads * head_dim * k.element_size()
    assert nbytes == 2 * idx.numel() * page_bytes
    words = page_bytes // 4
    kw = k.cpu().contiguous().view(torch.uint8).reshape(num_pages, -1).view(torch.int32).to(torch.int64)
    vw = v.cpu().contiguous().view(torch.uint8).reshape(num_pages, -1).view(torch.int32).to(torch.int64)
    assert kw.shape[1] == words
    per_prog = max(1, 32768 // words)
    got = out.cpu().to(torch.int64)
    assert got.numel() == -(-idx.numel() // per_prog)
    for p in range(got.numel()):
        pages = idx[p * per_prog:(p + 1) * per_prog].long()
        want = int((kw[pages].sum() + vw[pages].sum()) % (1 << 32))
        assert int(got[p]) % (1 << 32) == want, f"program {p}"
