"""The user-facing API: a wrapper built once per model, plan() once per step, run() per layer.

    w = MixedAttention(num_qo_heads=32, num_kv_heads=8, head_dim=128, page_size=16, device="cuda")
    w.plan(qo_indptr, kv_indptr, seq_lens)          # host int32 tensors or lists, once per step
    for layer in layers:
        out = w.run(q, k_cache, v_cache, kv_indices, k=k_new, v=v_new, out=out_buf)

plan() reads host lengths only (no device sync, no device-to-host copy) and makes exactly one
host-to-device copy: the step's metadata buffer. run() allocates nothing when `out` (and `lse`)
are given: the decode mid-buffers are row slices of an arena allocated when the wrapper is built.
"""

import logging
import math

import torch

from . import _ops  # registers torch.ops.mixed_attn
from . import env as _env
from . import buildinfo as _buildinfo
from . import plan_info as _pi

logger = logging.getLogger("mixed_attn")

SPLIT_DISPATCH_ENV = "MIXED_ATTN_SPLIT_DISPATCH"
_MODES = {name: value for value, name in enumerate(_pi.MODE_NAMES)}
_logged_paths = set()


def split_dispatch_enabled():
    """False when MIXED_ATTN_SPLIT_DISPATCH=0 (read once, at import) forces fold dispatch."""
    return _env.SPLIT_DISPATCH


def _choice(value, table, name):
    if value not in table:
        raise ValueError(f"mixed_attn: {name} must be one of {sorted(table)}, got {value!r}")
    return table[value]


def _log_path_once(path, detail):
    if path not in _logged_paths:
        _logged_paths.add(path)
        logger.info("mixed_attn: first use of the %s path (%s)", path, detail)


def _host_int32(x, name):
    if type(x) is torch.Tensor:
        if not x.is_cpu:
            raise ValueError(
                f"mixed_attn.plan: {name} must be a host tensor or a list (planning never reads "
                f"device memory), got a tensor on {x.device}")
        if x.dtype is torch.int32 and x.is_contiguous():
            return x  # the common case costs nothing
        return x.to(torch.int32).contiguous()
    return torch.tensor(list(x), dtype=torch.int32)


