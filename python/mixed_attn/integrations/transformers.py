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
  layer_index_to_group_indices, sliding_windows).
- s_aux: gpt-oss's per-head sinks [Hq] -> mixed_attn's `sinks` (fp32), same definition as
  transformers' eager sink path: exp(sink - max) added to the softmax denominator.
- scaling -> sm_scale; softcap (gemma-style) -> logit_cap.
- block_table: only on transformers' flash-attention decode fast path, which it enables for
  flash implementations only; with this adapter it is always None (checked).

One plan per step: the first layer to run in a step reads the step's lengths to the host, plans
once, and builds the page list; layers 1..L-1 find the same metadata objects (the step's
cu_seq_lens_q tensor and write_index list are passed unchanged to every layer) and reuse the plan.

Not supported, refused with an error at the first step (never a wrong token):
- sliding-window layers. transformers keeps them in a rolling buffer of ceil(window / block_size)
  blocks that chunked prefill overwrites while it still needs the overwritten keys (it reads the
  window first, then writes); mixed_attn saves the new tokens before attending, and its page list
  is linear in the position. Models with only full-attention layers work, gpt-oss included once
  its layer_types are all "full_attention".
- CUDA-graph capture of the step (the plan needs host lengths). The default continuous-batching
  config keeps CUDA graphs off for this implementation (transformers turns them on by default
  only for flash implementations), so only an explicit use_cuda_graph=True hits this.
- torch.compile of the forward with fullgraph=True (the attention function is opaque to dynamo).
"""

import math
import os
import weakref

import torch

from .. import wrapper as _wrapper

ATTN_IMPLEMENTATION = "paged|mixed_attn"
# (major, minor) releases whose continuous-batching internals this adapter was written against
# and tested with (tests/test_transformers_integration.py pins 5.17.0).
SUPPORTED_VERSIONS = ((5, 17),)
# Set to 1 to try an unsupported transformers release anyway (a warning is logged); the token
# identity test in tests/test_transformers_integration.py is the way to find out if it works.
ANY_VERSION_ENV = "MIXED_ATTN_TRANSFORMERS_ANY_VERSION"

_options = {"mode": "split", "deterministic": False}
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
    if os.environ.get(ANY_VERSION_ENV, "0") == "1":
        _wrapper.logger.warning("mixed_attn: transformers %s is not a supported version (%s); "
                                "%s=1 lets it run anyway", version, supported, ANY_VERSION_ENV)
        return version
    raise RuntimeError(
        f"mixed_attn.integrations.transformers supports transformers {supported}, found "
        f"{version}: its paged-attention interface (the kwargs of continuous batching and the "
        f"PagedAttentionCache layout) is internal and changes between releases. Install "
        f"transformers==5.17.0, or set {ANY_VERSION_ENV}=1 to try this version at your own risk "
        f"(then run tests/test_transformers_integration.py against it).")


def register(name=ATTN_IMPLEMENTATION, mode="split", deterministic=False, config=None):
    """Registers mixed_attn with transformers' AttentionInterface; returns the name to pass as
    `attn_implementation`. mode / deterministic go to every MixedAttention the adapter builds.
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
    if mode not in ("split", "fold"):
        raise ValueError(f"mixed_attn: mode must be 'split' or 'fold', got {mode!r}")
    from transformers import AttentionInterface
    _options["mode"], _options["deterministic"] = mode, bool(deterministic)
    AttentionInterface.register(name, paged_attention_forward)
    return name


def check_config(config):
    """Raises ValueError if a model config has layers this adapter cannot serve (sliding window)."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    layer_types = getattr(text, "layer_types", None)
    sliding = (any(t == "sliding_attention" for t in layer_types) if layer_types is not None
               else getattr(text, "sliding_window", None) is not None)
    if sliding:
        raise ValueError(_SLIDING_MSG)


_SLIDING_MSG = (
    "mixed_attn (paged|mixed_attn) does not serve sliding-window layers yet: transformers keeps "
    "them in a rolling buffer that chunked prefill overwrites while it still needs the old keys, "
    "and mixed_attn saves new tokens before attending over a position-linear page list. Use a "
    "model whose layers are all full attention (e.g. config.layer_types = ['full_attention'] * "
    "num_hidden_layers, config.sliding_window = None), or paged|sdpa for this model.")


class _CacheState:
    """What the adapter keeps per PagedAttentionCache: wrappers and the current step's plan."""

    def __init__(self):
        self.wrappers = {}      # (Hq, Hkv, D, dtype, scale, cap) -> MixedAttention
        self.step_key = None    # (cu_seq_lens_q, write_index list) objects of the planned step
        self.last_layer = -1    # layer_idx of the last run() in this step
        self.host = None        # (qo_indptr, kv_indptr, seq_lens) host int32, real rows only
        self.num_tokens = 0     # real tokens of the step (qo_indptr[-1])
        self.kv_indices = None  # device int32 page ids of the step
        self.planned = set()    # wrapper keys planned for this step


