"""Graph-safe mode (MixedAttention(cuda_graph=True)): the serving engine's loop of capture once per
batch bucket, re-plan every step, refill the static buffers in place, replay.

CPU part (CI): the bucket layout (offsets that never move), padded tokens left unwritten, the
same bits as a normal plan, and the out-of-bucket errors raised before anything is uploaded. GPU
part: capture, then replays after plans of other lengths, split counts, row counts below the
bucket, decode-only and mixed steps, page sizes 1 and 16, fp8 caches; every replay against the
fp64 reference, deterministic replays bitwise against an eager run; normal plans refuse capture.
"""

import pytest
import torch

import mixed_attn
from helpers import TOL
from mixed_attn import MixedAttention
from mixed_attn.plan_info import field
from mixed_attn.reference import FP8, reference_forward
from mixed_attn.testing import batch_indptrs, make_batch, random_kv_cache

HAVE_GPU = torch.cuda.is_available() and mixed_attn.has_cuda_kernels()
needs_gpu = pytest.mark.skipif(not HAVE_GPU, reason="needs a CUDA GPU and a build with the CUDA kernels")
OFFSETS = [n for n in mixed_attn.plan_info.FIELDS if n.startswith("off_")]


class Engine:
    """Static buffers of one bucket, as an engine keeps them, and one cache pool."""

    def __init__(self, device, hq, hkv, d, page, max_batch, max_tokens, max_pages, pool_pages,
                 kv_dtype=None, seed=0, **wrapper_kw):
        self.device, self.hq, self.hkv, self.d, self.page = torch.device(device), hq, hkv, d, page
        self.dtype = torch.bfloat16
        self.kv_dtype = kv_dtype or self.dtype
        self.k_scale, self.v_scale = (0.5, 2.0) if self.kv_dtype == FP8 else (1.0, 1.0)
        g = torch.Generator().manual_seed(seed)
        self.gen = g
        kc, vc = random_kv_cache(pool_pages, page, hkv, d, self.kv_dtype, g, self.k_scale, self.v_scale)
        self.pool0 = (kc, vc)  # host copies: the cache before every step
        self.k_cache, self.v_cache = kc.to(self.device), vc.to(self.device)
        self.pool_pages = pool_pages
        T = max_tokens
        nan = float("nan")
        self.q = torch.full((T, hq, d), nan, dtype=self.dtype, device=self.device)
        self.k = torch.full((T, hkv, d), nan, dtype=self.dtype, device=self.device)
        self.v = torch.full((T, hkv, d), nan, dtype=self.dtype, device=self.device)
        self.out = torch.full((T, hq, d), nan, dtype=self.dtype, device=self.device)
        self.lse = torch.full((T, hq), nan, dtype=torch.float32, device=self.device)
        self.kv_indices = torch.zeros(max_pages, dtype=torch.int32, device=self.device)
        self.sinks = torch.randn(hq, generator=g).to(self.device)
        self.wrapper = MixedAttention(hq, hkv, d, page, device=self.device, q_dtype=self.dtype,
                                      kv_dtype=self.kv_dtype, max_batch=max_batch,
                                      max_tokens=max_tokens, cuda_graph=True, **wrapper_kw)

    def step(self, ext, pre):
        """Fills the static buffers with a fresh step in place; returns its host description."""
        b = make_batch(ext, pre, self.hq, self.hkv, self.d, self.page, dtype=self.dtype,
                       generator=self.gen, kv_cache=self.pool0)
        T, q, k, v = b.q.shape[0], b.q, b.k, b.v
        P = b.kv_indices.numel()
        for buf, x in ((self.q, q), (self.k, k), (self.v, v)):
            buf.fill_(float("nan"))
            buf[:T].copy_(x[: buf.shape[0]])  # a step over the bucket: only for its error test
        n = min(P, self.kv_indices.numel())  # more only in the test of that error
        self.kv_indices[:n].copy_(b.kv_indices[:n])
        self.k_cache.copy_(self.pool0[0])
        self.v_cache.copy_(self.pool0[1])
        self.out.fill_(float("nan"))
        self.lse.fill_(float("nan"))
        return dict(qo=b.qo_indptr, kvp=b.kv_indptr, seq=b.seq_lens, kv_indices=b.kv_indices, q=q, k=k,
                    v=v, T=T)

    def run(self):
        self.wrapper.run(self.q, self.k_cache, self.v_cache, self.kv_indices, k=self.k, v=self.v,
                         out=self.out, lse=self.lse, sinks=self.sinks, k_scale=self.k_scale,
                         v_scale=self.v_scale)

    def check(self, st):
        T = st["T"]
        ro, rl = reference_forward(st["q"], st["k"], st["v"], self.pool0[0], self.pool0[1], st["qo"],
                                   st["seq"], st["kvp"], st["kv_indices"], self.page,
                                   sinks=self.sinks.cpu(), k_scale=self.k_scale,
                                   v_scale=self.v_scale)[:2]
        out, lse = self.out[:T].double().cpu(), self.lse[:T].double().cpu()
        assert not torch.isnan(out).any(), "unwritten output rows"
        rel = (out - ro).norm() / ro.norm()
        assert rel <= TOL[self.dtype][0] * (3 if self.kv_dtype == FP8 else 1), f"relative error {rel:.3g}"
        assert (lse - rl).abs().max() <= 1e-3 * (3 if self.kv_dtype == FP8 else 1)
        # Padding past the step's tokens is never written.
        assert torch.isnan(self.out[T:]).all() and torch.isnan(self.lse[T:]).all()


