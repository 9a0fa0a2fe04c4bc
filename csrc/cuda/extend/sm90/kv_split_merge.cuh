// KV split of the sm_90a extend kernel: when a launch would leave most of its last wave idle
// (few long query tiles, e.g. 1024 new tokens over a 16k prefix: 176 CTAs on 132 SMs), the
// launcher (launch.cuh) runs each tile as a cluster of two CTAs, each over half of the tile's K/V
// tiles (mainloop.cuh). Here rank 1 writes its unnormalised O, row max and row sum into rank 0's
// shared memory (st.shared::cluster), and rank 0 waits for them; consume() (mainloop.cuh) then
// merges them into its own state before the epilogue. No global scratch, no second launch, no
// planner change. Deterministic plans are never split by the policy.
#pragma once
#include <cstdint>

#include "cuda/common/softmax.cuh"
#include "cuda/extend/sm90/sync.cuh"
#include "cuda/extend/sm90/traits.cuh"
#include "cuda/extend/sm90/wgmma.cuh"  // MA_EXTEND_HAS_WGMMA

namespace mixed_attn::gpu::extend_detail {

#if MA_EXTEND_HAS_WGMMA
__device__ __forceinline__ void st_cluster_f32x4(uint32_t addr, float a, float b, float c, float d) {
  asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "f"(a), "f"(b), "f"(c), "f"(d)
               : "memory");
}

// The hand-over through distributed shared memory, single pass (the launcher rejects split
// plans whose tiles need more). Per consumer thread: its O accumulators (mma.sync C layout per 8
// columns, unnormalised), row max and partial row sum of its rows g and g + 8 (mainloop.cuh).
// Partial of rank r, thread c: float4 n (< kNTilesO) = o_acc[n], float4 kNTilesO = (max0,
// max1, sum0, sum1), at float4 index (r - 1) * (kNTilesO + 1) * kConsumerThreads +
// n * kConsumerThreads + c of rank 0's Q + ring region (conflict-free, 16 B per lane).
template <int kHeadDim, int kWGs>
constexpr int kv_split_partial_f4() {
  return (kHeadDim / 8 + 1) * 128 * Sm90Traits<kHeadDim, kWGs>::kConsumerWGs;
}

// The hand-over point: every thread of the cluster arrives here once its CTA is done with its K/V
// tiles (rank 0's consumers with their GEMMs drained, every producer with its copies drained by
// its own cp.async.wait_all, producer.cuh, and the other ranks' consumers with their partials in
// registers). After it the other ranks may write over rank 0's Q + ring region. One cluster
// barrier (release / acquire at cluster scope) orders every copy of rank 0 before every store of
// the other ranks; racecheck still reports the pair, a false positive
// (docs/racecheck_sm90_kv_split.md).
__device__ __forceinline__ void kv_split_meet() { cluster_sync(); }

// Rank 0: waits until every other rank's partials are in place. The caller then merges them
// (mainloop.cuh, consume()).
template <typename T>
__device__ __forceinline__ void kv_split_gather(const Sm90Smem<T>& sm) {
  kv_split_meet();
  mbar_wait_cluster(sm.merge_arrived, 0);
}

// Ranks > 0: once rank 0 has freed its Q + ring region, park this thread's partial there and
// tell rank 0. The CTA has nothing left to do after it.
template <int kHeadDim, int kWGs, typename T>
__device__ __forceinline__ void kv_split_hand_over(const Sm90Smem<T>& sm, const Sm90Work& w, int tid,
                                                   const float (&o_acc)[kHeadDim / 8][4], const float (&row_max)[2],
                                                   const float (&row_sum)[2]) {
  using Tr = Sm90Traits<kHeadDim, kWGs>;
  constexpr int kNTilesO = kHeadDim / 8;
  constexpr int kConsumerThreads = 128 * Tr::kConsumerWGs;
  constexpr int kPartialF4 = kv_split_partial_f4<kHeadDim, kWGs>();
  const int ctid = tid - 128;
  float4* parked = reinterpret_cast<float4*>(sm.q);
  kv_split_meet();
  const uint32_t dst = cluster_addr(parked + (w.split_rank - 1) * kPartialF4 + ctid, 0);
#pragma unroll
  for (int n = 0; n < kNTilesO; ++n)
    st_cluster_f32x4(dst + n * kConsumerThreads * 16, o_acc[n][0], o_acc[n][1], o_acc[n][2], o_acc[n][3]);
  st_cluster_f32x4(dst + kNTilesO * kConsumerThreads * 16, row_max[0], row_max[1], row_sum[0], row_sum[1]);
  mbar_arrive_remote(cluster_addr(sm.merge_arrived, 0));
}
#endif  // MA_EXTEND_HAS_WGMMA

}  // namespace mixed_attn::gpu::extend_detail
