"""Wrapper guarantees on the GPU: plan() never syncs and makes one H2D copy; run() allocates
nothing across steps of changing composition; CUDA-graph capture and replay; CUDA vs CPU op."""

import pytest
import torch

import mixed_attn
from helpers import assert_close_to_reference, run_op, run_reference
from mixed_attn import MixedAttention
from mixed_attn.testing import make_batch, poison_like

pytestmark = pytest.mark.skipif(
    not (torch.cuda.is_available() and mixed_attn.has_cuda_kernels()),
    reason="needs a CUDA GPU and a build with the CUDA kernels")

GEO = dict(num_qo_heads=32, num_kv_heads=8, head_dim=128, page_size=16)


def steps(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    for i in range(n):
        nd = int(torch.randint(1, 64, (1,), generator=g))
        ne = int(torch.randint(0, 3, (1,), generator=g))
        ext = [int(x) for x in torch.randint(2, 300, (ne,), generator=g)] + [1] * nd
        pre = [int(x) for x in torch.randint(0, 3000, (ne + nd,), generator=g)]
        yield ext, pre


def test_plan_does_not_sync_and_copies_once():
    w = MixedAttention(device="cuda", max_batch=128, max_tokens=2048, **GEO)
    ext, pre = next(steps(1))
    b = make_batch(ext, pre, **GEO, device="cuda")
    w.plan(b.qo_indptr, b.kv_indptr, b.seq_lens)  # warm-up
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            w.plan(b.qo_indptr, b.kv_indptr, b.seq_lens)
            torch.cuda.synchronize()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    names = [e.name for e in prof.events()]
    h2d = [n for n in names if "HtoD" in n or "Memcpy HtoD" in n]
    assert len(h2d) == 1, names
    assert not any("DtoH" in n for n in names), names


def test_run_allocates_nothing_across_changing_steps():
    w = MixedAttention(device="cuda", max_batch=128, max_tokens=2048, **GEO)
    batches = [make_batch(e, p, **GEO, device="cuda", seed=i) for i, (e, p) in enumerate(steps(6))]
    outs = [torch.empty_like(b.q) for b in batches]
    for b, o in zip(batches, outs):  # warm-up: first launches may allocate library state
        w.plan(b.qo_indptr, b.kv_indptr, b.seq_lens)
        w.run(b.q, b.k_cache, b.v_cache, b.kv_indices, out=o)
    torch.cuda.synchronize()
    before = torch.cuda.memory_stats()["allocation.all.allocated"]
    for _ in range(3):
        for b, o in zip(batches, outs):
            w.plan(b.qo_indptr, b.kv_indptr, b.seq_lens)
            for _layer in range(4):
                w.run(b.q, b.k_cache, b.v_cache, b.kv_indices, k=b.k, v=b.v, out=o)
    torch.cuda.synchronize()
    assert torch.cuda.memory_stats()["allocation.all.allocated"] == before


def test_cuda_graph_capture_and_replay():
    b = make_batch([37, 1, 1, 1], [100, 700, 33, 2000], **GEO, device="cuda", seed=3)
    # Graph-safe mode (tests/test_graph_mode.py has the re-plan and replay cases).
    w = MixedAttention(device="cuda", max_batch=8, max_tokens=b.q.shape[0], cuda_graph=True, **GEO)
    w.plan(b.qo_indptr, b.kv_indptr, b.seq_lens)
    kc, vc = b.k_cache.clone(), b.v_cache.clone()
    out = poison_like(b.q)
    lse = torch.empty(b.q.shape[0], b.q.shape[1], device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        w.run(b.q, kc, vc, b.kv_indices, k=b.k, v=b.v, out=out, lse=lse)  # warm-up, not captured
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        w.run(b.q, kc, vc, b.kv_indices, k=b.k, v=b.v, out=out, lse=lse)
    out.fill_(float("nan"))
    lse.fill_(float("nan"))
    g.replay()
    torch.cuda.synchronize()
    ro, rl, *_ = run_reference(b)
    assert_close_to_reference(out, lse, ro, rl, torch.bfloat16)


@pytest.mark.parametrize("mode", ["split", "fold"])
def test_cuda_matches_cpu_op(mode):
    ext, pre = [1, 54, 97, 1, 1, 613], [7, 0, 31, 2, 999, 5]
    geo = dict(num_qo_heads=8, num_kv_heads=2, head_dim=128, page_size=16)
    b = make_batch(ext, pre, **geo, seed=5)
    cpu_out, cpu_lse, *_ = run_op(b, mode=mode)
    bg = b.to("cuda")  # the same values on the GPU
    gpu_out, gpu_lse, kc, vc, w = run_op(bg, mode=mode)
    assert w.last_path == mode
    assert (gpu_out.float().cpu() - cpu_out.float()).abs().max() < 2e-2
    assert (gpu_lse.cpu() - cpu_lse).abs().max() < 1e-3
