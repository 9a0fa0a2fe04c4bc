"""mixed_attn as the attention of Hugging Face transformers' continuous batching.

    import mixed_attn.integrations.transformers as ma_tf
    name = ma_tf.register()                       # "paged|mixed_attn"
    model = AutoModelForCausalLM.from_pretrained(..., attn_implementation=name)
    # or: model.set_attn_implementation(name)
    outputs = model.generate_batch(inputs=prompts, generation_config=gen_cfg)

Supported transformers versions: 5.17.x (SUPPORTED_VERSIONS below). The adapter reads the private
structure of transformers' paged cache and the keyword arguments its continuous-batching loop
passes to paged attention functions; both are internal and changed between 5.x releases, so any
other version is refused at register() with a clear error instead of risking wrong tokens.

What transformers 5.17 passes to a paged attention function, per layer, and how it maps:

- query [1, Hq, T, D], key / value [1, Hkv, T, D]: the step's new tokens, all requests packed.
  They are transposes of [T, H, D] projections, so `x[0].transpose(0, 1)` is a [T, H, D] view with
  a unit last stride, which is all mixed_attn asks: no copy.
- cu_seq_lens_q [B+1] (device int32): qo_indptr. Rows past the real requests may have zero
  length (padding for static shapes); they are dropped from the plan.
- cu_seq_lens_k [B+1] (device int32, or a dict by layer type): per request past + new tokens,
  i.e. mixed_attn's seq_lens.
- read_index / write_index: one int64 tensor per layer group of PHYSICAL token slots in the
  flat per-layer cache [(num_blocks + 2) * block_size, Hkv, D]. For a full-attention group,
  request b's read indices are its whole sequence, position j at
  block_table[j // block_size] * block_size + j % block_size (packed at cu_seq_lens_k[b]);
  its write indices are the same formula for positions past .. past + new - 1. That is exactly
  mixed_attn's paged layout with page_size = block_size, so:
    * the cache tensor viewed as [num_blocks + 2, block_size, Hkv, D] is k_cache / v_cache
      (a view, zero copy);
    * the page id of page p of request b is read_index[cu_seq_lens_k[b] + p * block_size] //
      block_size (the first slot of each page), one gather per step;
    * run(k=, v=) writes the new tokens to the very slots write_index names, so transformers'
      own cache.update() (index_copy_ + index_select of the whole context) is not called.
  When no request of the step has cached tokens, transformers passes an empty read_index; the
  page ids then come from write_index the same way (past is 0, so cu_seq_lens_k == cu_seq_lens_q).
- cache: the PagedAttentionCache (block_size, key_cache / value_cache per layer of a group,
  layer_index_to_group_indices, sliding_windows). Each full-attention group has its own blocks:
  the page starts are computed once per step, the page ids gathered once per group.
- s_aux: gpt-oss's per-head sinks [Hq] -> mixed_attn's `sinks` (fp32), same definition as
  transformers' eager sink path: exp(sink - max) added to the softmax denominator.
- scaling -> sm_scale; softcap (gemma-style) -> logit_cap; sliding_window W -> window_left W - 1.
- block_table: only on transformers' flash-attention decode fast path, which it enables for
  flash implementations only; with this adapter it is always None (checked).

Sliding-window layers: transformers keeps them in a rolling buffer of ceil(W / block_size) blocks
per request, which a prefill chunk overwrites while its own first queries still need the old keys;
mixed_attn saves new tokens before attending, over a position-linear page list, so that buffer
cannot be served in place. For those layers the adapter lets transformers' cache.update() gather
each row's last W - 1 cached tokens plus the new ones (then write the buffer, in its safe order)
and runs mixed_attn over that packed K/V as a page_size-1 cache with the save skipped: at most
W - 1 + new tokens copied per row, the copy paged|sdpa makes too. gpt-oss (alternating sliding
and full layers, sinks on both) is served this way.

One plan per step and layer type: the first layer to run in a step reads the step's lengths to
the host and plans; the other layers find the same metadata objects (the step's cu_seq_lens_q
tensor and write_index list are passed unchanged to every layer) and reuse that plan (one plan for
all full-attention layers, one for all sliding layers).

Refused with an error (never a wrong token):
- CUDA-graph capture of the step (the plan needs host lengths). The default continuous-batching
  config keeps CUDA graphs off for this implementation (transformers turns them on by default
  only for flash implementations), so only an explicit use_cuda_graph=True hits this.
- torch.compile of the forward with fullgraph=True (the attention function is opaque to dynamo).
- head dims other than 64 / 128 / 256 (mixed_attn's kernels), dropout, a block_table.
"""