def steps_decode(rng_seed, n_rows, lo, hi):
    g = torch.Generator().manual_seed(rng_seed)
    pre = [int(x) for x in torch.randint(lo, hi, (n_rows,), generator=g)]
    return [1] * n_rows, pre


# ------------------------------------------------------------------------------------ CPU --


def test_bucket_layout_is_fixed_and_padding_unwritten_cpu():
    e = Engine("cpu", 4, 2, 64, 16, max_batch=6, max_tokens=80, max_pages=64, pool_pages=80)
    offsets, lengths = None, set()
    for ext, pre in (([1, 1, 1], [5, 90, 300]), ([30, 1, 1, 1, 1], [0, 7, 70, 200, 33]), ([1], [500])):
        st = e.step(ext, pre)
        info = e.wrapper.plan(st["qo"], st["kvp"], st["seq"])
        assert field(info, "graph_safe") == 1
        now = [field(info, n) for n in OFFSETS]
        assert offsets is None or now == offsets, "a bucket's metadata offsets moved"
        offsets = now
        e.run()
        e.check(st)
        lengths.add(field(info, "meta_len"))
    assert len(lengths) == 1, "a bucket's plans upload the same layout"


def test_graph_plan_gives_the_bits_of_a_normal_plan_cpu():
    e = Engine("cpu", 4, 2, 64, 16, max_batch=6, max_tokens=80, max_pages=64, pool_pages=80,
               deterministic=True, fixed_split_tokens=64)
    st = e.step([17, 1, 1], [40, 300, 9])
    e.wrapper.plan(st["qo"], st["kvp"], st["seq"])
    e.run()
    graph_out = e.out[: st["T"]].clone()
    w = MixedAttention(4, 2, 64, 16, device="cpu", q_dtype=torch.bfloat16, max_batch=3, max_tokens=19,
                       deterministic=True, fixed_split_tokens=64)
    w.plan(st["qo"], st["kvp"], st["seq"])
    kc, vc = e.pool0[0].clone(), e.pool0[1].clone()
    out = torch.full_like(st["q"], float("nan"))
    w.run(st["q"], kc, vc, st["kv_indices"], k=st["k"], v=st["v"], out=out, sinks=e.sinks)
    assert torch.equal(out, graph_out)


