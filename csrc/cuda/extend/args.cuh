// What both extend kernels (extend/portable/kernel.cuh, extend/sm90/kernel.cuh) share: the
// kernel arguments their launchers fill in from ExtendParams, and the end of a query row (sink,
// normalisation, LSE). Each kernel includes this header rather than the other kernel.
#pragma once
#include "cuda/common/math.cuh"
#include "cuda/common/softmax.cuh"
#include "mixed_attn/compat.h"
#include "mixed_attn/params.h"

namespace mixed_attn::gpu::extend_detail {

struct ExtendArgs {
  AttentionCommon a;
  int pack;             // q heads per CTA (rows = query * pack + head)
  int head_groups;      // Hq / pack
  int tile_capacity;    // queries one pass of a CTA covers: kBlockM / pack
  float score_scale;    // sm_scale * k_scale (applied to q.k in fp32)
  float out_scale;      // v_scale
};

// End of a query row, shared by both extend kernels: the sink joins the
// denominator (rebased on max(m, sink) so neither term overflows), then the
// factor O is multiplied by and the natural-log LSE. l, m: the row's sum and
// max in base-2 units (m finite: every query sees at least its own key).
struct RowFinish {
  float inv_l;
  float lse;
};
__device__ __forceinline__ RowFinish finish_row(float l, float m, const float* sinks, int head, float out_scale) {
  float o_mul = 1.f;
  if (sinks != nullptr) {
    const float sink2 = sinks[head] * kLog2e;
    const float m_new = fmaxf(m, sink2);
    o_mul = fast_exp2(m - m_new);
    l = l * o_mul + fast_exp2(sink2 - m_new);
    m = m_new;
  }
  return RowFinish{o_mul * out_scale / l, state_lse(m, l)};  // the LSE every path writes
}

}  // namespace mixed_attn::gpu::extend_detail
