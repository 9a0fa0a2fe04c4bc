"""Batches for tests and benchmarks, and the op driven below the wrapper.

The one place that builds a batch's indptrs, page tables and paged caches: `batch_indptrs` (host
lengths only), `random_kv_cache` (a pool of random pages) and `make_batch` (a random mixed batch
over a scattered paged cache, on the device it is drawn on). Tests and benchmarks name their
cases in thin wrappers over these.
"""

from dataclasses import dataclass, field

import torch

from .reference import FP8, quantize_fp8


def batch_indptrs(extend_lens, prefix_lens, page_size, tensors=False):
    """(qo_indptr, kv_indptr, seq_lens) of a batch whose row b has extend_lens[b] new tokens over
    prefix_lens[b] cached ones; kv_indptr counts pages. Python lists, or host int32 tensors."""
    assert len(extend_lens) == len(prefix_lens)
    qo, kv, seq = [0], [0], []
    for e, p in zip(extend_lens, prefix_lens):
        s = int(e) + int(p)
        seq.append(s)
        qo.append(qo[-1] + int(e))
        kv.append(kv[-1] + -(-s // page_size))
    if tensors:
        return tuple(torch.tensor(x, dtype=torch.int32) for x in (qo, kv, seq))
    return qo, kv, seq


def _normal(shape, generator, dtype, std=1.0):
    """randn values in dtype, drawn on the generator's device. On the CPU (and for fp8) float32
    draws are cast to dtype; on a GPU other dtypes are drawn in place (no float32 copy of a cache
    of many GB)."""
    dev = generator.device
    if dev.type == "cpu" or dtype == FP8:
        x = torch.randn(shape, generator=generator, dtype=torch.float32, device=dev)
        return (x * std if std != 1.0 else x).to(dtype)
    return torch.empty(shape, dtype=dtype, device=dev).normal_(0.0, std, generator=generator)


def random_kv_cache(num_pages, page_size, num_kv_heads, head_dim, kv_dtype, generator, k_scale=1.0,
                    v_scale=1.0, std=1.0):
    """(k_cache, v_cache) [num_pages, page_size, Hkv, D] of randn * std values (never zeros),
    drawn on the generator's device; an fp8 cache holds them quantised with the given scales."""
    shape = (num_pages, page_size, num_kv_heads, head_dim)
    if kv_dtype == FP8:
        return tuple(quantize_fp8(_normal(shape, generator, torch.float32, std), s)
                     for s in (k_scale, v_scale))
    return tuple(_normal(shape, generator, kv_dtype, std) for _ in range(2))


def _unused_slots(kv_indices, kv_indptr, seq_lens, num_pages, page_size):
    """Bool [num_pages, page_size]: the cache slots no row's keys live in."""
    unused = torch.ones(num_pages, page_size, dtype=torch.bool)
    idx = kv_indices.cpu().long()
    unused[idx] = False
    n = kv_indptr[1:] - kv_indptr[:-1]
    rows = n > 0
    last = idx[(kv_indptr[1:] - 1)[rows].long()]
    fill = (seq_lens - (n - 1) * page_size)[rows]
    tail = torch.arange(page_size)[None, :] >= fill[:, None]
    unused[last] |= tail
    return unused


@dataclass
class MixedBatch:
    q: torch.Tensor            # [T, Hq, D]
    k: torch.Tensor            # [T, Hkv, D] new tokens' keys
    v: torch.Tensor            # [T, Hkv, D]
    k_cache: torch.Tensor      # [num_pages, page_size, Hkv, D]
    v_cache: torch.Tensor
    kv_indices: torch.Tensor   # [kv_indptr[-1]] int32, on the device
    qo_indptr: torch.Tensor    # [B+1] int32, host
    kv_indptr: torch.Tensor    # [B+1] int32, host
    seq_lens: torch.Tensor     # [B] int32, host
    page_size: int
    extend_lens: list = field(default_factory=list)
    prefix_lens: list = field(default_factory=list)

    @property
    def num_rows(self):
        return len(self.extend_lens)

    def to(self, device):
        """The same batch (same values) with its device tensors on `device`."""
        dev = torch.device(device)
        return MixedBatch(self.q.to(dev), self.k.to(dev), self.v.to(dev), self.k_cache.to(dev),
                          self.v_cache.to(dev), self.kv_indices.to(dev), self.qo_indptr,
                          self.kv_indptr, self.seq_lens, self.page_size, list(self.extend_lens),
                          list(self.prefix_lens))


def make_batch(extend_lens, prefix_lens, num_qo_heads, num_kv_heads, head_dim, page_size,
               dtype=torch.bfloat16, kv_dtype=None, device="cpu", seed=0, generator=None,
               spare_pages=3, num_pages=None, kv_cache=None, k_scale=1.0, v_scale=1.0,
               cache_std=1.0, poison_unused=False):
    """A batch whose row b has extend_lens[b] new tokens over prefix_lens[b] cached ones.

    Rows keep the given order. Pages are scattered at random over a pool of `num_pages` pages
    (default: the pages the rows need plus `spare_pages` unused ones), or over a given pool
    `kv_cache=(k_cache, v_cache)`, which is used as it is (no cache is drawn). Every drawn cache
    slot (cached prefix and the new tokens' slots alike) holds randn * cache_std values, so a
    missing KV save or a wrong page shows up; fp8 caches hold them quantised with the given
    scales. poison_unused=True fills the slots no row covers with NaN instead (a kernel reading
    a key outside its row fails).

    Values are drawn from `generator` (any device), else from a generator on `device` seeded with
    `seed` (a GPU fills gigabytes in milliseconds), in this order: page table, q, k, v, k_cache,
    v_cache; then moved to `device`. Indptrs and seq_lens stay on the host.
    """
    dev = torch.device(device)
    g = generator
    if g is None:
        g = torch.Generator(device=dev)
        g.manual_seed(seed)
    qo, kvp, seq = batch_indptrs(extend_lens, prefix_lens, page_size)
    if kv_cache is not None:
        kv_dtype = kv_cache[0].dtype
        num_pages = kv_cache[0].shape[0]
    kv_dtype = kv_dtype or dtype
    num_pages = kvp[-1] + spare_pages if num_pages is None else num_pages
    if kvp[-1] > num_pages:
        raise ValueError(f"the rows need {kvp[-1]} pages, over the pool's {num_pages}")
    kv_indices = torch.randperm(num_pages, generator=g, device=g.device)[: kvp[-1]].to(torch.int32)
    T = qo[-1]
    q = _normal((T, num_qo_heads, head_dim), g, dtype)
    k = _normal((T, num_kv_heads, head_dim), g, dtype)
    v = _normal((T, num_kv_heads, head_dim), g, dtype)
    if kv_cache is None and not poison_unused:
        k_cache, v_cache = random_kv_cache(num_pages, page_size, num_kv_heads, head_dim, kv_dtype, g,
                                           k_scale, v_scale, std=cache_std)
    elif kv_cache is None:
        k_cache, v_cache = random_kv_cache(num_pages, page_size, num_kv_heads, head_dim,
                                           torch.float32, g, std=cache_std)
        unused = _unused_slots(kv_indices, torch.tensor(kvp), torch.tensor(seq), num_pages,
                               page_size).to(g.device)
        k_cache[unused] = float("nan")
        v_cache[unused] = float("nan")
        if kv_dtype == FP8:
            k_cache, v_cache = quantize_fp8(k_cache, k_scale), quantize_fp8(v_cache, v_scale)
        else:
            k_cache, v_cache = k_cache.to(kv_dtype), v_cache.to(kv_dtype)
    else:
        k_cache, v_cache = kv_cache
    return MixedBatch(
        q=q.to(dev), k=k.to(dev), v=v.to(dev), k_cache=k_cache.to(dev), v_cache=v_cache.to(dev),
        kv_indices=kv_indices.to(dev),
        qo_indptr=torch.tensor(qo, dtype=torch.int32), kv_indptr=torch.tensor(kvp, dtype=torch.int32),
        seq_lens=torch.tensor(seq, dtype=torch.int32), page_size=page_size,
        extend_lens=list(extend_lens), prefix_lens=list(prefix_lens))


def poison_like(x):
    """An output buffer filled with NaN, so an element the kernel forgot to write fails."""
    return torch.full_like(x, float("nan"))


class OpPlan:
    """A plan made through the public op with every policy knob exposed, for kernel-level tests
    and micro-benchmarks: `info` (plan_info), `meta` (device metadata), `meta_host` (a host copy
    for inspection), and the counts tests look at."""

    def __init__(self, qo_indptr, kv_indptr, seq_lens, page_size, num_qo_heads, num_kv_heads,
                 head_dim, device="cuda", **policy):
        from .plan_info import field
        from .wrapper import MixedAttention

        qo = torch.as_tensor(qo_indptr, dtype=torch.int32)
        self.wrapper = MixedAttention(num_qo_heads, num_kv_heads, head_dim, page_size, device=device,
                                      max_batch=qo.numel() - 1, max_tokens=int(qo[-1]), **policy)
        self.info = self.wrapper.plan(qo, kv_indptr, seq_lens)
        self.meta = self.wrapper.plan_meta
        self.meta_host = self.meta[: field(self.info, "meta_len")].cpu()
        self.num_partials = field(self.info, "num_partials")
        self.max_splits = field(self.info, "max_splits")
        self.num_decode_rows = field(self.info, "num_decode_rows")


def op_forward(plan, q, k_cache, v_cache, kv_indices, out, lse=None, sinks=None, partial_out=None,
               partial_lse=None, sm_scale=None, logit_cap=0.0, window_left=-1, k_scale=1.0,
               v_scale=1.0, k=None, v=None):
    """torch.ops.mixed_attn.forward on an OpPlan, with caller-owned arena slices."""
    if sm_scale is None:
        sm_scale = q.shape[-1] ** -0.5
    torch.ops.mixed_attn.forward(q, k, v, k_cache, v_cache, kv_indices, plan.meta, plan.info,
                                 partial_out, partial_lse, out, lse, sinks, sm_scale, logit_cap,
                                 window_left, k_scale, v_scale)


class OpExtend:
    """The extend kernel alone through torch.ops.mixed_attn, for kernel tests and benchmarks:
    plans with the real planner (fold mode: every row is an extend-kernel row) and runs forward
    with no KV save and no arena. `request` holds launch-policy overrides applied to every plan
    (config field names: extend_kernel=1 for the mma.sync kernel, extend_kv_splits=N, ...)."""

    def __init__(self, device="cuda"):
        self.device = torch.device(device)
        self.request = {}
        self._arena = None

    def _config(self, page_size, hq, hkv, d, **fields):
        from .plan_info import make_config

        return make_config(self.device, page_size, hq, hkv, d, **{**self.request, **fields})

    def tile_tokens(self, head_dim, group):
        return int(torch.ops.mixed_attn.launch_policy(self._config(16, group, 1, head_dim))[3])

    def plan(self, qo_indptr, kv_indptr, seq_lens, page_size, hq, hkv, d, window_left=-1,
             mode=1, tile_tokens=None, deterministic=False, **request):
        """(plan_info, device metadata) of a fold-mode plan (by default) with these overrides."""
        qo, kv, sl = (torch.as_tensor(x, dtype=torch.int32) for x in (qo_indptr, kv_indptr, seq_lens))
        cfg = self._config(page_size, hq, hkv, d, window_left=window_left, mode=mode,
                           deterministic=deterministic, extend_tile_tokens=tile_tokens or 0, **request)
        return self._plan(qo, kv, sl, cfg)

    def _plan(self, qo, kv, sl, cfg):
        from .plan_info import meta_capacity

        cap = meta_capacity(cfg, sl.numel(), int(qo[-1]))
        meta = torch.zeros(cap, dtype=torch.int32)
        info = torch.ops.mixed_attn.plan(qo, kv, sl, meta, cfg)
        return info, meta.to(self.device)

    def arena(self, info, q):
        """The arena slices a plan needs (plans with cut extend items park their parts there), or
        (None, None): one arena, grown when a plan needs more."""
        from .plan_info import field

        slots = field(info, "num_partials")
        if slots == 0:
            return None, None
        a = self._arena
        if a is None or a[0].shape[0] < slots or a[0].shape[1:] != q.shape[1:] or a[0].device != q.device:
            self._arena = (torch.empty(slots, q.shape[1], q.shape[2], dtype=torch.float32, device=q.device),
                           torch.empty(slots, q.shape[1], dtype=torch.float32, device=q.device))
        return self._arena[0][:slots], self._arena[1][:slots]

    def run(self, info, meta, q, k_cache, v_cache, kv_indices, out, lse=None, sinks=None,
            sm_scale=None, logit_cap=0.0, window_left=-1, k_scale=1.0, v_scale=1.0, stream=None):
        if sm_scale is None:
            sm_scale = q.shape[-1] ** -0.5
        partial_out, partial_lse = self.arena(info, q)
        args = (q, None, None, k_cache, v_cache, kv_indices, meta, info, partial_out, partial_lse, out, lse, sinks,
                sm_scale, logit_cap, window_left, k_scale, v_scale)
        # No stream context unless asked for: entering one costs ~15 us of host time a call, more
        # than the op's own (~10 us on an H100; tools/pending/host_time.py), and bench_extend's
        # small cases are timed through here.
        if stream is None:
            torch.ops.mixed_attn.forward(*args)
        else:
            with torch.cuda.stream(stream):
                torch.ops.mixed_attn.forward(*args)
