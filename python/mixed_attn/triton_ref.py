"""Triton reference kernels of the mixed step: the oracle of the CUDA kernels.

Same semantics as design.md, driven by the same plan as the C++ path: the
caller hands in ``plan_info`` (the int list of ``torch.ops.mixed_attn.plan``)
and ``plan_meta`` (the int32 metadata tensor on the kernels' device), exactly as
to ``torch.ops.mixed_attn.forward``. Four kernels:

- ``_save_kv_kernel``: writes the new tokens' k/v into the paged cache (e4m3
  with ``x * (1/scale)`` saturated to +-448, the C++ binding's convention).
- ``_extend_kernel``: one program per (extend tile, kv head, row block). The
  rows of a block are (query token, q head of the GQA group) pairs, so all q
  heads that share a kv head read each K/V block once and one ``tl.dot``
  serves them all; a fold-mode decode row is one token times the group.
- ``_decode_partial_kernel``: split-KV stage 1, one program per (decode row,
  kv head, split); the row's (query token, q head of the group) pairs are the M
  side of the ``tl.dot``, causal among the row's own new tokens. It writes the
  split's normalised output and its LSE (no sink) of query i into the arena slot
  ``decode_split_indptr[d] + split * q_len + i`` that the planner laid out.
- ``_decode_merge_kernel``: stage 2, one program per (decode row, q head), over
  the row's query tokens: log-sum-exp merge of the splits plus the sink, into
  out (and lse).

Both dispatch modes come from the plan alone: a fold plan has no decode rows
and an extend tile for every row. Kernels index the plan's arrays as
``plan_meta`` plus the offsets of plan_info (never per-array views, whose
alignment would change per step and make Triton recompile), and never read
the plan on the host: ``triton_forward`` does no device sync.

Numerics: scores and softmax in fp32 with base-2 exponents; q.k and p.v on
tensor cores in q's dtype (an fp8 cache is widened exactly to it, its scales
folded into sm_scale and the output), p rounded to q's dtype for the second
product, as flash-attention kernels do.

Importing: this module imports triton at import time. To run it on the CPU,
set ``TRITON_INTERPRET=1`` in the environment BEFORE the first
``import triton`` of the process (tests/test_triton_ref.py does it at its top
when no CUDA device exists). Tensors must then live on the CPU. Two
interpreter gaps are bridged under it only (same math, see _operand and
_round_to_e4m3_grid): its bf16 tl.dot, and its fp32 -> e4m3 cast.
"""

import math
import os

import torch
import triton
import triton.language as tl

from mixed_attn.plan_info import field

__all__ = ["triton_forward", "triton_save_kv", "triton_extend", "triton_decode"]

_LOG2E = 1.4426950408889634
_FP8 = torch.float8_e4m3fn
# Running maxima start at -1e30, a finite "minus infinity": exp2(-inf - m) is
# then 0, never NaN, for rows or splits that have not seen a key yet.


def _interpreted():
    return os.environ.get("TRITON_INTERPRET", "0").strip() not in ("", "0")


# --------------------------------------------------------------------------
# KV save
# --------------------------------------------------------------------------
@triton.jit
def _round_to_e4m3_grid(x):
    # x saturated to +-448 and rounded to nearest even on the e4m3 grid, as an
    # fp32 value. Used under the CPU interpreter only, whose fp32 -> fp8 cast
    # truncates when the rounding carries into the exponent (31.6 -> 16); the
    # GPU cast (cvt.rn.satfinite) is already correct. The grid step is
    # 2^(e-3) for a normal of exponent e and 2^-9 below 2^-6; adding and
    # subtracting 2^23 rounds x / step (< 16) to an integer, ties to even.
    x = tl.clamp(x, -448.0, 448.0)
    a = tl.abs(x)
    biased_exp = (a.to(tl.int32, bitcast=True) >> 23) & 0xFF
    step = ((tl.maximum(biased_exp, 127 - 6) - 3) << 23).to(tl.float32, bitcast=True)
    r = ((a / step + 8388608.0) - 8388608.0) * step
    sign = x.to(tl.int32, bitcast=True) & (-2147483648)  # keeps -0.0, like the cast
    return (r.to(tl.int32, bitcast=True) | sign).to(tl.float32, bitcast=True)


@triton.jit(do_not_specialize=["off_qo_indptr", "off_kv_indptr", "off_seq_lens", "num_rows", "num_tokens",
                                "search_steps"])
