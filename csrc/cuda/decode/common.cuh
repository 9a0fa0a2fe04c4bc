// Pieces shared by every split-KV decode kernel (CUDA and HIP): the per-CTA
// view of one (decode row, split, block of (query, head) pairs), element conversions, the finalisation of a
// head's output (partial into the arena, or the final output for a row with a
// single split), and the merge kernel.
//
// Units: inside the kernels scores live in the log2 domain (score * log2 e), so
// every exponential is an exp2; LSEs leave the kernels in natural log units.
#pragma once
#include <cstdint>
#include <type_traits>

#include "cuda/common/math.cuh"
#include "cuda/common/pdl.cuh"
#include "cuda/common/softmax.cuh"
#include "mixed_attn/compat.h"
#include "mixed_attn/params.h"
#include "cuda/common/find_owner.h"
#include "cuda/common/plan_counts.cuh"
#include "mixed_attn/launch_policy.h"

namespace mixed_attn::gpu::decode {

// Derived per-launch constants, computed once on the host.
struct DecodeConsts {
  int32_t row_blocks;   // CTAs per (decode row, kv-head slot, split): a row's (query, head) pairs of one
                        // slot, p = query * group + head, are served 16 * plan.decode_cta_blocks a CTA
  int32_t kv_pack;      // kv heads one CTA reads (a slot; plan.decode_kv_pack: 1, or 2 at head dim 64)
  int32_t group;        // (query, head) pairs per query of a slot: Hq / Hkv x kv_pack
  int32_t page_shift;   // log2(page_size) when it is a power of two, else -1
  int32_t page_mask;    // page_size - 1 (power of two only)
  float score_scale;    // no cap: score_log2 = (q.k_raw) * score_scale
  float cap_inner;      // cap: score_log2 = cap_outer * tanh((q.k_raw) * cap_inner)
  float cap_outer;
  bool has_cap;
  // Byte strides of the caches (page, slot), for the copies' address math (tc_common.cuh): kernel
  // parameters sit in uniform registers, so a row's address costs multiply-adds and no widening.
  uint64_t k_page_bytes, k_slot_bytes, v_page_bytes, v_slot_bytes;
};

inline DecodeConsts make_consts(const AttentionCommon& a) {
  DecodeConsts c{};
  c.kv_pack = a.plan.decode_kv_pack;
  c.group = a.num_qo_heads / a.num_kv_heads * c.kv_pack;
  c.row_blocks = decode_row_ctas(a.plan.decode_max_q, c.group, a.plan.decode_cta_blocks);
  c.page_shift = -1;
  c.page_mask = 0;
  if ((a.page_size & (a.page_size - 1)) == 0) {
    int s = 0;
    while ((1 << s) < a.page_size) ++s;
    c.page_shift = s;
    c.page_mask = a.page_size - 1;
  }
  const uint64_t elem = a.kv_dtype == DType::kFloat8E4M3 ? 1 : 2;
  c.k_page_bytes = uint64_t(a.k_stride_page) * elem;
  c.k_slot_bytes = uint64_t(a.k_stride_slot) * elem;
  c.v_page_bytes = uint64_t(a.v_stride_page) * elem;
  c.v_slot_bytes = uint64_t(a.v_stride_slot) * elem;
  const float k_scale = a.kv_dtype == DType::kFloat8E4M3 ? a.k_scale : 1.0f;
  c.has_cap = a.logit_cap > 0.0f;
  c.score_scale = a.sm_scale * k_scale * kLog2e;
  c.cap_inner = c.has_cap ? a.sm_scale * k_scale / a.logit_cap : 0.0f;
  c.cap_outer = c.has_cap ? a.logit_cap * kLog2e : 0.0f;
  return c;
}

// What one CTA needs to know about its (decode row, split). Query i of the row's q_len
// sits at position seq_len - q_len + i and sees keys up to it (causal among the row's new
// tokens) and, with a window, from position - window_left.
struct SplitView {
  int32_t token;        // index of the row's first query token in q / out
  int32_t q_len;        // the row's query tokens (1 for a plain decode row)
  int32_t seq_len;
  int32_t key_begin;    // first key of this split
  int32_t key_end;      // one past its last key
  int32_t visible_begin;// first key the first query sees (window); earlier keys are masked
  int32_t num_splits;   // splits of this row: 1 means this CTA writes the final output
  int32_t slot;         // arena slot of this split's query 0 (query i: slot + i)
  const int32_t* pages; // the row's page list (kv_indices + kv_indptr[row])
};

// Keys [visible_begin(i), causal_end(i)) of query i of the split's row, clipped to the split.
__device__ __forceinline__ int32_t query_key_end(const SplitView& v, int32_t i) {
  return min(v.key_end, v.seq_len - v.q_len + i + 1);
}
__device__ __forceinline__ int32_t query_visible_begin(const SplitView& v, int32_t window_left, int32_t i) {
  return window_left >= 0 ? max(0, v.seq_len - v.q_len + i - window_left) : 0;
}

// Fills `v` for one split of one decode row; false when there is none. Normal plans
// launch (split, head, decode row) grids sized by the longest row: (x, z) = (split, row),
// and CTAs past a shorter row's splits exit. Graph-safe plans launch over the bucket's
// arena slots (x = slot, z = 0), whose row find_owner finds in the split offsets (one
// guess, exact when every row holds the same slots, else a search: dependent loads before
// the CTA's first copy, so normal plans keep the direct grid); CTAs past the step's slots
// exit, and so do those on a slot of query i > 0 (a row of q tokens holds q slots per
// split, split-major: the CTA of query 0's slot serves all q).
__device__ __forceinline__ bool load_split_view(const AttentionCommon& a, int x, int z, SplitView& v) {
  const PlanView& plan = a.plan;
  int d, s;
  if (plan.maybe_counts == nullptr) {
    d = z;
    s = x;
  } else {
    // kCountPartials: the step's decode slots, decode_split_indptr[num_rows] (read beside the
    // row count, not after it).
    const int slots = plan.maybe_counts[kCountPartials];
    if (x >= slots) return false;
    d = find_owner(plan.decode_split_indptr, plan.maybe_counts[kCountDecodeRows], slots, x);
    s = x - plan.decode_split_indptr[d];
  }
  const int32_t row = plan.decode_rows[d];
  v.token = plan.qo_indptr[row];
  v.q_len = plan.qo_indptr[row + 1] - v.token;
  const int32_t first_slot = plan.decode_split_indptr[d];
  const int32_t slots = plan.decode_split_indptr[d + 1] - first_slot;
  if (v.q_len == 1) {
    v.num_splits = slots;
  } else {
    v.num_splits = slots / v.q_len;
    if (plan.maybe_counts != nullptr) {  // x ran over slots: keep query 0's, as split s
      if (s % v.q_len != 0) return false;
      s /= v.q_len;
    }
  }
  if (s >= v.num_splits) return false;
  v.seq_len = plan.seq_lens[row];
  const int32_t chunk = plan.decode_chunk_tokens[d];
  v.key_begin = plan.decode_kv_start[d] + s * chunk;
  v.key_end = min(v.key_begin + chunk, v.seq_len);
  v.visible_begin = query_visible_begin(v, a.window_left, 0);
  v.slot = first_slot + s * v.q_len;
  v.pages = a.kv_indices + plan.kv_indptr[row];
  return true;
}

__device__ __forceinline__ int32_t page_of_key(const SplitView& v, const DecodeConsts& c, int32_t page_size,
                                               int32_t key, int32_t& slot) {
  if (c.page_shift >= 0) {
    slot = key & c.page_mask;
    return v.pages[key >> c.page_shift];
  }
  slot = key % page_size;
  return v.pages[key / page_size];
}

// The logit cap (common/math.cuh) with this launch's constants; without a cap just the scale.
__device__ __forceinline__ float capped_score(float raw, const DecodeConsts& c) {
  if (!c.has_cap) return raw * c.score_scale;
  return logit_cap_log2(raw, c.cap_inner, c.cap_outer);
}

// Through compat.h's conversions: they also cover ROCm's older bf16 class.
template <typename T>
__device__ __forceinline__ float to_float(T x) {
  return ma_to_float(x);
}
template <typename T>
__device__ __forceinline__ T from_float(float x) {
  return ma_from_float<T>(x);
}

// Writes 4 consecutive output values of head `hq` of a row (q dtype).
template <typename OutT>
__device__ __forceinline__ void store_out4(OutT* dst, const float (&v)[4]) {
  union {
    OutT h[4];
    uint2 u;
  } pack;
#pragma unroll
  for (int i = 0; i < 4; ++i) pack.h[i] = from_float<OutT>(v[i]);
  *reinterpret_cast<uint2*>(dst) = pack.u;
}

// Stage-2 merge: one warp per (decode row, q head) of rows with more than one
// split, over the row's query tokens. Reads the row's splits in order (so the result
// does not depend on the launch), adds the sink once, writes out (q dtype) and lse.
template <int D, typename OutT>
__global__ void decode_merge_kernel(const DecodeParams p) {
  constexpr int kVec = D / kWarpSize;  // floats per lane
  static_assert(kVec >= 1, "head_dim must be at least the warp width");
  pdl_wait_for_prerequisite();  // stage 1's partials (a programmatic launch starts before they are all written)
  const AttentionCommon& a = p.attn;
  const int warps = blockDim.x / kWarpSize;
  const int item = blockIdx.x * warps + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int Hq = a.num_qo_heads;
  const int rows = plan_count(a.plan, kCountDecodeRows, a.plan.num_decode_rows);
  if (item >= rows * Hq) return;
  // A graph-safe bucket launches the merge whenever a step may split; a step of one slot a row
  // (one split of one query each: most decode-only steps) has nothing to merge, known from the
  // counts alone, without the row's three dependent loads below.
  if (a.plan.maybe_counts != nullptr && a.plan.maybe_counts[kCountPartials] == rows) return;
  const int d = item / Hq, h = item % Hq;
  const int row = a.plan.decode_rows[d];
  const int token0 = a.plan.qo_indptr[row];
  const int q_len = a.plan.qo_indptr[row + 1] - token0;
  const int first = a.plan.decode_split_indptr[d];
  const int n = (a.plan.decode_split_indptr[d + 1] - first) / q_len;
  if (n <= 1) return;  // stage 1 wrote this row directly
  const float sink = a.maybe_sinks ? a.maybe_sinks[h] * kLog2e : -INFINITY;

  for (int qi = 0; qi < q_len; ++qi) {
    // Split s of query qi is slot first + s * q_len + qi. The splits' states (o normalised,
    // lse natural log) merged as in common/softmax.cuh, in log2 units: state s has max
    // lse_s log2 e and sum 1; the sink is one more state with o = 0.
    auto slot = [&](int s) { return int64_t(first) + int64_t(s) * q_len + qi; };
    float m = sink;
    for (int s = 0; s < n; ++s) m = fmaxf(m, p.partial_lse[slot(s) * Hq + h] * kLog2e);
    float acc[kVec];
#pragma unroll
    for (int i = 0; i < kVec; ++i) acc[i] = 0.0f;
    float denom = 0.0f;
    for (int s = 0; s < n; ++s) {
      const float w = state_weight(p.partial_lse[slot(s) * Hq + h] * kLog2e, m);
      denom += w;
      const float* src = p.partial_out + (slot(s) * Hq + h) * D + lane * kVec;
#pragma unroll
      for (int i = 0; i < kVec; ++i) acc[i] += w * src[i];
    }
    denom += state_weight(sink, m);
    const float inv = 1.0f / denom;
    const int64_t token = token0 + qi;
    OutT* dst = static_cast<OutT*>(a.out) + token * a.out_stride_token + int64_t(h) * a.out_stride_head + lane * kVec;
#pragma unroll
    for (int i = 0; i < kVec; ++i) dst[i] = from_float<OutT>(acc[i] * inv);
    if (a.maybe_lse != nullptr && lane == 0) a.maybe_lse[token * a.lse_stride_token + h] = state_lse(m, denom);
  }
}

}  // namespace mixed_attn::gpu::decode

