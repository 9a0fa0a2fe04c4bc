// Epilogue of the sm_90a extend kernel's consumers: the row sums reduced over the four lanes
// of a row, the sink and the normalisation (finish_row, shared with the portable kernel), then
// O as b16 pairs into out and, when asked, the natural-log LSE (one lane per row).
#pragma once
#include <cstdint>

#include "cuda/arch/sm80.cuh"  // MmaType
#include "cuda/extend/args.cuh"
#include "cuda/extend/sm90/traits.cuh"
#include "cuda/extend/sm90/wgmma.cuh"  // MA_EXTEND_HAS_WGMMA

namespace mixed_attn::gpu::extend_detail {

#if MA_EXTEND_HAS_WGMMA
// One consumer thread's rows row0 and row0 + 8 of the CTA (row = query * pack + head): its O
// accumulators (mma.sync C layout per 8 columns, lane column pair t4), unnormalised, the row
// maxes and the thread's partial row sums. Rows from rows_valid on (past the pass's queries) are
// not written.
template <int kHeadDim, typename T>
__device__ __forceinline__ void write_output(const ExtendArgs& args, const Sm90Work& w, T* out_ptr, int row0, int t4,
                                             int pass_q0, int rows_valid, const float (&o_acc)[kHeadDim / 8][4],
                                             const float (&row_max)[2], const float (&row_sum)[2]) {
  constexpr int kNTilesO = kHeadDim / 8;
  const AttentionCommon& a = args.a;
  const int pack = w.pack;
  const float* sinks = a.maybe_sinks;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float l = row_sum[i];
    l += MA_SHFL_XOR(l, 1);
    l += MA_SHFL_XOR(l, 2);
    const int r = row0 + i * 8;
    const bool valid = r < rows_valid;
    const int h = w.q_head0 + (valid ? r % pack : 0);
    const RowFinish fin = finish_row(l, row_max[i], sinks, h, args.out_scale);
    if (valid) {
      const int token = w.token0 + pass_q0 + r / pack;
      T* dst = out_ptr + int64_t(token) * a.out_stride_token + int64_t(h) * a.out_stride_head;
#pragma unroll
      for (int n = 0; n < kNTilesO; ++n)
        MmaType<T>::store2(dst + n * 8 + 2 * t4, o_acc[n][2 * i] * fin.inv_l, o_acc[n][2 * i + 1] * fin.inv_l);
      if (a.maybe_lse != nullptr && t4 == 0) a.maybe_lse[int64_t(token) * a.lse_stride_token + h] = fin.lse;
    }
  }
}
#endif  // MA_EXTEND_HAS_WGMMA

}  // namespace mixed_attn::gpu::extend_detail
