"""Random mixed batches over a scattered paged cache, for tests and benchmarks."""

from dataclasses import dataclass, field

import torch

from .reference import FP8, quantize_fp8


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


def make_batch(extend_lens, prefix_lens, num_qo_heads, num_kv_heads, head_dim, page_size,
               dtype=torch.bfloat16, kv_dtype=None, device="cpu", seed=0, spare_pages=3,
               k_scale=1.0, v_scale=1.0):
    """A batch whose row b has extend_lens[b] new tokens over prefix_lens[b] cached ones.

    Pages are scattered at random over a pool with `spare_pages` unused pages; every cache slot
    (cached prefix and the new tokens' slots alike) holds random data, so a missing KV save or a
    wrong page shows up. fp8 caches hold randn values quantised with the given scales.
    """
    assert len(extend_lens) == len(prefix_lens)
    g = torch.Generator().manual_seed(seed)
    kv_dtype = kv_dtype or dtype
    seq = [e + p for e, p in zip(extend_lens, prefix_lens)]
    qo, kvp = [0], [0]
    for e, s in zip(extend_lens, seq):
        qo.append(qo[-1] + e)
        kvp.append(kvp[-1] + (s + page_size - 1) // page_size)
    num_pages = kvp[-1] + spare_pages
    kv_indices = torch.randperm(num_pages, generator=g)[: kvp[-1]].to(torch.int32)
    T = qo[-1]

    def randn(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float32)

    q = randn(T, num_qo_heads, head_dim).to(dtype)
    k = randn(T, num_kv_heads, head_dim).to(dtype)
    v = randn(T, num_kv_heads, head_dim).to(dtype)
    shape = (num_pages, page_size, num_kv_heads, head_dim)
    if kv_dtype == FP8:
        k_cache = quantize_fp8(randn(*shape), k_scale)
        v_cache = quantize_fp8(randn(*shape), v_scale)
    else:
        k_cache = randn(*shape).to(kv_dtype)
        v_cache = randn(*shape).to(kv_dtype)
    dev = torch.device(device)
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

    def _config(self, page_size, hq, hkv, d, **fields):
        from .plan_info import make_config

        return make_config(self.device, page_size, hq, hkv, d, **{**self.request, **fields})

    def tile_tokens(self, head_dim, group):
        return int(torch.ops.mixed_attn.launch_policy(self._config(16, group, 1, head_dim))[3])

    def plan(self, qo_indptr, kv_indptr, seq_lens, page_size, hq, hkv, d, window_left=-1,
             mode=1, tile_tokens=None, deterministic=False, **request):
        qo = torch.tensor(qo_indptr, dtype=torch.int32)
        cfg = self._config(page_size, hq, hkv, d, window_left=window_left, mode=mode,
                           deterministic=deterministic, extend_tile_tokens=tile_tokens or 0, **request)
        tt = int(torch.ops.mixed_attn.launch_policy(cfg)[3])
        cap = torch.ops.mixed_attn.plan_meta_capacity(len(seq_lens), int(qo[-1]), tt)
        meta = torch.zeros(cap, dtype=torch.int32)
        info = torch.ops.mixed_attn.plan(qo, torch.tensor(kv_indptr, dtype=torch.int32),
                                         torch.tensor(seq_lens, dtype=torch.int32), meta, cfg)
        return info, meta.to(self.device)

    def run(self, info, meta, q, k_cache, v_cache, kv_indices, out, lse=None, sinks=None,
            sm_scale=None, logit_cap=0.0, window_left=-1, k_scale=1.0, v_scale=1.0, stream=None):
        if sm_scale is None:
            sm_scale = q.shape[-1] ** -0.5
        with torch.cuda.stream(stream or torch.cuda.current_stream()):
            torch.ops.mixed_attn.forward(q, None, None, k_cache, v_cache, kv_indices, meta, info, None,
                                         None, out, lse, sinks, sm_scale, logit_cap, window_left,
                                         k_scale, v_scale)
