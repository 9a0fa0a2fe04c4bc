// Online softmax and the merge of partial softmax states, written once for every kernel.
//
// A partial state of one query row over a subset of keys: m (max score, log2 units), l (sum of
// 2^(s - m)), o (sum of 2^(s - m) v, unnormalised). Two or more states merge as
//   M = max_i m_i,   w_i = 2^(m_i - M) (0 for an empty state, m_i = -inf),
//   l = sum_i w_i l_i,   o = sum_i w_i o_i,   lse = (M + log2 l) ln 2 (natural log).
// The online softmax is the same merge applied to (running state, one K/V tile).
#pragma once
#include "cuda/common/math.cuh"

namespace mixed_attn::gpu {

// w_i of a state with max m_part in a merge whose max is m (m >= m_part). An empty merge
// (m = -inf) subtracts 0 instead, so that exp2(-inf - -inf) never makes a NaN; an empty state
// in a non-empty merge gets exp2(-inf) = 0. One select on m, shared by all parts of a merge.
__device__ __forceinline__ float state_weight(float m_part, float m) {
  return fast_exp2(m_part - (m == -INFINITY ? 0.0f : m));
}

// LSE (natural log) of a merged state with max m (log2 units) and sum l.
__device__ __forceinline__ float state_lse(float m, float l) { return (m + log2f(l)) * kLn2; }

// One online-softmax step on the scores of one K/V tile held in the accumulator layout L
// (extend/portable/frag_layout.h: this lane holds L::kRowsPerLane rows, row i's elements of tile n are
// s[n][i * L::kCols + c]; the other lanes of a row are at lane bits L::kRowLaneShift..).
// In place: s becomes P = 2^(s * score_mult - m) (score_mult > 0: the raw q.k times the scale
// in log2 units, or 1 for scores already in log2 units). Updates the running max and this
// lane's partial row sum; alpha[i] is the factor the row's old O must be scaled by.
// Rows i >= kRowsUsed are left alone (a kernel that fills only part of the layout).
template <class L, int kRowsUsed = L::kRowsPerLane, int kN>
__device__ __forceinline__ void online_softmax_step(float (&s)[kN][4], float (&row_max)[L::kRowsPerLane],
                                                    float (&row_sum)[L::kRowsPerLane], float (&alpha)[L::kRowsPerLane],
                                                    float score_mult) {
  static_assert(L::kRowsPerLane * L::kCols == 4, "four accumulators per lane and tile");
  constexpr int kCols = L::kCols;
#pragma unroll
  for (int i = 0; i < kRowsUsed; ++i) {
    float mx = -INFINITY;
#pragma unroll
    for (int n = 0; n < kN; ++n) {
      float v = s[n][i * kCols];
#pragma unroll
      for (int c = 1; c < kCols; ++c) v = fmaxf(v, s[n][i * kCols + c]);
      mx = fmaxf(mx, v);
    }
#pragma unroll
    for (int step = 1; step < L::kLanesPerRow; step *= 2) mx = fmaxf(mx, MA_SHFL_XOR(mx, step << L::kRowLaneShift));
    // score_mult > 0, so the max of the scaled scores is the scaled max.
    const float m = fmaxf(row_max[i], mx * score_mult);
    // A row with no visible key so far keeps m = -inf; subtract 0 then so that
    // exp2(-inf - -inf) never makes a NaN.
    const float m_base = m == -INFINITY ? 0.f : m;
    alpha[i] = state_weight(row_max[i], m);  // = 2^(row_max - m_base)
    row_max[i] = m;
    float sum = 0.f;
#pragma unroll
    for (int n = 0; n < kN; ++n) {
#pragma unroll
      for (int c = 0; c < kCols; ++c) s[n][i * kCols + c] = fast_exp2(fmaf(s[n][i * kCols + c], score_mult, -m_base));
      float part = s[n][i * kCols];
#pragma unroll
      for (int c = 1; c < kCols; ++c) part += s[n][i * kCols + c];
      sum += part;
    }
    row_sum[i] = row_sum[i] * alpha[i] + sum;
  }
}

}  // namespace mixed_attn::gpu