@pytest.mark.parametrize("what,ext,pre,match", [
    ("rows", [1] * 7, [10] * 7, "7 rows, over the graph bucket's max_batch = 6"),
    ("tokens", [70, 20], [0, 0], "90 tokens, over the graph bucket's max_tokens = 80"),
    ("extend tokens", [30, 1], [0, 5],
     "30 tokens in extend-kernel rows, over the graph bucket's max_extend_tokens = 16"),
    ("partials", [1, 1], [3000, 3000],
     "arena slots .query tokens x KV splits., over the graph bucket.s max_partials = 3"),
])
def test_out_of_bucket_plans_are_errors_and_upload_nothing_cpu(what, ext, pre, match):
    e = Engine("cpu", 4, 2, 64, 16, max_batch=6, max_tokens=80, max_pages=512, pool_pages=600,
               max_extend_tokens=16, max_partials=3, deterministic=True, fixed_split_tokens=256)
    st = e.step([1, 1], [5, 9])
    e.wrapper.plan(st["qo"], st["kvp"], st["seq"])
    before = e.wrapper.plan_meta.clone()
    copies = e.wrapper.h2d_copies
    st = e.step(ext, pre)
    with pytest.raises(RuntimeError, match=match):
        e.wrapper.plan(st["qo"], st["kvp"], st["seq"])
    assert torch.equal(e.wrapper.plan_meta, before) and e.wrapper.h2d_copies == copies


def test_graph_bucket_arena_is_the_policy_bound():
    w = MixedAttention(32, 8, 128, 16, device="cpu", max_batch=256, max_tokens=256, cuda_graph=True,
                       max_extend_tokens=0, decode_max_q=1)
    # 256 rows plus the SM-aware policy's 132 * 2 / 8 extra splits; no extend tiles at all.
    assert w.launch_policy["graph_max_partials"] == 256 + 33
    assert w.launch_policy["graph_max_tiles"] == 0
    assert w.partial_out.shape[0] == 289
    # Verify rows of up to 8 tokens (group 4: 4 tokens fill one 16-pair block, and the CPU plan
    # serves one block per CTA): the 256 decode tokens plus 4 * 33 extra slots.
    w = MixedAttention(32, 8, 128, 16, device="cpu", max_batch=256, max_tokens=256, cuda_graph=True,
                       max_extend_tokens=0, decode_max_q=8)
    assert w.launch_policy["graph_max_partials"] == 256 + 4 * 33


@pytest.mark.parametrize("decode_max_q", [1, 3, 8, 16])
@pytest.mark.parametrize("deterministic", [False, True])
def test_graph_bucket_partials_bound_holds(decode_max_q, deterministic):
    # Random steps inside the bucket never need more arena slots than the bound (a plan over it
    # would be refused, and the bound is what the captured grid covers).
    import random
    rng = random.Random(decode_max_q)
    w = MixedAttention(32, 8, 128, 16, device="cpu", max_batch=64, max_tokens=512, cuda_graph=True,
                       decode_max_q=decode_max_q, deterministic=deterministic, fixed_split_tokens=4096)
    bound = w.launch_policy["graph_max_partials"]
    worst = 0
    for _ in range(200):
        B = rng.randint(1, 64)
        ext = [rng.randint(1, decode_max_q) for _ in range(B)]
        while sum(ext) > 512:
            ext[rng.randrange(B)] = 1
        pre = [rng.choice([0, 5, 300, 4000, 60000, 100000]) for _ in ext]
        info = w.plan(*batch_indptrs(ext, pre, 16))
        worst = max(worst, field(info, "num_partials"))
    assert worst <= bound


# ------------------------------------------------------------------------------------ GPU --


def capture(e):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        e.run()  # warm-up outside the graph (first launches may set kernel attributes)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        e.run()
    return g


def capture_then_replay(e, plans):
    """Captures e.run() planned for plans[0], then re-plans each of the others (and plans[0]
    again), refills the engine's buffers in place, replays and checks against the reference."""
    st = e.step(*plans[0])
    e.wrapper.plan(st["qo"], st["kvp"], st["seq"])
    g = capture(e)
    for ext, pre in plans[1:] + plans[:1]:
        st = e.step(ext, pre)
        e.wrapper.plan(st["qo"], st["kvp"], st["seq"])
        g.replay()
        torch.cuda.synchronize()
        e.check(st)