namespace mixed_attn::gpu::decode {

// Combines the states of `parts` independent key subsets of one head (max m_w
// in log2 units, sum l_w, unnormalised output o_w; the merge of common/softmax.cuh) into
// weights f_w such that
// the head's output is sum_w f_w * o_w. For a row with one split (`final_out`)
// the sink joins the denominator here and lse is the row's LSE; otherwise the
// result is the split's partial (no sink; -inf and zero weights if no key).
// The parts are visited in a fixed order: the result does not depend on timing.
template <int kParts>
__device__ __forceinline__ void combine_parts(const float* m_parts, const float* l_parts, int stride, bool final_out,
                                              float sink_log2, float v_scale, float (&f)[kParts], float& lse) {
  float m = final_out ? sink_log2 : -INFINITY;
#pragma unroll
  for (int w = 0; w < kParts; ++w) m = fmaxf(m, m_parts[w * stride]);
  if (m == -INFINITY) {
#pragma unroll
    for (int w = 0; w < kParts; ++w) f[w] = 0.0f;
    lse = -INFINITY;
    return;
  }
  float denom = final_out ? state_weight(sink_log2, m) : 0.0f;
#pragma unroll
  for (int w = 0; w < kParts; ++w) {
    f[w] = state_weight(m_parts[w * stride], m);
    denom += f[w] * l_parts[w * stride];
  }
  const float scale = v_scale / denom;
#pragma unroll
  for (int w = 0; w < kParts; ++w) f[w] *= scale;
  lse = state_lse(m, denom);
}

}  // namespace mixed_attn::gpu::decode
