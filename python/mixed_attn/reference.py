"""fp64 torch reference of the mixed step, written from design.md alone.

Dense per-row math with explicit masks: slow, simple, and independent of the
planner and of every kernel. It is the top of the correctness ladder.
"""

import math

import torch

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0


def quantize_fp8(x, scale):
    """What the KV save stores in an fp8 cache: x / scale, saturated to e4m3's range."""
    return (x.float() / scale).clamp(-FP8_MAX, FP8_MAX).to(FP8)


def reference_save_kv(k_cache, v_cache, k, v, qo_indptr, seq_lens, kv_indptr, kv_indices,
                      page_size, k_scale=1.0, v_scale=1.0):
    """Returns copies of the caches with the new tokens written (the op mutates in place)."""
    k_cache = k_cache.clone()
    v_cache = v_cache.clone()
    qo = [int(x) for x in qo_indptr]
    kvp = [int(x) for x in kv_indptr]
    for b in range(len(qo) - 1):
        ext = qo[b + 1] - qo[b]
        prefix = int(seq_lens[b]) - ext
        for i in range(ext):
            pos = prefix + i
            page = int(kv_indices[kvp[b] + pos // page_size])
            slot = pos % page_size
            if k_cache.dtype == FP8:
                k_cache[page, slot] = quantize_fp8(k[qo[b] + i], k_scale)
                v_cache[page, slot] = quantize_fp8(v[qo[b] + i], v_scale)
            else:
                k_cache[page, slot] = k[qo[b] + i].to(k_cache.dtype)
                v_cache[page, slot] = v[qo[b] + i].to(v_cache.dtype)
    return k_cache, v_cache


def gather_row_kv(cache, kv_indptr, kv_indices, b, seq_len, page_size, scale):
    """Keys (or values) of positions 0..seq_len-1 of row b, fp64, [seq_len, Hkv, D]."""
    n_pages = (seq_len + page_size - 1) // page_size
    pages = kv_indices[int(kv_indptr[b]) : int(kv_indptr[b]) + n_pages].long()
    x = cache[pages].double()  # [n_pages, page_size, Hkv, D]
    x = x.reshape(n_pages * page_size, *cache.shape[2:])[:seq_len]
    if cache.dtype == FP8:
        x = x * scale
    return x


def reference_attention(q, k_cache, v_cache, qo_indptr, seq_lens, kv_indptr, kv_indices,
                        page_size, sm_scale=None, logit_cap=0.0, window_left=-1, sinks=None,
                        k_scale=1.0, v_scale=1.0):
    """Attention of every query over its row's cache (the save already done).

    Returns (out, lse) in fp64: out [T, Hq, D], lse [T, Hq] (natural log of
    the softmax denominator, sink term included).
    """
    T, Hq, D = q.shape
    Hkv = k_cache.shape[2]
    group = Hq // Hkv
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(D)
    out = torch.empty(T, Hq, D, dtype=torch.float64)
    lse = torch.empty(T, Hq, dtype=torch.float64)
    qo = [int(x) for x in qo_indptr]
    for b in range(len(qo) - 1):
        ext = qo[b + 1] - qo[b]
        seq = int(seq_lens[b])
        prefix = seq - ext
        keys = gather_row_kv(k_cache, kv_indptr, kv_indices, b, seq, page_size, k_scale)
        vals = gather_row_kv(v_cache, kv_indptr, kv_indices, b, seq, page_size, v_scale)
        keys = keys.repeat_interleave(group, dim=1)  # [seq, Hq, D]
        vals = vals.repeat_interleave(group, dim=1)
        qb = q[qo[b] : qo[b + 1]].double()  # [ext, Hq, D]
        s = torch.einsum("ihd,jhd->hij", qb, keys) * sm_scale  # [Hq, ext, seq]
        if logit_cap > 0:
            s = logit_cap * torch.tanh(s / logit_cap)
        pos_q = torch.arange(ext).view(-1, 1) + prefix
        pos_k = torch.arange(seq).view(1, -1)
        allowed = pos_k <= pos_q
        if window_left >= 0:
            allowed &= pos_k >= pos_q - window_left
        s = s.masked_fill(~allowed, float("-inf"))
        m = s.amax(dim=-1, keepdim=True)  # every query sees at least itself
        if sinks is not None:
            m = torch.maximum(m, sinks.double().view(-1, 1, 1))
        p = torch.exp(s - m)
        denom = p.sum(dim=-1, keepdim=True)
        if sinks is not None:
            denom = denom + torch.exp(sinks.double().view(-1, 1, 1) - m)
        o = torch.einsum("hij,jhd->ihd", p / denom, vals)
        out[qo[b] : qo[b + 1]] = o
        lse[qo[b] : qo[b + 1]] = (m + torch.log(denom)).squeeze(-1).transpose(0, 1)
    return out, lse


def reference_forward(q, k, v, k_cache, v_cache, qo_indptr, seq_lens, kv_indptr, kv_indices,
                      page_size, **opts):
    """The whole mixed step: save (when k, v given) then attention. Returns (out, lse, k_cache, v_cache)."""
    k_scale = opts.get("k_scale", 1.0)
    v_scale = opts.get("v_scale", 1.0)
    if k is not None:
        k_cache, v_cache = reference_save_kv(k_cache, v_cache, k, v, qo_indptr, seq_lens, kv_indptr,
                                             kv_indices, page_size, k_scale, v_scale)
    out, lse = reference_attention(q, k_cache, v_cache, qo_indptr, seq_lens, kv_indptr, kv_indices,
                                   page_size, **opts)
    return out, lse, k_cache, v_cache
