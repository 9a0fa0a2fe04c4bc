// What both extend kernels (extend/portable/kernel.cuh, extend/sm90/kernel.cuh) share: the
// kernel arguments their launchers fill in from ExtendParams, and the end of a query row (sink,
// normalisation, LSE). Each kernel includes this header rather than the other kernel.
#pragma once
#include <cstdint>

#include "cuda/common/math.cuh"
#include "cuda/common/softmax.cuh"
#include "mixed_attn/compat.h"
#include "mixed_attn/launch_policy.h"  // pack_factor
#include "mixed_attn/params.h"

namespace mixed_attn::gpu::extend_detail {

struct ExtendArgs {
  AttentionCommon a;
  int pack;             // q heads per CTA (rows = query * pack + head)
  int head_groups;      // Hq / pack
  int tile_capacity;    // queries one pass of a CTA covers: kBlockM / pack
  float score_scale;    // sm_scale * k_scale (applied to q.k in fp32)
  float out_scale;      // v_scale
  float* cut_partials;  // sm_90a, a plan with cut items: the parts' partials (cut_merge.cuh) ...
  int* cut_counters;    // ... and each cut item's count of finished parts; else null
#if MA_SM90_LAB_STREAM
  int lab_stream_copies;       // lab probe (sm90/lab_stream.cuh): copies per K/V tile ...
  uint32_t lab_stream_chunk_mask;  // ... from the K cache's first (mask + 1) chunks
  int lab_stream_nonblocking;      // ... and 1: a busy slot drops the tile's remaining copies
#endif
};

// Host side, both launchers: the arguments of a kernel whose CTAs hold kBlockM = block_rows query
// rows; k_scale / v_scale: the fp8 cache's scales (1 for a b16 cache).
inline ExtendArgs make_extend_args(const AttentionCommon& a, int block_rows, float k_scale, float v_scale) {
  ExtendArgs args;
  args.a = a;
  args.pack = pack_factor(a.num_qo_heads / a.num_kv_heads, block_rows);
  args.head_groups = a.num_qo_heads / args.pack;
  args.tile_capacity = block_rows / args.pack;
  args.score_scale = a.sm_scale * k_scale;
  args.out_scale = v_scale;
  args.cut_partials = nullptr;
  args.cut_counters = nullptr;
#if MA_SM90_LAB_STREAM
  args.lab_stream_copies = 0;
  args.lab_stream_chunk_mask = 0;
  args.lab_stream_nonblocking = 0;
#endif
  return args;
}

// Host side: the (tile, head group) CTAs of a launch. A graph-safe plan covers its bucket's
// tiles (the CTAs past this step's leave at once); a normal plan its own.
inline int64_t extend_grid_blocks(const ExtendArgs& args) {
  const PlanView& plan = args.a.plan;
  const int64_t tiles = plan.maybe_counts != nullptr ? plan.graph_max_tiles : plan.num_extend_tiles;
  return tiles * args.head_groups;
}

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