import math
import weakref

import torch

from .. import env as _env
from .. import wrapper as _wrapper

ATTN_IMPLEMENTATION = "paged|mixed_attn"
# (major, minor) releases whose continuous-batching internals this adapter was written against
# and tested with (tests/test_transformers_integration.py pins 5.17.0).
SUPPORTED_VERSIONS = ((5, 17),)
# Set to 1 to try an unsupported transformers release anyway (a warning is logged); the token
# identity test in tests/test_transformers_integration.py is the way to find out if it works.
ANY_VERSION_ENV = "MIXED_ATTN_TRANSFORMERS_ANY_VERSION"

_options = {"mode": None, "deterministic": False}
# Process-wide counters, for tests and benchmarks: steps planned, host syncs, layer calls, and
# steps that held both decode rows (1 new token) and extend rows (more than 1).
stats = {"steps": 0, "host_syncs": 0, "layer_calls": 0, "mixed_steps": 0, "decode_rows": 0,
         "extend_rows": 0}


def reset_stats():
    for k in stats:
        stats[k] = 0


# Per PagedAttentionCache: its adapter state (wrappers, the current step's plan). Weak keys, so a
# finished generate_batch frees the state with the cache.
_states = weakref.WeakKeyDictionary()


def _version_tuple(v):
    parts = []
    for p in v.split(".")[:2]:
        digits = "".join(ch for ch in p if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def check_version(version=None):
    """Raises RuntimeError unless `version` (default: the installed transformers) is supported."""
    if version is None:
        import transformers
        version = transformers.__version__
    if _version_tuple(version) in SUPPORTED_VERSIONS:
        return version
    supported = ", ".join(f"{a}.{b}.x" for a, b in SUPPORTED_VERSIONS)
    if _env.TRANSFORMERS_ANY_VERSION:
        _wrapper.logger.warning("mixed_attn: transformers %s is not a supported version (%s); "
                                "%s=1 lets it run anyway", version, supported, ANY_VERSION_ENV)
        return version
    raise RuntimeError(
        f"mixed_attn.integrations.transformers supports transformers {supported}, found "
        f"{version}: its paged-attention interface (the kwargs of continuous batching and the "
        f"PagedAttentionCache layout) is internal and changes between releases. Install "
        f"transformers==5.17.0, or set {ANY_VERSION_ENV}=1 to try this version at your own risk "
        f"(then run tests/test_transformers_integration.py against it).")


def register(name=ATTN_IMPLEMENTATION, mode=None, deterministic=False, config=None):
    """Registers mixed_attn with transformers' AttentionInterface; returns the name to pass as
    `attn_implementation`. mode / deterministic go to every MixedAttention the adapter builds
    (mode None: the wrapper's default, MIXED_ATTN_MODE or "split").
    Given a model `config`, also refuses now (check_config) what the first step would refuse."""
    check_version()
    if config is not None:
        check_config(config)
    if not name.startswith("paged|"):
        raise ValueError(f"mixed_attn: name must start with 'paged|' (transformers' continuous "
                         f"batching only passes its paged cache to such names), got {name!r}")
    if "flash" in name:
        raise ValueError(f"mixed_attn: name must not contain 'flash' (transformers then treats it "
                         f"as a flash-attention kernel and takes other code paths), got {name!r}")
    if mode not in (None, "split", "fold", "auto"):
        raise ValueError(f"mixed_attn: mode must be 'split', 'fold' or 'auto', got {mode!r}")
    from transformers import AttentionInterface
    _options["mode"], _options["deterministic"] = mode, bool(deterministic)
    AttentionInterface.register(name, paged_attention_forward)
    return name


def check_config(config):
    """Raises ValueError if a model config has attention this adapter cannot serve."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    heads = getattr(text, "num_attention_heads", None)
    head_dim = getattr(text, "head_dim", None) or (text.hidden_size // heads if heads else None)
    if head_dim not in (64, 128, 256):
        raise ValueError(f"mixed_attn serves head dims 64, 128 and 256; this model's is {head_dim}")
    kv_heads = getattr(text, "num_key_value_heads", None) or heads
    if heads and kv_heads and heads % kv_heads:
        raise ValueError(f"mixed_attn: num_attention_heads ({heads}) must be a multiple of "
                         f"num_key_value_heads ({kv_heads})")
    layer_types = getattr(text, "layer_types", None) or []
    unknown = sorted(set(layer_types) - {"full_attention", "sliding_attention"})
    if unknown:
        raise ValueError(f"mixed_attn serves full and sliding-window attention layers, this model "
                         f"has layer types {unknown}")


class _CacheState:
    """What the adapter keeps per PagedAttentionCache: wrappers and the current step's plan."""

    def __init__(self):
        self.wrappers = {}      # wrapper key (geometry, dtype, scale, cap, window) -> MixedAttention
        self.step_key = None    # (cu_seq_lens_q, write_index list) objects of the planned step
        self.last_layer = -1    # layer_idx of the last run() in this step
        self.host = {}          # layer type -> (qo_indptr, kv_indptr, seq_lens) host int32
        self.num_tokens = 0     # real tokens of the step (qo_indptr[-1])
        self.first_slot = None  # device int64: where each full-attention page starts in the index
        self.use_read = True    # page starts index read_index (else write_index: no past at all)
        self.kv_indices = {}    # full-attention group -> device int32 page ids of the step
        self.planned = set()    # wrapper keys planned for this step
        self.arange = None      # device int32 0, 1, 2, ...: page ids of the packed sliding K/V


def _state(cache):
    st = _states.get(cache)
    if st is None:
        st = _states[cache] = _CacheState()
    return st


def _window(cache, module, kwargs):
    """The layer's sliding window (transformers' convention: a query sees itself and the W - 1
    keys before it), or None for a full-attention layer."""
    w = cache.sliding_windows.get(module.layer_idx, 1)
    w = None if w in (None, 1) else int(w)
    kw = kwargs.get("sliding_window") or getattr(module, "sliding_window", None) or None
    if (kw or None) != w:
        raise ValueError(f"mixed_attn: layer {module.layer_idx} has sliding_window {kw} but the "
                         f"paged cache keeps it as {w or 'full attention'}")
    return w


def _new_step(st, cache, cu_q, cu_k, read_index, write_index, full_group, device):
    """Plans the step's metadata: host lengths, page starts. Called by the first layer of a step."""
    if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
        raise RuntimeError(
            f"{ATTN_IMPLEMENTATION} cannot be captured in a CUDA graph (it plans each step from "
            f"host lengths): use ContinuousBatchingConfig(use_cuda_graph=False)")
    if not isinstance(cu_k, dict):
        cu_k = {"sliding_attention" if cache.num_sliding_attention_groups else "full_attention": cu_k}
    types = sorted(cu_k)
    # THE host synchronisation of the step: transformers builds the step's lengths on the host but
    # hands only device tensors to the attention function, and mixed_attn's planner (like any
    # split-KV planner) needs them on the host. One D2H copy of all cumulative length arrays
    # (a few hundred bytes); it waits for the kernels queued before layer 0's attention
    # (embedding, layer 0's projections), then the host plans and every later layer reuses it.
    lens = torch.cat([cu_q.reshape(-1)] + [cu_k[t].reshape(-1) for t in types]).to("cpu", torch.int64)
    stats["host_syncs"] += 1
    nq = cu_q.numel()
    cq = lens[:nq]
    q_len = cq[1:] - cq[:-1]
    # Padding rows (static-shape padding) have no query tokens and come last: drop them.
    nreal = int((q_len > 0).sum())
    if not bool((q_len[:nreal] > 0).all()):
        raise ValueError("mixed_attn: cu_seq_lens_q has an empty row before a non-empty one")
    q_len = q_len[:nreal]
    qo_indptr = cq[: nreal + 1].to(torch.int32)
    st.host, st.kv_indices, st.planned = {}, {}, set()
    st.num_tokens = int(cq[nreal])
    for n, t in enumerate(types):
        ck = lens[nq * (n + 1): nq * (n + 2)]
        if ck.numel() != nq:
            raise ValueError(f"mixed_attn: cu_seq_lens_k[{t!r}] has {ck.numel()} entries, "
                             f"cu_seq_lens_q {nq}")
        k_len = (ck[1:] - ck[:-1])[:nreal]
        if bool((k_len < q_len).any()):
            raise ValueError(f"mixed_attn: cu_seq_lens_k[{t!r}] gives a row fewer keys than "
                             f"queries (the keys are the row's cached + new tokens)")
        if t == "sliding_attention":
            # Sliding layers attend over transformers' packed [window + new] K/V of the layer
            # (see _run_sliding): one page per token, packed by cu_seq_lens_k.
            st.host[t] = (qo_indptr, ck[: nreal + 1].to(torch.int32), k_len.to(torch.int32))
            continue
        bs = cache.block_size
        pages = (k_len + bs - 1) // bs
        kv_indptr = torch.zeros(nreal + 1, dtype=torch.int64)
        torch.cumsum(pages, 0, out=kv_indptr[1:])
        st.host[t] = (qo_indptr, kv_indptr.to(torch.int32), k_len.to(torch.int32))
        # Where, in the step's flat slot list, each page's first slot is: row start + p *
        # block_size. read_index lists every slot of every row's whole sequence (packed by
        # cu_seq_lens_k); when it is empty no row has a past, and write_index lists the same
        # slots packed by cu_seq_lens_q. All full-attention groups share these positions (each
        # group has its own blocks, so its own page ids: gathered per group in _full_kv_indices).
        st.use_read = read_index[full_group].numel() > 0
        if not st.use_read and bool((k_len != q_len).any()):
            # write_index covers only the new tokens: with a past, page 0 would be misread.
            raise ValueError("mixed_attn: transformers passed no read_index although a row has "
                             "cached tokens (cu_seq_lens_k > cu_seq_lens_q): cannot find its pages")
        src = read_index[full_group] if st.use_read else write_index[full_group]
        starts = ck[:-1] if st.use_read else cq[:-1]
        row_of_page = torch.repeat_interleave(torch.arange(nreal), pages)
        page_in_row = torch.arange(int(kv_indptr[-1])) - kv_indptr[:-1][row_of_page]
        first_slot = starts[:nreal][row_of_page] + page_in_row * bs
        if first_slot.numel() and int(first_slot.max()) >= src.numel():
            raise ValueError(f"mixed_attn: the step's lengths need slot {int(first_slot.max())} "
                             f"of {'read' if st.use_read else 'write'}_index, which has only "
                             f"{src.numel()}")
        if device.type == "cuda":
            first_slot = first_slot.pin_memory()
        # The other copy of the step that the adapter adds: page starts host -> device,
        # asynchronous from pinned memory; the gathers of page ids run on the device, no sync.
        st.first_slot = first_slot.to(device, non_blocking=True)
    stats["steps"] += 1
    n_dec = int((q_len == 1).sum())
    stats["decode_rows"] += n_dec
    stats["extend_rows"] += nreal - n_dec
    stats["mixed_steps"] += int(0 < n_dec < nreal)


def _full_kv_indices(st, cache, group, read_index, write_index):
    ids = st.kv_indices.get(group)
    if ids is None:
        src = read_index[group] if st.use_read else write_index[group]
        # The first slot of each page is block_id * block_size: the page id is slot // block_size.
        ids = torch.div(src[st.first_slot], cache.block_size, rounding_mode="floor").to(torch.int32)
        st.kv_indices[group] = ids
    return ids


def _wrapper_for(st, cache, layer_type, Hq, Hkv, D, dtype, device, scale, cap, window):
    page_size = 1 if layer_type == "sliding_attention" else cache.block_size
    key = (layer_type, Hq, Hkv, D, dtype, device, scale, cap, window)
    w = st.wrappers.get(key)
    if w is None:
        # A step holds at most max_batch_tokens tokens, so at most that many rows; 512 rows
        # bound the arena (max_batch x max_splits_per_row partials) on big token budgets, and a
        # larger step grows it once with a logged warning.
        max_tokens = max(int(getattr(cache, "max_batch_tokens", 0)), 1)
        w = _wrapper.MixedAttention(
            num_qo_heads=Hq, num_kv_heads=Hkv, head_dim=D, page_size=page_size,
            device=device, q_dtype=dtype, max_batch=min(max_tokens, 512),
            max_tokens=max_tokens, sm_scale=scale, logit_cap=cap,
            window_left=-1 if window is None else window - 1,
            mode=_options["mode"], deterministic=_options["deterministic"])
        st.wrappers[key] = w
    if key not in st.planned:
        # One plan per layer type and step: every full-attention layer shares one, every sliding
        # layer another (models whose layers differ in heads or scale would plan once per kind).
        w.plan(*st.host[layer_type])
        st.planned.add(key)
    return w


@torch.compiler.disable
def paged_attention_forward(module, query, key, value, attention_mask, scaling=None,
                            dropout=0.0, **kwargs):
    """The attention function registered as paged|mixed_attn (see the module docstring)."""
    cache = kwargs.get("cache")
    if cache is None:
        raise ValueError(f"{ATTN_IMPLEMENTATION} was called without a paged cache: it serves "
                         f"continuous batching (model.generate_batch / init_continuous_batching) "
                         f"only; use 'sdpa' or 'eager' for a plain forward")
    if kwargs.get("block_table") is not None:
        raise ValueError("mixed_attn: transformers passed a block_table (its flash-attention "
                         "decode fast path); paged|mixed_attn uses read/write indices: set "
                         "ContinuousBatchingConfig(max_blocks_per_request=0)")
    if dropout:
        raise ValueError(f"mixed_attn: attention dropout is not supported (got {dropout})")
    if query.dim() != 4 or query.shape[0] != 1:
        raise ValueError(f"mixed_attn: query must be [1, Hq, T, D] (continuous batching packs "
                         f"every request into one row), got {tuple(query.shape)}")
    window = _window(cache, module, kwargs)
    layer_type = "full_attention" if window is None else "sliding_attention"
    _, Hq, T_all, D = query.shape
    Hkv = key.shape[1]
    cu_q, cu_k = kwargs["cu_seq_lens_q"], kwargs["cu_seq_lens_k"]
    read_index, write_index = kwargs["read_index"], kwargs["write_index"]
    group, in_group = cache.layer_index_to_group_indices[module.layer_idx]

    st = _state(cache)
    step_key = (cu_q, write_index)
    same = st.step_key is not None and st.step_key[0] is cu_q and st.step_key[1] is write_index
    # A layer index that does not grow means a new forward pass even if transformers handed the
    # same metadata objects again (e.g. a warm-up replay): never reuse a plan across passes.
    if not same or module.layer_idx <= st.last_layer:
        # Holding the objects keeps their ids from being reused by a later step's tensors.
        st.step_key = step_key
        full_group = next((g for layer, (g, _) in sorted(cache.layer_index_to_group_indices.items())
                           if cache.sliding_windows.get(layer, 1) in (None, 1)), None)
        _new_step(st, cache, cu_q, cu_k, read_index, write_index, full_group, query.device)
    st.last_layer = module.layer_idx

    T = st.num_tokens
    if T > T_all:
        raise ValueError(f"mixed_attn: cu_seq_lens_q holds {T} tokens, query only {T_all}")
    scale = float(scaling if scaling is not None else getattr(module, "scaling", 1 / math.sqrt(D)))
    cap = float(kwargs.get("softcap") or 0.0)
    w = _wrapper_for(st, cache, layer_type, Hq, Hkv, D, query.dtype, query.device, scale, cap,
                     window)

    # [1, H, T, D] -> [T, H, D] views (unit last stride; mixed_attn reads the other strides).
    q = query[0].transpose(0, 1)[:T]
    sinks = kwargs.get("s_aux")
    if sinks is not None:
        sinks = sinks.detach().to(torch.float32).contiguous()
    out = torch.empty(T_all, Hq, D, dtype=query.dtype, device=query.device)
    if T < T_all:
        out[T:].zero_()  # padding tokens: defined values, never read for a real token
    stats["layer_calls"] += 1
    if layer_type == "full_attention":
        k = key[0].transpose(0, 1)[:T]
        v = value[0].transpose(0, 1)[:T]
        # transformers' flat per-layer cache [(num_blocks + 2) * block_size, Hkv, D] is, viewed
        # by blocks, mixed_attn's [num_pages, page_size, Hkv, D] with page_size = block_size.
        bs = cache.block_size
        k_cache = cache.key_cache[in_group].view(-1, bs, Hkv, D)
        v_cache = cache.value_cache[in_group].view(-1, bs, Hkv, D)
        kv_indices = _full_kv_indices(st, cache, group, read_index, write_index)
        w.run(q, k_cache, v_cache, kv_indices, k=k, v=v, out=out[:T], sinks=sinks)
    else:
        # Sliding layers: transformers keeps ceil(W / block_size) blocks per request as a rolling
        # buffer, and a prefill chunk overwrites slots its own first queries still need, so the
        # new tokens cannot be saved before attending (mixed_attn's order). transformers' own
        # cache.update does the right thing: it gathers each row's last W - 1 cached tokens,
        # appends the new ones, and only then writes the rolling buffer. mixed_attn attends over
        # that packed [window + new] K/V as a token-granular paged cache (page_size 1, page ids
        # 0, 1, 2, ... packed by cu_seq_lens_k["sliding_attention"]) with the save skipped. The
        # copy is at most W - 1 + new tokens per row, the same one paged|sdpa and paged|eager make.
        k_all, v_all = cache.update(key_states=key, value_states=value,
                                    layer_idx=module.layer_idx, read_index=read_index,
                                    write_index=write_index)
        n_keys = int(st.host[layer_type][1][-1])
        k_pages = k_all[:n_keys].contiguous().unsqueeze(1)
        v_pages = v_all[:n_keys].contiguous().unsqueeze(1)
        if st.arange is None or st.arange.numel() < n_keys:
            st.arange = torch.arange(max(n_keys, 2 * (0 if st.arange is None else st.arange.numel())),
                                     dtype=torch.int32, device=query.device)
        w.run(q, k_pages, v_pages, st.arange, out=out[:T], sinks=sinks)
    return out.unsqueeze(0), None  # [1, T, Hq, D], like transformers' eager path
