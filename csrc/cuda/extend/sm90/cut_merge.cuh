// Cut items of the sm_90a extend kernel's persistent launch (docs/extend_work_balance.md): the
// plan may run its costliest (tile, head group) items as `parts` units each, every unit over a
// share of the item's K/V tiles (the same shares as a KV split's ranks), dealt to the persistent
// CTAs after the whole items. The parts of one item run on different CTAs at different times, so
// unlike a KV split's cluster (kv_split_merge.cuh) they meet in global memory: each parks its
// unnormalised O, row max and row sum in the arena and counts itself in the item's counter; the
// one that finds every other part already counted merges all of them, in part order (its bits do
// not depend on which part finished last: they equal a KV split's over the same shares), and
// runs the epilogue. No unit waits for another, so no schedule can deadlock.
#pragma once
#include <cstdint>

#include "cuda/extend/args.cuh"
#include "cuda/extend/sm90/kv_split_merge.cuh"  // kv_split_partial_f4: the same per-thread layout
#include "cuda/extend/sm90/traits.cuh"
#include "cuda/extend/sm90/wgmma.cuh"  // MA_EXTEND_HAS_WGMMA

namespace mixed_attn::gpu::extend_detail {

#if MA_EXTEND_HAS_WGMMA
// Barrier 2 among the consumer warpgroups only (0: __syncthreads, 1: the producer's).
template <int kConsumerThreads>
__device__ __forceinline__ void consumer_sync() {
  asm volatile("bar.sync 2, %0;\n" ::"n"(kConsumerThreads) : "memory");
}

// Thread ctid's float4s of part `part` of cut item `cut` (the layout of kv_split_merge.cuh:
// float4 n < kNTilesO is o_acc[n], float4 kNTilesO is (max0, max1, sum0, sum1), each
// kConsumerThreads apart, so that a warp's stores and loads are 512 contiguous bytes).
template <int kHeadDim, int kWGs>
__device__ __forceinline__ float4* cut_part_f4(const ExtendArgs& args, const Sm90Work& w, int part, int ctid) {
  return reinterpret_cast<float4*>(args.cut_partials) +
         (int64_t(w.cut) * w.kv_splits + part) * kv_split_partial_f4<kHeadDim, kWGs>() + ctid;
}

// Every consumer thread of the unit: parks its partial, then learns whether this unit is the
// item's last (true: it merges every part and runs the epilogue; the counter is already back at
// zero for the next launch). The stores are made visible at GPU scope before the count
// (__threadfence, then the consumer barrier, then one thread's atomic); the last unit's fence
// after the count orders the parts' loads after every other part's stores.
template <int kHeadDim, int kWGs, typename T>
__device__ __forceinline__ bool cut_part_done(const ExtendArgs& args, const Sm90Smem<T>& sm, const Sm90Work& w, int tid,
                                              const float (&o_acc)[kHeadDim / 8][4], const float (&row_max)[2],
                                              const float (&row_sum)[2]) {
  using Tr = Sm90Traits<kHeadDim, kWGs>;
  constexpr int kNTilesO = kHeadDim / 8;
  constexpr int kConsumerThreads = 128 * Tr::kConsumerWGs;
  const int ctid = tid - 128;
  float4* dst = cut_part_f4<kHeadDim, kWGs>(args, w, w.split_rank, ctid);
#pragma unroll
  for (int n = 0; n < kNTilesO; ++n)
    __stcg(dst + n * kConsumerThreads, make_float4(o_acc[n][0], o_acc[n][1], o_acc[n][2], o_acc[n][3]));
  __stcg(dst + kNTilesO * kConsumerThreads, make_float4(row_max[0], row_max[1], row_sum[0], row_sum[1]));
  __threadfence();
  consumer_sync<kConsumerThreads>();
  if (ctid == 0) {
    const bool last = atomicAdd(&args.cut_counters[w.cut], 1) == w.kv_splits - 1;
    if (last) args.cut_counters[w.cut] = 0;  // every part has counted: ready for the next launch
    __threadfence();
    *reinterpret_cast<volatile int*>(sm.cut_merge) = last ? 1 : 0;
  }
  consumer_sync<kConsumerThreads>();
  return *reinterpret_cast<volatile int*>(sm.cut_merge) != 0;
}
#endif  // MA_EXTEND_HAS_WGMMA

}  // namespace mixed_attn::gpu::extend_detail