def _save_kv_kernel(
    k_ptr, v_ptr, kc_ptr, vc_ptr, kv_indices_ptr,
    meta_ptr, off_qo_indptr, off_kv_indptr, off_seq_lens,
    num_rows, num_tokens, search_steps,
    k_st, k_sh, v_st, v_sh,
    kc_sp, kc_ss, kc_sh, vc_sp, vc_ss, vc_sh,
    inv_k_scale, inv_v_scale, page_size,
    HEAD_DIM: tl.constexpr, BLOCK_T: tl.constexpr, IS_FP8: tl.constexpr,
    ROUND_IN_FP32: tl.constexpr,
):
    # The plan's arrays, at their offsets in the one metadata buffer (plan_info.py).
    qo_indptr_ptr = meta_ptr + off_qo_indptr
    kv_indptr_ptr = meta_ptr + off_kv_indptr
    seq_lens_ptr = meta_ptr + off_seq_lens
    pid_t = tl.program_id(0)
    kvh = tl.program_id(1)
    tok = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    tok_ok = tok < num_tokens
    # Row of each token: the largest b with qo_indptr[b] <= tok. Binary search
    # with the invariant qo_indptr[lo] <= tok, answer in [lo, hi].
    lo = tl.zeros([BLOCK_T], dtype=tl.int32)
    hi = tl.zeros([BLOCK_T], dtype=tl.int32) + (num_rows - 1)
    for _ in range(search_steps):
        active = lo < hi
        mid = (lo + hi + 1) // 2
        start = tl.load(qo_indptr_ptr + mid, mask=tok_ok & active, other=0)
        up = start <= tok
        lo = tl.where(active & up, mid, lo)
        hi = tl.where(active & (~up), mid - 1, hi)
    row = lo
    q0 = tl.load(qo_indptr_ptr + row, mask=tok_ok, other=0)
    q1 = tl.load(qo_indptr_ptr + row + 1, mask=tok_ok, other=1)
    seq = tl.load(seq_lens_ptr + row, mask=tok_ok, other=1)
    pos = seq - (q1 - q0) + (tok - q0)
    page_base = tl.load(kv_indptr_ptr + row, mask=tok_ok, other=0)
    page = tl.load(kv_indices_ptr + page_base + pos // page_size, mask=tok_ok, other=0).to(tl.int64)
    slot = (pos % page_size).to(tl.int64)

    d = tl.arange(0, HEAD_DIM)
    tok64 = tok.to(tl.int64)
    m2 = tok_ok[:, None]
    k = tl.load(k_ptr + tok64[:, None] * k_st + kvh * k_sh + d[None, :], mask=m2, other=0.0)
    v = tl.load(v_ptr + tok64[:, None] * v_st + kvh * v_sh + d[None, :], mask=m2, other=0.0)
    kc_off = page[:, None] * kc_sp + slot[:, None] * kc_ss + kvh * kc_sh + d[None, :]
    vc_off = page[:, None] * vc_sp + slot[:, None] * vc_ss + kvh * vc_sh + d[None, :]
    if IS_FP8:
        k = tl.clamp(k.to(tl.float32) * inv_k_scale, -448.0, 448.0)
        v = tl.clamp(v.to(tl.float32) * inv_v_scale, -448.0, 448.0)
        if ROUND_IN_FP32:
            k = _round_to_e4m3_grid(k)
            v = _round_to_e4m3_grid(v)
    tl.store(kc_ptr + kc_off, k.to(kc_ptr.dtype.element_ty), mask=m2)
    tl.store(vc_ptr + vc_off, v.to(vc_ptr.dtype.element_ty), mask=m2)


# --------------------------------------------------------------------------
# Extend
# --------------------------------------------------------------------------
@triton.jit
def _tanh(x):
    # tanh from exp2, fine in fp32 (absolute error ~1e-7, which is what the
    # score needs); saturates to +-1 without NaN for large |x|.
    e = tl.exp2(x * (2.0 * 1.4426950408889634))
    return 1.0 - 2.0 / (e + 1.0)


@triton.jit
def _operand(x, DTYPE: tl.constexpr, DOT_F32: tl.constexpr):
    # Rounds x to the tensor-core input dtype (q's dtype); under the CPU
    # interpreter, whose tl.dot cannot multiply bf16 (it multiplies the bit
    # patterns: triton-lang/triton#11584), the rounded value is then widened
    # to fp32 and multiplied exactly, so the result is the same math.
    x = x.to(DTYPE)
    if DOT_F32:
        x = x.to(tl.float32)
    return x


@triton.jit
def _dot(a, b, DOT_F32: tl.constexpr):
    if DOT_F32:
        return tl.dot(a, b, input_precision="ieee")
    else:
        return tl.dot(a, b)


@triton.jit
def _extend_key_block(q, m_i, l_i, acc, start, kv_end, pos, kc_ptr, vc_ptr, kv_indices_ptr, page_base, page_size,
                      kvh, kc_sp, kc_ss, kc_sh, vc_sp, vc_ss, vc_sh, qk_scale_log2, qk_scale, logit_cap,
                      window_left, DTYPE: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr,
                      HAS_CAP: tl.constexpr, HAS_WINDOW: tl.constexpr, MASKED: tl.constexpr,
                      DOT_F32: tl.constexpr):
    # One online-softmax step over keys start .. start+BLOCK_N-1 (base-2 exponents).
    d = tl.arange(0, HEAD_DIM)
    offs_n = start + tl.arange(0, BLOCK_N)
    in_range = offs_n < kv_end
    page = tl.load(kv_indices_ptr + page_base + offs_n // page_size, mask=in_range, other=0).to(tl.int64)
    slot = (offs_n % page_size).to(tl.int64)
    k = tl.load(kc_ptr + (page * kc_sp + slot * kc_ss + kvh * kc_sh)[:, None] + d[None, :],
                mask=in_range[:, None], other=0.0)
    qk = _dot(q, tl.trans(_operand(k, DTYPE, DOT_F32)), DOT_F32)
    if HAS_CAP:
        s = logit_cap * _tanh(qk * qk_scale / logit_cap) * 1.4426950408889634
    else:
        s = qk * qk_scale_log2
    if MASKED:
        visible = in_range[None, :] & (offs_n[None, :] <= pos[:, None])
        if HAS_WINDOW:
            visible = visible & (offs_n[None, :] >= pos[:, None] - window_left)
        s = tl.where(visible, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_new[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)
    v = tl.load(vc_ptr + (page * vc_sp + slot * vc_ss + kvh * vc_sh)[:, None] + d[None, :],
                mask=in_range[:, None], other=0.0)
    acc = acc * alpha[:, None] + _dot(_operand(p, DTYPE, DOT_F32), _operand(v, DTYPE, DOT_F32), DOT_F32)
    return m_new, l_i, acc


@triton.jit(do_not_specialize=["off_qo_indptr", "off_kv_indptr", "off_seq_lens", "off_extend_tiles"])
def _extend_kernel(
    q_ptr, kc_ptr, vc_ptr, out_ptr, lse_ptr, sinks_ptr, kv_indices_ptr,
    meta_ptr, off_qo_indptr, off_kv_indptr, off_seq_lens, off_extend_tiles,
    q_st, q_sh, kc_sp, kc_ss, kc_sh, vc_sp, vc_ss, vc_sh, o_st, o_sh, lse_st,
    qk_scale_log2,  # sm_scale * k_scale * log2(e)   (no logit cap)
    qk_scale,       # sm_scale * k_scale             (logit cap)
    logit_cap, window_left, v_scale, page_size, tile_tokens, group,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    HAS_CAP: tl.constexpr, HAS_WINDOW: tl.constexpr, HAS_SINKS: tl.constexpr,
    WRITE_LSE: tl.constexpr, DOT_F32: tl.constexpr,
):
    # The plan's arrays, at their offsets in the one metadata buffer (plan_info.py).
    qo_indptr_ptr = meta_ptr + off_qo_indptr
    kv_indptr_ptr = meta_ptr + off_kv_indptr
    seq_lens_ptr = meta_ptr + off_seq_lens
    tiles_ptr = meta_ptr + off_extend_tiles
    pid_tile = tl.program_id(0)
    kvh = tl.program_id(1)
    pid_blk = tl.program_id(2)

    row = tl.load(tiles_ptr + 2 * pid_tile)
    q_start = tl.load(tiles_ptr + 2 * pid_tile + 1)
    tok0 = tl.load(qo_indptr_ptr + row)
    ext = tl.load(qo_indptr_ptr + row + 1) - tok0
    seq = tl.load(seq_lens_ptr + row)
    prefix = seq - ext
    n_tok = tl.minimum(q_start + tile_tokens, ext) - q_start
    n_rows = n_tok * group  # (token, head-in-group) rows of this tile
    m_lo = pid_blk * BLOCK_M
    if m_lo >= n_rows:
        return

    offs_m = m_lo + tl.arange(0, BLOCK_M)
    row_ok = offs_m < n_rows
    qi = q_start + offs_m // group  # query index inside the row
    head = kvh * group + offs_m % group
    pos = prefix + qi  # absolute position of each query
    token = (tok0 + qi).to(tl.int64)
    d = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + token[:, None] * q_st + head[:, None] * q_sh + d[None, :],
                mask=row_ok[:, None], other=0.0)
    q = _operand(q, q_ptr.dtype.element_ty, DOT_F32)

    # Keys this block can see: up to its last query, from the window edge of its first.
    last_m = tl.minimum(m_lo + BLOCK_M, n_rows) - 1
    kv_end = prefix + q_start + last_m // group + 1
    kv_begin = prefix * 0  # a runtime int32 like the windowed value below
    if HAS_WINDOW:
        kv_begin = tl.maximum(prefix + q_start + m_lo // group - window_left, 0)
    page_base = tl.load(kv_indptr_ptr + row)

    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) + (-1.0e30)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    # Key blocks that every row of this block sees whole (causal: j <= first query's position;
    # window: j >= last query's position - window_left) skip the mask: three loops, masked
    # blocks before and after the unmasked middle [full_lo, full_hi).
    first_pos = prefix + q_start + m_lo // group
    full_hi = first_pos + 1
    full_lo = kv_begin
    if HAS_WINDOW:
        full_lo = tl.maximum(kv_end - 1 - window_left, kv_begin)
    full_lo = kv_begin + tl.cdiv(full_lo - kv_begin, BLOCK_N) * BLOCK_N
    full_lo = tl.minimum(full_lo, kv_end)
    full_hi = tl.maximum(full_lo + (full_hi - full_lo) // BLOCK_N * BLOCK_N, full_lo)
    for start in range(kv_begin, full_lo, BLOCK_N):
        m_i, l_i, acc = _extend_key_block(
            q, m_i, l_i, acc, start, kv_end, pos, kc_ptr, vc_ptr, kv_indices_ptr, page_base, page_size, kvh,
            kc_sp, kc_ss, kc_sh, vc_sp, vc_ss, vc_sh, qk_scale_log2, qk_scale, logit_cap, window_left,
            q_ptr.dtype.element_ty, HEAD_DIM, BLOCK_N, HAS_CAP, HAS_WINDOW, True, DOT_F32)
    for start in range(full_lo, full_hi, BLOCK_N):
        m_i, l_i, acc = _extend_key_block(
            q, m_i, l_i, acc, start, kv_end, pos, kc_ptr, vc_ptr, kv_indices_ptr, page_base, page_size, kvh,
            kc_sp, kc_ss, kc_sh, vc_sp, vc_ss, vc_sh, qk_scale_log2, qk_scale, logit_cap, window_left,
            q_ptr.dtype.element_ty, HEAD_DIM, BLOCK_N, HAS_CAP, HAS_WINDOW, False, DOT_F32)
    for start in range(full_hi, kv_end, BLOCK_N):
        m_i, l_i, acc = _extend_key_block(
            q, m_i, l_i, acc, start, kv_end, pos, kc_ptr, vc_ptr, kv_indices_ptr, page_base, page_size, kvh,
            kc_sp, kc_ss, kc_sh, vc_sp, vc_ss, vc_sh, qk_scale_log2, qk_scale, logit_cap, window_left,
            q_ptr.dtype.element_ty, HEAD_DIM, BLOCK_N, HAS_CAP, HAS_WINDOW, True, DOT_F32)

    # Every real row saw at least its own key, so l_i >= 1 there.
    if HAS_SINKS:
        sink = tl.load(sinks_ptr + head, mask=row_ok, other=0.0) * 1.4426950408889634
        m_f = tl.maximum(m_i, sink)
        l_f = l_i * tl.exp2(m_i - m_f) + tl.exp2(sink - m_f)
        o_scale = tl.exp2(m_i - m_f) / tl.where(row_ok, l_f, 1.0)
    else:
        m_f = m_i
        l_f = l_i
        o_scale = 1.0 / tl.where(row_ok, l_f, 1.0)
    o = acc * (o_scale * v_scale)[:, None]
    tl.store(out_ptr + token[:, None] * o_st + head[:, None] * o_sh + d[None, :],
             o.to(out_ptr.dtype.element_ty), mask=row_ok[:, None])
    if WRITE_LSE:
        lse = (m_f + tl.log2(tl.where(row_ok, l_f, 1.0))) * 0.6931471805599453
        tl.store(lse_ptr + token * lse_st + head, lse, mask=row_ok)


# --------------------------------------------------------------------------
# Split-KV decode
# --------------------------------------------------------------------------
@triton.jit(do_not_specialize=["off_qo_indptr", "off_kv_indptr", "off_seq_lens", "off_decode_rows",
                                "off_decode_split_indptr", "off_decode_kv_start", "off_decode_chunk_tokens"])
def _decode_partial_kernel(
    q_ptr, kc_ptr, vc_ptr, kv_indices_ptr, part_o_ptr, part_lse_ptr,
    meta_ptr, off_qo_indptr, off_kv_indptr, off_seq_lens, off_decode_rows, off_decode_split_indptr,
    off_decode_kv_start, off_decode_chunk_tokens,
    q_st, q_sh, kc_sp, kc_ss, kc_sh, vc_sp, vc_ss, vc_sh, po_ss, po_sh, pl_ss,
    qk_scale_log2, qk_scale, logit_cap, window_left, v_scale, page_size, group,
    HEAD_DIM: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr,
    HAS_CAP: tl.constexpr, HAS_WINDOW: tl.constexpr, DOT_F32: tl.constexpr,
):
    # Rows r of the block are (query i, head h) = (r // group, r % group) of the decode row.
    # The plan's arrays, at their offsets in the one metadata buffer (plan_info.py).
    qo_indptr_ptr = meta_ptr + off_qo_indptr
    kv_indptr_ptr = meta_ptr + off_kv_indptr
    seq_lens_ptr = meta_ptr + off_seq_lens
    decode_rows_ptr = meta_ptr + off_decode_rows
    split_indptr_ptr = meta_ptr + off_decode_split_indptr
    kv_start_ptr = meta_ptr + off_decode_kv_start
    chunk_ptr = meta_ptr + off_decode_chunk_tokens
    dr = tl.program_id(0)
    kvh = tl.program_id(1)
    split = tl.program_id(2)
    row = tl.load(decode_rows_ptr + dr)
    token0 = tl.load(qo_indptr_ptr + row)
    q_len = tl.load(qo_indptr_ptr + row + 1) - token0
    slot0 = tl.load(split_indptr_ptr + dr)
    n_splits = (tl.load(split_indptr_ptr + dr + 1) - slot0) // q_len
    if split >= n_splits:
        return
    seq = tl.load(seq_lens_ptr + row)
    chunk = tl.load(chunk_ptr + dr)
    lo = tl.load(kv_start_ptr + dr) + split * chunk
    hi = tl.minimum(lo + chunk, seq)
    if HAS_WINDOW:
        lo = tl.maximum(lo, seq - q_len - window_left)  # no query sees keys before the first's window

    r = tl.arange(0, BLOCK_H)
    qi = r // group
    row_ok = qi < q_len
    head = kvh * group + r % group
    token = (token0 + qi).to(tl.int64)
    pos = seq - q_len + qi  # each query's own position: it sees keys <= pos
    first = pos - window_left if HAS_WINDOW else pos * 0
    d = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + token[:, None] * q_st + head[:, None] * q_sh + d[None, :],
                mask=row_ok[:, None], other=0.0)
    q = _operand(q, q_ptr.dtype.element_ty, DOT_F32)
    page_base = tl.load(kv_indptr_ptr + row)

    m_i = tl.zeros([BLOCK_H], dtype=tl.float32) + (-1.0e30)
    l_i = tl.zeros([BLOCK_H], dtype=tl.float32)
    acc = tl.zeros([BLOCK_H, HEAD_DIM], dtype=tl.float32)
    for start in range(lo, hi, BLOCK_N):
        offs_n = start + tl.arange(0, BLOCK_N)
        in_range = offs_n < hi
        page = tl.load(kv_indices_ptr + page_base + offs_n // page_size, mask=in_range, other=0).to(tl.int64)
        slot = (offs_n % page_size).to(tl.int64)
        k = tl.load(kc_ptr + (page * kc_sp + slot * kc_ss + kvh * kc_sh)[:, None] + d[None, :],
                    mask=in_range[:, None], other=0.0)
        qk = _dot(q, tl.trans(_operand(k, q_ptr.dtype.element_ty, DOT_F32)), DOT_F32)
        if HAS_CAP:
            s = logit_cap * _tanh(qk * qk_scale / logit_cap) * 1.4426950408889634
        else:
            s = qk * qk_scale_log2
        visible = in_range[None, :] & (offs_n[None, :] <= pos[:, None]) & (offs_n[None, :] >= first[:, None])
        s = tl.where(visible, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(vc_ptr + (page * vc_sp + slot * vc_ss + kvh * vc_sh)[:, None] + d[None, :],
                    mask=in_range[:, None], other=0.0)
        acc = acc * alpha[:, None] + _dot(_operand(p, q_ptr.dtype.element_ty, DOT_F32),
                                          _operand(v, q_ptr.dtype.element_ty, DOT_F32), DOT_F32)
        m_i = m_new

    # A split with no visible key for a query (before its window, or past its own position)
    # gets LSE -inf and output 0 there.
    seen = l_i > 0.0
    l_safe = tl.where(seen, l_i, 1.0)
    o = acc * (v_scale / l_safe)[:, None]
    lse = tl.where(seen, (m_i + tl.log2(l_safe)) * 0.6931471805599453, float("-inf"))
    slot = (slot0 + split * q_len + qi).to(tl.int64)
    tl.store(part_o_ptr + slot[:, None] * po_ss + head[:, None] * po_sh + d[None, :], o, mask=row_ok[:, None])
    tl.store(part_lse_ptr + slot * pl_ss + head, lse, mask=row_ok)


@triton.jit(do_not_specialize=["off_qo_indptr", "off_decode_rows", "off_decode_split_indptr"])
def _decode_merge_kernel(
    part_o_ptr, part_lse_ptr, out_ptr, lse_ptr, sinks_ptr,
    meta_ptr, off_qo_indptr, off_decode_rows, off_decode_split_indptr,
    po_ss, po_sh, pl_ss, o_st, o_sh, lse_st,
    HEAD_DIM: tl.constexpr, BLOCK_S: tl.constexpr,
    HAS_SINKS: tl.constexpr, WRITE_LSE: tl.constexpr,
):
    # The plan's arrays, at their offsets in the one metadata buffer (plan_info.py).
    qo_indptr_ptr = meta_ptr + off_qo_indptr
    decode_rows_ptr = meta_ptr + off_decode_rows
    split_indptr_ptr = meta_ptr + off_decode_split_indptr
    dr = tl.program_id(0)
    head = tl.program_id(1)
    row = tl.load(decode_rows_ptr + dr)
    token0 = tl.load(qo_indptr_ptr + row)
    q_len = tl.load(qo_indptr_ptr + row + 1) - token0
    slot0 = tl.load(split_indptr_ptr + dr)
    n_splits = (tl.load(split_indptr_ptr + dr + 1) - slot0) // q_len
    d = tl.arange(0, HEAD_DIM)
    for qi in range(0, q_len):
        token = (token0 + qi).to(tl.int64)
        # Pass 1: the largest LSE (the split holding the query's own key is finite).
        m_vec = tl.zeros([BLOCK_S], dtype=tl.float32) + float("-inf")
        for s0 in range(0, n_splits, BLOCK_S):
            s = s0 + tl.arange(0, BLOCK_S)
            lse_s = tl.load(part_lse_ptr + (slot0 + s * q_len + qi).to(tl.int64) * pl_ss + head,
                            mask=s < n_splits, other=float("-inf"))
            m_vec = tl.maximum(m_vec, lse_s * 1.4426950408889634)
        m = tl.max(m_vec, 0)
        if HAS_SINKS:
            sink = tl.load(sinks_ptr + head) * 1.4426950408889634
            m = tl.maximum(m, sink)
        # Pass 2: weights exp(lse_s - m), weighted sum of the splits' outputs.
        denom_vec = tl.zeros([BLOCK_S], dtype=tl.float32)
        acc = tl.zeros([HEAD_DIM], dtype=tl.float32)
        for s0 in range(0, n_splits, BLOCK_S):
            s = s0 + tl.arange(0, BLOCK_S)
            s_ok = s < n_splits
            slot = (slot0 + s * q_len + qi).to(tl.int64)
            lse_s = tl.load(part_lse_ptr + slot * pl_ss + head, mask=s_ok, other=float("-inf"))
            w = tl.exp2(lse_s * 1.4426950408889634 - m)
            o_s = tl.load(part_o_ptr + slot[:, None] * po_ss + head * po_sh + d[None, :],
                          mask=s_ok[:, None], other=0.0)
            acc += tl.sum(o_s * w[:, None], 0)
            denom_vec += w
        denom = tl.sum(denom_vec, 0)
        if HAS_SINKS:
            denom += tl.exp2(sink - m)
        tl.store(out_ptr + token * o_st + head * o_sh + d, (acc / denom).to(out_ptr.dtype.element_ty))
        if WRITE_LSE:
            tl.store(lse_ptr + token * lse_st + head, (m + tl.log2(denom)) * 0.6931471805599453)


# --------------------------------------------------------------------------
# Host side
# --------------------------------------------------------------------------
def _next_pow2(n):
    return 1 << max(0, int(n) - 1).bit_length()


def _check_head_dim(D):
    if D < 16 or D & (D - 1):
        raise ValueError(f"triton_ref: head_dim must be a power of two >= 16, got {D}")


def _info(plan_info):
    info = [int(x) for x in plan_info]
    if len(info) < 1 or field(info, "magic") != 0x6D69786564:
        raise ValueError("plan_info: not a plan made by mixed_attn.plan")
    return info


def _page_size(info, k_cache):
    ps = field(info, "page_size")
    if ps != k_cache.shape[1]:
        raise ValueError(f"k_cache: page_size {k_cache.shape[1]} differs from the plan's {ps}")
    return ps


def _dummy(device):
    return torch.empty(1, dtype=torch.float32, device=device)


def _offsets(info, *names):
    """Offsets (int32 entries) of the named plan arrays in plan_meta.

    The kernels take the one metadata tensor plus these offsets, not a view per array: views at
    arbitrary offsets would change the pointers' 16-byte alignment from step to step, and Triton
    specialises (recompiles) on that; the offsets are marked do_not_specialize.
    """
    return [field(info, "off_" + n) for n in names]


def _check_meta(info, plan_meta):
    if plan_meta.dtype != torch.int32 or plan_meta.dim() != 1 or plan_meta.stride(0) != 1:
        raise ValueError(f"plan_meta must be a contiguous 1-D int32 tensor, got {plan_meta.dtype} "
                         f"{tuple(plan_meta.shape)} strides {plan_meta.stride()}")
    if plan_meta.numel() < field(info, "meta_len"):
        raise ValueError(f"plan_meta holds {plan_meta.numel()} entries, the plan needs {field(info, 'meta_len')}")


def triton_save_kv(k, v, k_cache, v_cache, kv_indices, plan_meta, plan_info, k_scale=1.0, v_scale=1.0):
    """Writes k, v [T, Hkv, D] into the paged caches at positions prefix_len .. seq_len-1 of every row.

    fp8 e4m3 caches store clamp(x * (1/scale), -448, 448) rounded to nearest even.
    """
    info = _info(plan_info)
    _check_meta(info, plan_meta)
    T, Hkv, D = k.shape
    if T == 0:
        return
    _check_head_dim(D)
    ps = _page_size(info, k_cache)
    B = field(info, "num_rows")
    is_fp8 = k_cache.dtype == _FP8
    BLOCK_T = 16 if not _interpreted() else 64
    grid = (triton.cdiv(T, BLOCK_T), Hkv)
    _save_kv_kernel[grid](
        k, v, k_cache, v_cache, kv_indices,
        plan_meta, *_offsets(info, "qo_indptr", "kv_indptr", "seq_lens"),
        B, T, max(1, B.bit_length()),
        k.stride(0), k.stride(1), v.stride(0), v.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
        (1.0 / k_scale) if is_fp8 else 1.0, (1.0 / v_scale) if is_fp8 else 1.0, ps,
        HEAD_DIM=D, BLOCK_T=BLOCK_T, IS_FP8=is_fp8, ROUND_IN_FP32=_interpreted(),
        num_warps=4,
    )


def _scales(D, sm_scale, k_scale, kv_is_fp8):
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(D)
    ks = float(k_scale) if kv_is_fp8 else 1.0
    return sm_scale * ks * _LOG2E, sm_scale * ks


def _extend_config(D, rows_per_tile):
    """(BLOCK_M, BLOCK_N, num_warps, num_stages) of the extend kernel; rows = tile tokens x group."""
    if _interpreted():
        return max(16, min(64, _next_pow2(rows_per_tile))), 32, 4, 1
    # Hopper: one warpgroup per 64 query rows (wgmma). All of these compile without register
    # spills for sm_90a (ptxas -v, triton 3.6 and 3.9, every feature on).
    if D <= 128:
        block_m = max(16, min(128, _next_pow2(rows_per_tile)))
        return block_m, 64, (8 if block_m >= 128 else 4), 2
    block_m = max(16, min(64, _next_pow2(rows_per_tile)))
    return block_m, 32, (8 if block_m >= 64 else 4), 2


def _decode_config(D, group):
    """(BLOCK_N, num_warps, num_stages) of the split-KV decode stage 1."""
    if _interpreted():
        return 32, 4, 1
    return (64 if D <= 128 else 32), 4, 2


def triton_extend(q, k_cache, v_cache, kv_indices, plan_meta, plan_info, out, lse=None, sinks=None,
                  sm_scale=None, logit_cap=0.0, window_left=-1, k_scale=1.0, v_scale=1.0):
    """Extend kernel over every tile of the plan's extend_tiles (no-op when there is none)."""
    info = _info(plan_info)
    Nt = field(info, "num_extend_tiles")
    if Nt == 0:
        return
    _check_meta(info, plan_meta)
    T, Hq, D = q.shape
    _check_head_dim(D)
    Hkv = k_cache.shape[2]
    group = Hq // Hkv
    ps = _page_size(info, k_cache)
    tt = field(info, "extend_tile_tokens")
    fp8 = k_cache.dtype == _FP8
    qk_scale_log2, qk_scale = _scales(D, sm_scale, k_scale, fp8)
    rows = tt * group
    BLOCK_M, BLOCK_N, warps, stages = _extend_config(D, rows)
    grid = (Nt, Hkv, triton.cdiv(rows, BLOCK_M))
    dev = q.device
    _extend_kernel[grid](
        q, k_cache, v_cache, out, lse if lse is not None else _dummy(dev),
        sinks if sinks is not None else _dummy(dev), kv_indices,
        plan_meta, *_offsets(info, "qo_indptr", "kv_indptr", "seq_lens", "extend_tiles"),
        q.stride(0), q.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
        out.stride(0), out.stride(1), lse.stride(0) if lse is not None else 0,
        qk_scale_log2, qk_scale, float(logit_cap), int(window_left),
        float(v_scale) if fp8 else 1.0, ps, tt, group,
        HEAD_DIM=D, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
        HAS_CAP=logit_cap > 0, HAS_WINDOW=window_left >= 0, HAS_SINKS=sinks is not None,
        WRITE_LSE=lse is not None, DOT_F32=_interpreted(),
        num_warps=warps, num_stages=stages,
    )


def triton_decode(q, k_cache, v_cache, kv_indices, plan_meta, plan_info, partial_out, partial_lse, out,
                  lse=None, sinks=None, sm_scale=None, logit_cap=0.0, window_left=-1, k_scale=1.0,
                  v_scale=1.0, merge=True):
    """Split-KV decode over the plan's decode rows: stage-1 partials into the arena, then (merge=True) stage 2.

    partial_out [>= num_partials, Hq, D] fp32 and partial_lse [>= num_partials, Hq] fp32 are the arena
    slices; slot decode_split_indptr[d] + s * q_len + i holds split s of query i of decode row d.
    """
    info = _info(plan_info)
    Nd = field(info, "num_decode_rows")
    if Nd == 0:
        return
    _check_meta(info, plan_meta)
    T, Hq, D = q.shape
    _check_head_dim(D)
    Hkv = k_cache.shape[2]
    group = Hq // Hkv
    ps = _page_size(info, k_cache)
    num_partials = field(info, "num_partials")
    if partial_out is None or partial_lse is None:
        raise ValueError("partial_out / partial_lse: the plan has decode rows, the arena is required")
    if partial_out.shape[0] < num_partials or partial_lse.shape[0] < num_partials:
        raise ValueError(f"partial_out: the plan needs {num_partials} arena slots, got {partial_out.shape[0]}")
    if partial_out.dtype != torch.float32 or partial_lse.dtype != torch.float32:
        raise ValueError("partial_out / partial_lse must be float32")
    fp8 = k_cache.dtype == _FP8
    qk_scale_log2, qk_scale = _scales(D, sm_scale, k_scale, fp8)
    max_splits = field(info, "max_splits")
    BLOCK_H = max(16, _next_pow2(field(info, "decode_max_q") * group))  # (query, head) rows of a decode row
    BLOCK_N, dec_warps, dec_stages = _decode_config(D, group)
    _decode_partial_kernel[(Nd, Hkv, max_splits)](
        q, k_cache, v_cache, kv_indices, partial_out, partial_lse,
        plan_meta, *_offsets(info, "qo_indptr", "kv_indptr", "seq_lens", "decode_rows", "decode_split_indptr",
                             "decode_kv_start", "decode_chunk_tokens"),
        q.stride(0), q.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
        partial_out.stride(0), partial_out.stride(1), partial_lse.stride(0),
        qk_scale_log2, qk_scale, float(logit_cap), int(window_left),
        float(v_scale) if fp8 else 1.0, ps, group,
        HEAD_DIM=D, BLOCK_H=BLOCK_H, BLOCK_N=BLOCK_N,
        HAS_CAP=logit_cap > 0, HAS_WINDOW=window_left >= 0, DOT_F32=_interpreted(),
        num_warps=dec_warps, num_stages=dec_stages,
    )
    if not merge:
        return
    dev = q.device
    _decode_merge_kernel[(Nd, Hq)](
        partial_out, partial_lse, out, lse if lse is not None else _dummy(dev),
        sinks if sinks is not None else _dummy(dev),
        plan_meta, *_offsets(info, "qo_indptr", "decode_rows", "decode_split_indptr"),
        partial_out.stride(0), partial_out.stride(1), partial_lse.stride(0),
        out.stride(0), out.stride(1), lse.stride(0) if lse is not None else 0,
        HEAD_DIM=D, BLOCK_S=16,  # fixed, not from the plan: the merge order never depends on the batch
        HAS_SINKS=sinks is not None, WRITE_LSE=lse is not None,
        num_warps=4 if D >= 128 else 2,
    )


def _check_forward(info, q, k, v, k_cache, v_cache, kv_indices, plan_meta, out, lse, sinks):
    """Shape, dtype and device checks of triton_forward (the oracle trusts the plan's lengths)."""
    if q.dim() != 3:
        raise ValueError(f"q must be [T, Hq, D], got {tuple(q.shape)}")
    T, Hq, D = q.shape
    if T != field(info, "num_tokens"):
        raise ValueError(f"q: {T} tokens but the plan has {field(info, 'num_tokens')}")
    if (Hq, D) != (field(info, "num_qo_heads"), field(info, "head_dim")):
        raise ValueError(f"q: heads/head_dim {(Hq, D)} differ from the plan's "
                         f"{(field(info, 'num_qo_heads'), field(info, 'head_dim'))}")
    Hkv = field(info, "num_kv_heads")
    for name, c in (("k_cache", k_cache), ("v_cache", v_cache)):
        if c.dim() != 4 or c.shape[2] != Hkv or c.shape[3] != D or c.shape[1] != field(info, "page_size"):
            raise ValueError(f"{name} must be [pages, {field(info, 'page_size')}, {Hkv}, {D}], got {tuple(c.shape)}")
        if c.dtype not in (q.dtype, _FP8) or c.dtype != k_cache.dtype:
            raise ValueError(f"{name}: dtype {c.dtype} (q is {q.dtype}; caches: q's dtype or float8_e4m3fn)")
    if (k is None) != (v is None):
        raise ValueError("k and v: give both (save) or neither (no save)")
    for name, x in (("k", k), ("v", v)):
        if x is not None and (tuple(x.shape) != (T, Hkv, D) or x.dtype != q.dtype):
            raise ValueError(f"{name} must be [{T}, {Hkv}, {D}] of {q.dtype}, got {tuple(x.shape)} {x.dtype}")
    if tuple(out.shape) != (T, Hq, D) or out.dtype != q.dtype:
        raise ValueError(f"out must be [{T}, {Hq}, {D}] of {q.dtype}, got {tuple(out.shape)} {out.dtype}")
    if lse is not None and (tuple(lse.shape) != (T, Hq) or lse.dtype != torch.float32):
        raise ValueError(f"lse must be [{T}, {Hq}] float32, got {tuple(lse.shape)} {lse.dtype}")
    if sinks is not None and (tuple(sinks.shape) != (Hq,) or sinks.dtype != torch.float32):
        raise ValueError(f"sinks must be [{Hq}] float32, got {tuple(sinks.shape)} {sinks.dtype}")
    if kv_indices.dtype != torch.int32 or kv_indices.numel() < field(info, "num_kv_pages"):
        raise ValueError(f"kv_indices must be int32 with >= {field(info, 'num_kv_pages')} entries")
    for name, x in (("q", q), ("k", k), ("v", v), ("k_cache", k_cache), ("v_cache", v_cache), ("out", out),
                    ("lse", lse), ("sinks", sinks), ("kv_indices", kv_indices), ("plan_meta", plan_meta)):
        if x is not None and x.device != q.device:
            raise ValueError(f"{name} is on {x.device}, q on {q.device}")
        if x is not None and x.dim() > 0 and x.stride(-1) != 1:
            raise ValueError(f"{name}: the last dimension must be contiguous")


def triton_forward(q, k, v, k_cache, v_cache, kv_indices, plan_meta, plan_info, partial_out, partial_lse,
                   out, lse, sinks, sm_scale, logit_cap, window_left, k_scale, v_scale):
    """The whole mixed step of one layer, same arguments as torch.ops.mixed_attn.forward.

    KV save first (when k and v are given), then the extend tiles, then the split-KV decode rows
    (partials into partial_out / partial_lse, merged into out and lse). lse None: not written.
    """
    info = _info(plan_info)
    _check_forward(info, q, k, v, k_cache, v_cache, kv_indices, plan_meta, out, lse, sinks)
    if k is not None:
        triton_save_kv(k, v, k_cache, v_cache, kv_indices, plan_meta, info, k_scale, v_scale)
    opts = dict(sinks=sinks, sm_scale=sm_scale, logit_cap=logit_cap, window_left=window_left,
                k_scale=k_scale, v_scale=v_scale)
    triton_extend(q, k_cache, v_cache, kv_indices, plan_meta, info, out, lse, **opts)
    triton_decode(q, k_cache, v_cache, kv_indices, plan_meta, info, partial_out, partial_lse, out, lse, **opts)