def _state(cache):
    st = _states.get(cache)
    if st is None:
        st = _states[cache] = _CacheState()
    return st


def _check_cache(cache, module):
    if cache is None:
        raise ValueError(f"{ATTN_IMPLEMENTATION} was called without a paged cache: it serves "
                         f"continuous batching (model.generate_batch / init_continuous_batching) "
                         f"only; use 'sdpa' or 'eager' for a plain forward")
    if getattr(cache, "num_sliding_attention_groups", 0) or getattr(module, "sliding_window", None):
        raise ValueError(_SLIDING_MSG)
    if cache.sliding_windows.get(module.layer_idx, 1) != 1:
        raise ValueError(_SLIDING_MSG)


def _new_step(st, cache, cu_q, cu_k, read_index, write_index, device):
    """Plans the step's metadata: host lengths, page ids. Called by the first layer of a step."""
    if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
        raise RuntimeError(
            f"{ATTN_IMPLEMENTATION} cannot be captured in a CUDA graph (it plans each step from "
            f"host lengths): use ContinuousBatchingConfig(use_cuda_graph=False)")
    if isinstance(cu_k, dict):
        cu_k = cu_k["full_attention"]
    # THE host synchronisation of the step: transformers builds the step's lengths on the host but
    # hands only device tensors to the attention function, and mixed_attn's planner (like any
    # split-KV planner) needs them on the host. One D2H copy of both cumulative length arrays
    # (a few hundred bytes); it waits for the kernels queued before layer 0's attention
    # (embedding, layer 0's projections), then the host plans and every later layer reuses it.
    lens = torch.cat([cu_q.reshape(-1), cu_k.reshape(-1)]).to("cpu", torch.int64)
    stats["host_syncs"] += 1
    nq = cu_q.numel()
    cq, ck = lens[:nq], lens[nq:]
    if ck.numel() != nq:
        raise ValueError(f"mixed_attn: cu_seq_lens_k has {ck.numel()} entries, cu_seq_lens_q {nq}")
    q_len = cq[1:] - cq[:-1]
    k_len = ck[1:] - ck[:-1]
    # Padding rows (static-shape padding) have no query tokens and come last: drop them.
    real = q_len > 0
    nreal = int(real.sum())
    if not bool(real[:nreal].all()):
        raise ValueError("mixed_attn: cu_seq_lens_q has an empty row before a non-empty one")
    q_len, k_len = q_len[:nreal], k_len[:nreal]
    if bool((k_len < q_len).any()):
        raise ValueError("mixed_attn: cu_seq_lens_k gives a row fewer keys than queries (the "
                         "cache holds past + new tokens for every row)")
    bs = cache.block_size
    pages = (k_len + bs - 1) // bs
    kv_indptr = torch.zeros(nreal + 1, dtype=torch.int64)
    torch.cumsum(pages, 0, out=kv_indptr[1:])
    # Where, in the step's flat slot list, each page's first slot is: row start + p * block_size.
    # read_index lists every slot of every row's whole sequence (packed by cu_seq_lens_k); when it
    # is empty no row has a past, and write_index lists the same slots packed by cu_seq_lens_q.
    src_index, starts = (read_index, ck[:-1]) if read_index.numel() else (write_index, cq[:-1])
    row_of_page = torch.repeat_interleave(torch.arange(nreal), pages)
    page_in_row = torch.arange(int(kv_indptr[-1])) - kv_indptr[:-1][row_of_page]
    first_slot = starts[:nreal][row_of_page] + page_in_row * bs
    if first_slot.numel() and int(first_slot.max()) >= src_index.numel():
        raise ValueError(f"mixed_attn: the step's lengths need slot {int(first_slot.max())} of "
                         f"{'read' if read_index.numel() else 'write'}_index, which has only "
                         f"{src_index.numel()}")
    if device.type == "cuda":
        first_slot = first_slot.pin_memory()
    # The second (and last) copy of the step that the adapter adds: page starts host -> device,
    # asynchronous from pinned memory; the gather below runs on the device, no sync.
    first_slot = first_slot.to(device, non_blocking=True)
    st.kv_indices = torch.div(src_index[first_slot], bs, rounding_mode="floor").to(torch.int32)
    st.host = (cq[: nreal + 1].to(torch.int32), kv_indptr.to(torch.int32), k_len.to(torch.int32))
    st.num_tokens = int(cq[nreal])
    st.planned = set()
    stats["steps"] += 1
    n_dec = int((q_len == 1).sum())
    stats["decode_rows"] += n_dec
    stats["extend_rows"] += nreal - n_dec
    stats["mixed_steps"] += int(0 < n_dec < nreal)