class MixedAttention:
    """Mixed prefill+decode attention over a paged KV cache.

    Args:
        num_qo_heads, num_kv_heads, head_dim, page_size: model and cache geometry.
        device: where q, the caches and the outputs live ("cuda", "cpu", ...).
        q_dtype: dtype of q, k, v and out (bf16 or fp16; fp32 on the CPU).
        kv_dtype: cache dtype: q_dtype (default) or torch.float8_e4m3fn.
        max_batch, max_tokens: sizes the metadata buffers and the arena are built for.
        window_left, logit_cap, sm_scale: attention options fixed for the model.
        deterministic: fixed-size decode splits (fixed_split_tokens keys each), so a
            decode row's output is bitwise identical alone and in any batch.
        mode: "split" (default; MIXED_ATTN_MODE sets another), "fold" or "auto". "auto" plans each step split or fold,
            whichever the planner's step-cost estimate finds faster (fold wins where the decode
            rows are few and short next to a large extend half); the plan records the choice
            and both estimates (plan_info fields mode, est_split_ns, est_fold_ns). Graph-safe
            and deterministic wrappers plan "auto" as "split" always (neither the captured
            geometry nor a decode row's bits may depend on the batch).
            MIXED_ATTN_SPLIT_DISPATCH=0 forces "fold".
        max_splits_per_row: cap of the SM-aware split policy; sizes the arena.
        num_sms: streaming multiprocessors the split policy fills (read off the GPU by default).
        min_split_tokens, ctas_per_sm: the SM-aware policy never splits finer than
            min_split_tokens keys and aims for ctas_per_sm decode CTAs per SM.
        validate: check page ids on the host before each run (syncs; for debugging).
        extend_backend: "auto" (the sm_90a kernel on H100/H200 builds with sm_90a, else the
            portable one), "mma" (the portable mma.sync / MFMA kernel) or "sm90".
        decode_backend: "auto", "tensor_core" (CUDA), "tensor_core_narrow" (CUDA, rows of at most 8
            (query, head) pairs of a kv head: decode_max_q x group <= 8) or "portable" (matrix-free stage 1).
        extend_kv_splits: 0 lets the plan split extend tiles' K/V over a 2-CTA cluster when its
            step-cost estimate says the split launch is faster (few long tiles; never in
            deterministic or graph-safe mode); 1 or 2 fixes it.
        extend_tma: None (policy: cp.async), False (cp.async only) or True (TMA for interior K/V tiles;
            sm_90a kernel, pages of a multiple of 16 slots, 16-bit caches).
        extend_persistent: None (policy: sm_90a extend launches whose tiles are not KV-split run
            persistent, about one CTA per SM each serving a share of the (tile, head group)
            items, unless the plan's estimate finds one CTA per item clearly faster), False (one
            CTA per item) or True (persistent always).
        extend_item_parts: None (policy: where the plan's estimate finds it faster, a persistent
            sm_90a launch runs its costliest (tile, head group) items in 2-4 parts each over a
            share of their keys, merged through the arena by whichever part finishes last; never
            in deterministic or graph-safe mode), 1 (never) or 2-4 (every item of a persistent
            launch in that many parts; tests and benchmarks).
        extend_block_rows: None (policy: the sm_90a kernel at head dim 128 with a 16-bit cache
            has tiles of 192 query rows and of 128; a step takes 128 where the plan's estimate
            finds it faster, e.g. many extend rows of a few dozen tokens, or a short prefill
            chunk over no prefix (a few hundred tokens); never in deterministic
            or graph-safe mode) or the rows of a tile the kernel has (an error elsewhere).
        cuda_graph: graph-safe mode for serving engines that capture run() once per batch
            bucket and replay it after every plan(): the launch geometry, the metadata layout
            and the arena depend only on the bucket (max_batch rows, max_tokens tokens,
            max_extend_tokens of them in extend-kernel rows, max_partials decode splits), the
            kernels read the step's counts from the device metadata, and tokens past the
            step's are not written. A plan that does not fit the bucket (or the tensors a
            capture was made with) is an error naming the limit, raised before anything is
            uploaded. Without it, capturing run() is refused (the normal launch geometry is
            the plan's own).
        max_extend_tokens: graph buckets: tokens in rows the extend kernel serves (default
            max_tokens; 0 for a decode-only bucket, so no extend CTAs are captured).
        max_partials: graph buckets: decode arena slots (query tokens x KV splits) the arena
            holds (default: the bound of the split policy for max_batch rows).
        decode_max_q: rows of at most this many new tokens (decode, speculative verify) run on
            the split-KV decode kernels, their queries x the GQA group packed into the decode
            tile, causal among the row's own tokens; longer rows on the extend kernel. 0 (the
            default) lets the launch policy choose from the group size (`launch_policy`); 1
            sends only one-token rows to the decode kernels; at most 16.
        pdl: None (policy: beside the sm_90a extend kernel), False or True (CUDA GPUs of compute
            capability 9.0+; an error below): the decode's stage 1 launches as the programmatic
            dependent of the extend kernel (its CTAs take the SMs the extend's last CTAs leave
            idle) and the merge as stage 1's (programmatic dependent launch;
            csrc/cuda/common/pdl.cuh).
        decode_kv_pack: None (policy: 2 on the tensor_core kernel at head dim 64 with a 16-bit
            cache), 1 or 2: kv heads one decode CTA reads. With 2 a step whose kv heads pair up
            and whose decode rows' pairs of two heads fit one 16-row MMA block (plain decode
            rows up to a GQA group of 8) reads two adjacent kv heads' 128-wide rows as one
            (launch_policy.h, decode_step_kv_pack); plan_info's decode_kv_pack says what a step
            took. An error at other head dims or kernels, or with an odd num_kv_heads.
        extend_leave_sms: None (policy: a split step on the sm_90a kernel whose decode half
            outweighs its extend leaves some SMs to the decode where the planner's estimate finds
            the two halves side by side faster; plan_info's extend_ctas says what a step took),
            0 (never) or N: the sm_90a extend launch runs persistent on at most num_sms - N
            CTAs, never KV-split, its cut items and estimate planned for those SMs, so that N
            SMs are free from its start for the decode's stage 1 launched after it (with pdl).
            An error where the launch cannot be persistent. Deterministic and graph-safe plans
            leave none unless N is given.
        decode_first: None (the policy: per step, where the planner's estimate finds it faster, a
            small extend beside a large decode), False (the extend launches first) or True
            (wherever a step allows it). The order: where a split step's decode rows have one
            split each and the plan is not graph-safe, the decode's stage 1 launches first and
            the extend as its programmatic dependent, on the SMs the decode's last wave leaves;
            plan_info's decode_first says what a step took. True needs programmatic launches
            (pdl, compute capability 9.0+) and excludes extend_leave_sms=N; the results are the
            same bits in either order.
        The six policy overrides default to the MIXED_ATTN_* variables of mixed_attn/env.py. Every launch
        decision is made by the planner and recorded in the plan (`launch_policy`, and per
        step `plan_launch`); an override the device cannot honour is an error here.
    """

    def __init__(self, num_qo_heads, num_kv_heads, head_dim, page_size, device="cuda",
                 q_dtype=torch.bfloat16, kv_dtype=None, max_batch=256, max_tokens=16384,
                 window_left=-1, logit_cap=0.0, sm_scale=None, deterministic=False, mode=None,
                 max_splits_per_row=32, fixed_split_tokens=2048, num_sms=None, validate=False,
                 min_split_tokens=256, ctas_per_sm=2, extend_backend=None, decode_backend=None,
                 extend_kv_splits=None, extend_tma=None, cuda_graph=False, extend_persistent=None,
                 max_extend_tokens=None, max_partials=None, decode_max_q=0, extend_item_parts=None,
                 pdl=None, extend_block_rows=None, decode_kv_pack=None, extend_leave_sms=None,
                 decode_first=None):
        if mode is None:
            mode = _env.MODE
        if mode not in _MODES:
            raise ValueError(f"mixed_attn: mode must be 'split', 'fold' or 'auto', got {mode!r}")
        if num_qo_heads % num_kv_heads != 0:
            raise ValueError(f"mixed_attn: num_qo_heads ({num_qo_heads}) must be a multiple of "
                             f"num_kv_heads ({num_kv_heads})")
        self.device = torch.device(device)
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        if self.device.type == "cuda":
            # No kernels for this GPU's arch in the build: a clear error now, not a failed launch.
            _buildinfo.check_device(self.device)
        self.num_qo_heads, self.num_kv_heads = num_qo_heads, num_kv_heads
        self.head_dim, self.page_size = head_dim, page_size
        self.q_dtype = q_dtype
        self.kv_dtype = kv_dtype or q_dtype
        self.window_left = int(window_left)
        self.logit_cap = float(logit_cap)
        self.sm_scale = float(sm_scale) if sm_scale is not None else 1.0 / math.sqrt(head_dim)
        self.deterministic = bool(deterministic)
        self.fixed_split_tokens = int(fixed_split_tokens)
        self.max_splits_per_row = int(max_splits_per_row)
        self.min_split_tokens, self.ctas_per_sm = int(min_split_tokens), int(ctas_per_sm)
        self.validate = validate
        self.forced_fold = mode != "fold" and not split_dispatch_enabled()
        self.mode = "fold" if self.forced_fold else mode
        if self.forced_fold:
            logger.info("mixed_attn: %s=0 forces fold dispatch", SPLIT_DISPATCH_ENV)
        extend_backend = _env.EXTEND_KERNEL if extend_backend is None else extend_backend
        decode_backend = _env.DECODE_KERNEL if decode_backend is None else decode_backend
        extend_kv_splits = _env.EXTEND_KV_SPLITS if extend_kv_splits is None else int(extend_kv_splits)
        if extend_tma is None:
            extend_tma = _env.EXTEND_TMA
        if extend_persistent is None:
            extend_persistent = _env.EXTEND_PERSISTENT
        if extend_item_parts is None:
            extend_item_parts = _env.EXTEND_ITEM_PARTS
        if pdl is None:
            pdl = _env.PDL
        # The CPU implementation has no kernel families: "auto" there.
        on_cpu = self.device.type == "cpu"
        self._config = _pi.make_config(
            self.device, page_size, num_qo_heads, num_kv_heads, head_dim, num_sms=num_sms,
            window_left=self.window_left, mode=_MODES[self.mode], deterministic=self.deterministic,
            fixed_split_tokens=self.fixed_split_tokens, max_splits_per_row=self.max_splits_per_row,
            min_split_tokens=self.min_split_tokens, ctas_per_sm=self.ctas_per_sm,
            kv_fp8=self.kv_dtype == torch.float8_e4m3fn,
            extend_kernel=0 if on_cpu else _choice(extend_backend, _env.EXTEND_KERNELS, "extend_backend"),
            decode_kernel=0 if on_cpu else _choice(decode_backend, _env.DECODE_KERNELS, "decode_backend"),
            extend_kv_splits=extend_kv_splits, extend_tma=int(extend_tma), decode_max_q=int(decode_max_q),
            extend_persistent=int(extend_persistent), extend_item_parts=int(extend_item_parts), pdl=int(pdl),
            extend_block_rows=int(extend_block_rows or 0), decode_kv_pack=int(decode_kv_pack or 0),
            extend_leave_sms=-1 if extend_leave_sms is None else int(extend_leave_sms),
            decode_first=-1 if decode_first is None else int(bool(decode_first)),
            **self._graph_fields(cuda_graph, max_batch, max_tokens, max_extend_tokens, max_partials))
        self.cuda_graph = bool(cuda_graph)
        self.num_sms = self._config[_pi.CONFIG_INDEX["num_sms"]]
        (kernel, rows, pack, tile, tma, dkernel, graph_tiles,
         graph_partials, dmq, persistent, max_parts, _) = torch.ops.mixed_attn.launch_policy(self._config)
        self.launch_policy = {
            "extend_kernel": _pi.EXTEND_KERNEL_NAMES[kernel], "extend_block_rows": rows,
            "extend_pack": pack, "extend_tile_tokens": tile, "extend_tma": bool(tma),
            "extend_persistent": bool(persistent), "extend_max_item_parts": max_parts,
            "decode_kernel": _pi.DECODE_KERNEL_NAMES[dkernel], "decode_max_q": dmq}
        self.decode_max_q = dmq
        self.extend_tile_tokens = tile
        if self.cuda_graph:
            self.launch_policy.update(graph_max_tiles=graph_tiles, graph_max_partials=graph_partials)

        self.max_batch, self.max_tokens = int(max_batch), int(max_tokens)
        self._alloc_meta(self.max_batch, self.max_tokens)
        self.partial_out = self.partial_lse = None
        self.arena_slots = 0
        if self.mode != "fold":
            # A graph bucket's arena is its bound, fixed (captured pointers never move).
            self._alloc_arena(max(1, graph_partials) if self.cuda_graph
                              else self.max_batch * self.max_splits_per_row)
        # Graph mode: the smallest kv_indices a capture of this wrapper was made with (the
        # planner refuses plans that would index past it in a replay).
        self.captured_kv_indices = None
        self._plan_upload = torch.ops.mixed_attn.plan_upload.default
        self._config_t = torch.tensor(self._config, dtype=torch.int64)  # plan_upload's form
        self._i_partials = _pi.INDEX["num_partials"]
        self._i_mode = _pi.INDEX["mode"]
        # plan()'s one call for host int32 tensors (None: the regular op call, same results).
        self._fast_plan = _ops.FASTPLAN.plan_upload if _ops.FASTPLAN is not None else None
        self._fast_rows = (1 << 62) if self.cuda_graph else self.max_batch  # more: grow first

        self.plan_info = None
        self.last_path = None
        self.h2d_copies = 0  # one per plan(): the metadata upload
        self.arena_grows = 0

    def _graph_fields(self, cuda_graph, max_batch, max_tokens, max_extend_tokens, max_partials):
        if not cuda_graph:
            return {}
        # Allowed on the CPU too: the same bucket layout and limits (no capture there).
        if max_extend_tokens is None or self.mode == "fold":
            max_extend_tokens = max_tokens
        return dict(graph_safe=1, graph_max_rows=int(max_batch), graph_max_tokens=int(max_tokens),
                    graph_max_extend_tokens=int(max_extend_tokens),
                    graph_max_partials=int(max_partials or 0))

    # -- buffers ---------------------------------------------------------------------------
    def _alloc_meta(self, max_batch, max_tokens):
        # Room for the tiles of the smallest shape a step may take and for the counters of cut
        # extend items where the policy may cut them.
        cap = _pi.meta_capacity(self._config, max_batch, max_tokens)
        pin = self.device.type == "cuda"
        # Two pinned host buffers used in turn (plan_upload keeps the event of each one's last
        # copy), so a plan never overwrites host memory that a still queued copy reads from.
        self._meta_host = [torch.empty(cap, dtype=torch.int32, pin_memory=pin) for _ in range(2)]
        self._meta_turn = 0
        self.plan_meta = torch.empty(cap, dtype=torch.int32, device=self.device)

    def _alloc_arena(self, slots):
        self.arena_slots = int(slots)
        self.partial_out = torch.empty(slots, self.num_qo_heads, self.head_dim,
                                       dtype=torch.float32, device=self.device)
        self.partial_lse = torch.empty(slots, self.num_qo_heads, dtype=torch.float32,
                                       device=self.device)

    # -- plan ------------------------------------------------------------------------------
    def plan(self, qo_indptr, kv_indptr, seq_lens):
        """Plans one step from host lengths: qo_indptr [B+1], kv_indptr [B+1] (pages), seq_lens [B]."""
        # The common case (contiguous host int32 tensors, a step that fits the buffers) in one
        # call; anything else (lists, other dtypes, a step that grows the buffers, an error,
        # raised there) takes _plan, which makes the regular op call.
        fast = self._fast_plan
        if fast is None:
            return self._plan(qo_indptr, kv_indptr, seq_lens)
        turn = self._meta_turn
        info = fast(qo_indptr, kv_indptr, seq_lens, self._meta_host[turn], self.plan_meta,
                    self._config_t, self._fast_rows)
        if info is None:
            return self._plan(qo_indptr, kv_indptr, seq_lens)
        self._meta_turn = turn ^ 1
        self.h2d_copies += 1
        if info[self._i_partials] > self.arena_slots:
            self._grow_arena(info[self._i_partials])
        self.plan_info = info
        return info

    def _plan(self, qo_indptr, kv_indptr, seq_lens):
        qo = _host_int32(qo_indptr, "qo_indptr")
        kv = _host_int32(kv_indptr, "kv_indptr")
        sl = _host_int32(seq_lens, "seq_lens")
        if qo.numel() - 1 > self.max_batch and not self.cuda_graph:
            self._grow_meta(qo)  # graph buckets never grow: the planner names the limit
        # Two pinned host buffers used in turn; plan_upload waits (only when the GPU is two
        # whole steps behind the host) for the last copy out of the one it writes.
        turn = self._meta_turn
        try:
            # Plans into the pinned host buffer and makes the step's one host-to-device copy.
            # A rejected plan (an error naming the limit) uploads nothing.
            info = self._plan_upload(qo, kv, sl, self._meta_host[turn], self.plan_meta, self._config_t)
        except RuntimeError as e:
            if self.cuda_graph or "metadata needs" not in str(e):  # more tokens than max_tokens
                raise
            self._grow_meta(qo)
            turn = self._meta_turn
            info = self._plan_upload(qo, kv, sl, self._meta_host[turn], self.plan_meta, self._config_t)
        self._meta_turn = turn ^ 1
        self.h2d_copies += 1
        need = info[self._i_partials]
        if need > self.arena_slots:  # never in graph mode (bounded)
            self._grow_arena(need)
        self.plan_info = info
        return info

    def _grow_arena(self, need):
        logger.warning("mixed_attn: the plan needs %d arena slots (decode splits, cut extend items), the arena "
                       "holds %d: "
                       "growing it once (size max_batch / max_splits_per_row for your traffic)",
                       need, self.arena_slots)
        self._alloc_arena(max(need, 2 * self.arena_slots))
        self.arena_grows += 1

    def _grow_meta(self, qo):
        B, T = qo.numel() - 1, int(qo[-1])
        logger.warning("mixed_attn: step of %d rows / %d tokens exceeds the configured "
                       "max_batch=%d / max_tokens=%d: growing the metadata buffers once",
                       B, T, self.max_batch, self.max_tokens)
        self.max_batch, self.max_tokens = max(B, self.max_batch), max(T, self.max_tokens)
        self._fast_rows = self.max_batch
        self._alloc_meta(self.max_batch, self.max_tokens)

    # -- run -------------------------------------------------------------------------------
    def run(self, q, k_cache, v_cache, kv_indices, k=None, v=None, out=None, lse=None,
            return_lse=False, sinks=None, k_scale=1.0, v_scale=1.0):
        """One layer of the planned step. k, v given: the new tokens are saved into the cache first.

        Returns out, or (out, lse) when return_lse or lse is given. Pass `out` (and `lse`) to
        allocate nothing.
        """
        if self.plan_info is None:
            raise RuntimeError("mixed_attn: run() called before plan()")
        if out is None:
            out = torch.empty_like(q)
        if lse is None and return_lse:
            lse = torch.empty(q.shape[0], self.num_qo_heads, dtype=torch.float32, device=q.device)
        if self.validate:
            self._check_page_ids(kv_indices, k_cache.shape[0])
        if self.cuda_graph and q.is_cuda and torch.cuda.is_current_stream_capturing():
            n = kv_indices.numel()
            self.captured_kv_indices = n if self.captured_kv_indices is None else min(n, self.captured_kv_indices)
            self._config[_pi.CONFIG_INDEX["graph_max_kv_pages"]] = self.captured_kv_indices
            self._config_t[_pi.CONFIG_INDEX["graph_max_kv_pages"]] = self.captured_kv_indices
        torch.ops.mixed_attn.forward(
            q, k, v, k_cache, v_cache, kv_indices, self.plan_meta, self.plan_info,
            self.partial_out, self.partial_lse, out, lse, sinks, self.sm_scale, self.logit_cap,
            self.window_left, float(k_scale), float(v_scale))
        self.last_path = self.mode if self.mode != "auto" else _pi.MODE_NAMES[self.plan_info[self._i_mode]]
        if self.last_path == "split":
            _log_path_once("split", "extend rows -> extend kernel, decode rows -> split-KV decode")
        else:
            _log_path_once("fold", "every row -> extend kernel"
                           + (f" ({SPLIT_DISPATCH_ENV}=0)" if self.forced_fold else ""))
        return (out, lse) if lse is not None else out

    def _check_page_ids(self, kv_indices, num_pages):
        """Validation mode: page ids in range (reads kv_indices on the host: syncs)."""
        used = kv_indices[: _pi.field(self.plan_info, "num_kv_pages")]
        if used.numel():
            lo, hi = int(used.min()), int(used.max())
            if lo < 0 or hi >= num_pages:
                raise ValueError(f"mixed_attn.run: kv_indices holds page id {lo if lo < 0 else hi}, "
                                 f"outside the cache's {num_pages} pages")

    @property
    def plan_launch(self):
        """The launch decisions of the current plan (kernels, tile, KV splits, TMA)."""
        return _pi.launch_summary(self.plan_info) if self.plan_info else None

    @property
    def num_decode_rows(self):
        return _pi.field(self.plan_info, "num_decode_rows") if self.plan_info else 0


def mixed_attention(q, k, v, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices, seq_lens,
                    page_size, sm_scale=None, logit_cap=0.0, window_left=-1, sinks=None,
                    k_scale=1.0, v_scale=1.0, mode=None, deterministic=False, out=None,
                    return_lse=False):
    """One-shot form: plans and runs one mixed step (host qo_indptr / kv_indptr / seq_lens)."""
    qo = _host_int32(qo_indptr, "qo_indptr")
    w = MixedAttention(q.shape[1], k_cache.shape[2], q.shape[2], page_size, device=q.device,
                       q_dtype=q.dtype, kv_dtype=k_cache.dtype, max_batch=qo.numel() - 1,
                       max_tokens=q.shape[0], window_left=window_left, logit_cap=logit_cap,
                       sm_scale=sm_scale, deterministic=deterministic, mode=mode)
    w.plan(qo, kv_indptr, seq_lens)
    return w.run(q, k_cache, v_cache, kv_indices, k=k, v=v, out=out, return_lse=return_lse,
                 sinks=sinks, k_scale=k_scale, v_scale=v_scale)