@needs_gpu
@pytest.mark.parametrize("page", [1, 16])
@pytest.mark.parametrize("kv", ["bf16", "fp8"])
def test_decode_bucket_replays_after_replans(page, kv):
    # The engine's failure this mode exists for: capture at 100-300 context, re-plan at 20k-30k
    # (rows now split), refill in place, replay.
    pages = 260000 // page
    e = Engine("cuda", 16, 2, 128, page, max_batch=64, max_tokens=64, max_pages=pages,
               pool_pages=pages + 8, kv_dtype=FP8 if kv == "fp8" else None,
               max_extend_tokens=0, seed=1)
    st = e.step(*steps_decode(0, 4, 100, 300))
    e.wrapper.plan(st["qo"], st["kvp"], st["seq"])
    g = capture(e)
    for seed, (n, lo, hi) in enumerate([(4, 20000, 30000), (64, 1, 4000), (1, 5, 6), (17, 2000, 9000)]):
        st = e.step(*steps_decode(seed + 1, n, lo, hi))
        info = e.wrapper.plan(st["qo"], st["kvp"], st["seq"])
        if n == 4:
            assert field(info, "max_splits") > 1, "the long step must split"
        g.replay()
        torch.cuda.synchronize()
        e.check(st)


@needs_gpu
@pytest.mark.parametrize("page", [1, 16])
@pytest.mark.parametrize("kernel", ["auto", "mma"])
def test_mixed_bucket_replays_after_replans(page, kernel):
    e = Engine("cuda", 8, 2, 128, page, max_batch=16, max_tokens=700, max_pages=16 * 9000 // page,
               pool_pages=16 * 9000 // page + 8, seed=2, extend_backend=kernel)
    plans = [([200, 1, 1], [100, 50, 3000]), ([1] * 10 + [333, 97], [4000] * 10 + [0, 5000]),
             ([650, 1], [2000, 8000]), ([1, 1, 1], [7, 8000, 20]), ([5, 9, 1, 300], [0, 1, 2, 3])]
    capture_then_replay(e, plans)


@needs_gpu
@pytest.mark.parametrize("page", [1, 16])
@pytest.mark.parametrize("backend", ["tensor_core", "portable"])
def test_verify_bucket_replays_after_replans(page, backend):
    # Speculative-verify steps (rows of 2-16 tokens on the decode kernels) in one captured bucket:
    # the captured grid covers the bucket's slots and (query, head) blocks; replays with other
    # row lengths, splits and orders.
    pages = 16 * 12000 // page
    e = Engine("cuda", 16, 2, 128, page, max_batch=16, max_tokens=256, max_pages=pages,
               pool_pages=pages + 8, seed=6, decode_max_q=16, decode_backend=backend)
    plans = [([4] * 4, [100, 200, 300, 50]), ([16, 1, 7, 2, 16], [11000, 5, 3000, 0, 60]),
             ([1] * 8 + [3] * 8, [9000] * 8 + [20] * 8), ([40, 16, 2], [500, 8000, 10000]),
             ([5], [0])]
    capture_then_replay(e, plans)


@needs_gpu
@pytest.mark.parametrize("page", [1, 16])
@pytest.mark.parametrize("d", [128, 256])
def test_narrow_decode_bucket_replays_after_replans(page, d):
    # The narrow stage 1 (forced at 128; the default at 256) in one captured bucket: one-token
    # and two-token rows (8 pairs at group 4) next to extend rows, re-planned with other lengths,
    # splits and orders.
    pages = 16 * 9000 // page
    e = Engine("cuda", 8, 2, d, page, max_batch=16, max_tokens=400, max_pages=pages, pool_pages=pages + 8,
               seed=7, decode_backend="tensor_core_narrow" if d == 128 else None)
    plans = [([1, 2, 1, 120], [100, 50, 3000, 7]), ([2] * 6 + [1] * 6, [8000] * 6 + [30] * 6),
             ([1, 300, 2], [2, 0, 8500]), ([2, 1], [1, 8900]), ([40, 3], [0, 9])]
    capture_then_replay(e, plans)
    assert field(e.wrapper.plan_info, "decode_kernel") == 4


@needs_gpu
def test_deterministic_replay_is_bitwise_an_eager_run():
    e = Engine("cuda", 8, 2, 128, 16, max_batch=16, max_tokens=400, max_pages=2048, pool_pages=2100,
               seed=3, deterministic=True, fixed_split_tokens=1024)
    eager = MixedAttention(8, 2, 128, 16, device="cuda", q_dtype=torch.bfloat16, max_batch=16,
                           max_tokens=400, deterministic=True, fixed_split_tokens=1024)
    st = e.step([1, 1, 120], [100, 900, 30])
    e.wrapper.plan(st["qo"], st["kvp"], st["seq"])
    g = capture(e)
    for ext, pre in (([1] * 6 + [250], [7000, 100, 3, 9000, 2500, 1] + [4000]), ([1, 1], [16000, 5])):
        st = e.step(ext, pre)
        e.wrapper.plan(st["qo"], st["kvp"], st["seq"])
        g.replay()
        torch.cuda.synchronize()
        e.check(st)
        T = st["T"]
        graph_out = e.out[:T].clone()
        e.k_cache.copy_(e.pool0[0])
        e.v_cache.copy_(e.pool0[1])
        eager.plan(st["qo"], st["kvp"], st["seq"])
        out = torch.full_like(e.out[:T], float("nan"))
        eager.run(e.q[:T], e.k_cache, e.v_cache, e.kv_indices, k=e.k[:T], v=e.v[:T], out=out,
                  sinks=e.sinks)
        torch.cuda.synchronize()
        assert torch.equal(out, graph_out)


@needs_gpu
def test_replay_allocates_nothing_and_plan_does_not_sync():
    e = Engine("cuda", 8, 2, 128, 16, max_batch=16, max_tokens=400, max_pages=2048, pool_pages=2100, seed=4)
    st = e.step([1, 1, 120], [100, 900, 30])
    e.wrapper.plan(st["qo"], st["kvp"], st["seq"])
    g = capture(e)
    steps = [e.step([1] * 5 + [90], [300 * i for i in range(1, 6)] + [10]) for _ in range(3)]
    torch.cuda.synchronize()
    before = torch.cuda.memory_stats()["allocation.all.allocated"]
    torch.cuda.set_sync_debug_mode("error")
    try:
        for st in steps:
            e.wrapper.plan(st["qo"], st["kvp"], st["seq"])
            g.replay()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    assert torch.cuda.memory_stats()["allocation.all.allocated"] == before


@needs_gpu
def test_normal_plans_refuse_capture():
    w = MixedAttention(8, 2, 128, 16, device="cuda", max_batch=4, max_tokens=4)
    q = torch.randn(2, 8, 128, device="cuda", dtype=torch.bfloat16)
    kc = torch.randn(8, 16, 2, 128, device="cuda", dtype=torch.bfloat16)
    idx = torch.arange(2, dtype=torch.int32, device="cuda")
    w.plan([0, 1, 2], [0, 1, 2], [5, 9])
    out = torch.full_like(q, float("nan"))
    w.run(q, kc, kc.clone(), idx, out=out)  # eager use is fine
    g = torch.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="not graph-safe"):
        with torch.cuda.graph(g):
            w.run(q, kc, kc.clone(), idx, out=out)


@needs_gpu
def test_replay_needing_more_pages_than_captured_is_an_error():
    e = Engine("cuda", 8, 2, 128, 16, max_batch=4, max_tokens=4, max_pages=100, pool_pages=3000,
               max_extend_tokens=0, seed=5)
    st = e.step([1, 1], [50, 60])
    e.wrapper.plan(st["qo"], st["kvp"], st["seq"])
    capture(e)
    st = e.step([1, 1], [20000, 600])
    copies = e.wrapper.h2d_copies
    with pytest.raises(RuntimeError, match="kv_indices holds 100"):
        e.wrapper.plan(st["qo"], st["kvp"], st["seq"])
    assert e.wrapper.h2d_copies == copies