def _wrapper_for(st, cache, Hq, Hkv, D, dtype, device, scale, cap):
    key = (Hq, Hkv, D, dtype, device, scale, cap)
    w = st.wrappers.get(key)
    if w is None:
        # A step holds at most max_batch_tokens tokens, so at most that many rows; 512 rows
        # bound the arena (max_batch x max_splits_per_row partials) on big token budgets, and a
        # larger step grows it once with a logged warning.
        max_tokens = max(int(getattr(cache, "max_batch_tokens", 0)), 1)
        w = _wrapper.MixedAttention(
            num_qo_heads=Hq, num_kv_heads=Hkv, head_dim=D, page_size=cache.block_size,
            device=device, q_dtype=dtype, max_batch=min(max_tokens, 512),
            max_tokens=max_tokens, sm_scale=scale,
            logit_cap=cap, mode=_options["mode"], deterministic=_options["deterministic"])
        st.wrappers[key] = w
    if key not in st.planned:
        # The same host lengths for every wrapper; models have one (all layers share heads and
        # scale), so this runs once per step.
        w.plan(*st.host)
        st.planned.add(key)
    return w


@torch.compiler.disable
def paged_attention_forward(module, query, key, value, attention_mask, scaling=None,
                            dropout=0.0, **kwargs):
    """The attention function registered as paged|mixed_attn (see the module docstring)."""
    cache = kwargs.get("cache")
    _check_cache(cache, module)
    if kwargs.get("block_table") is not None:
        raise ValueError("mixed_attn: transformers passed a block_table (its flash-attention "
                         "decode fast path); paged|mixed_attn uses read/write indices: set "
                         "ContinuousBatchingConfig(max_blocks_per_request=0)")
    if kwargs.get("sliding_window"):
        raise ValueError(_SLIDING_MSG)
    if dropout:
        raise ValueError(f"mixed_attn: attention dropout is not supported (got {dropout})")
    if query.dim() != 4 or query.shape[0] != 1:
        raise ValueError(f"mixed_attn: query must be [1, Hq, T, D] (continuous batching packs "
                         f"every request into one row), got {tuple(query.shape)}")
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
        _new_step(st, cache, cu_q, cu_k, read_index[group], write_index[group], query.device)
    st.last_layer = module.layer_idx

    T = st.num_tokens
    if T > T_all:
        raise ValueError(f"mixed_attn: cu_seq_lens_q holds {T} tokens, query only {T_all}")
    scale = float(scaling if scaling is not None else getattr(module, "scaling", 1 / math.sqrt(D)))
    cap = float(kwargs.get("softcap") or 0.0)
    w = _wrapper_for(st, cache, Hq, Hkv, D, query.dtype, query.device, scale, cap)

    # [1, H, T, D] -> [T, H, D] views (unit last stride; mixed_attn reads the other strides).
    q = query[0].transpose(0, 1)[:T]
    k = key[0].transpose(0, 1)[:T]
    v = value[0].transpose(0, 1)[:T]
    # transformers' flat per-layer cache [(num_blocks + 2) * block_size, Hkv, D] is, viewed by
    # blocks, mixed_attn's [num_pages, page_size, Hkv, D] with page_size = block_size.
    bs = cache.block_size
    k_cache = cache.key_cache[in_group].view(-1, bs, Hkv, D)
    v_cache = cache.value_cache[in_group].view(-1, bs, Hkv, D)
    sinks = kwargs.get("s_aux")
    if sinks is not None:
        sinks = sinks.detach().to(torch.float32).contiguous()
    out = torch.empty(T_all, Hq, D, dtype=query.dtype, device=query.device)
    if T < T_all:
        out[T:].zero_()  # padding tokens: defined values, never read for a real token
    stats["layer_calls"] += 1
    w.run(q, k_cache, v_cache, st.kv_indices, k=k, v=v, out=out[:T], sinks=sinks)
    return out.unsqueeze(0), None  # [1, T, Hq, D], like transformers' eager path
