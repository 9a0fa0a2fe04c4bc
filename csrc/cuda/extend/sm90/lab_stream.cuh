// Lab probe for issue 14 (docs/overlap_design.md, "Session 19"), compiled in only with
// -DMA_SM90_LAB_STREAM=1 (the default build has none of it): can an extend CTA stream a decode's
// bytes from HBM beside its own K/V copies without slowing its math? The fused step (one CTA
// serving extend tiles and decode units, its producer issuing both) needs about 20 GB/s an SM on
// case B while the consumers run at full rate. Here the producer's thread 0 issues, after each
// K/V tile, MA_LAB_STREAM_COPIES (host environment, read at launch) bulk copies of
// kLabStreamBytes from a pseudo-random place in the K cache (all of its pages: cache larger than
// L2 -> HBM reads) into a ring of kLabStreamSlots scratch slots no one reads. A copy waits for
// its slot's previous copy, as a decode's reads would wait for their tile to be consumed.
#pragma once
#include <cstdint>

#include "cuda/extend/sm90/sync.cuh"
#include "cuda/extend/sm90/wgmma.cuh"  // MA_EXTEND_HAS_WGMMA

#ifndef MA_SM90_LAB_STREAM
#define MA_SM90_LAB_STREAM 0
#endif

namespace mixed_attn::gpu::extend_detail {

constexpr int kLabStreamBytes = 16384;
constexpr int kLabStreamSlots = 2;
// Only the 16-bit head-dim-128 instantiations have the room (about 46 KB free beside their ring).
template <int kHeadDim, bool kFp8>
constexpr bool lab_stream_on() {
  return MA_SM90_LAB_STREAM != 0 && kHeadDim == 128 && !kFp8;
}
// Shared memory the probe adds: its mbarriers, alignment, the slots.
template <int kHeadDim, bool kFp8>
constexpr int lab_stream_smem_bytes() {
  return lab_stream_on<kHeadDim, kFp8>() ? kLabStreamSlots * 8 + 128 + kLabStreamSlots * kLabStreamBytes : 0;
}

#if MA_EXTEND_HAS_WGMMA
// Copy n of this CTA (thread 0 of the producer only): waits for its slot's copy n - slots, then
// lands kLabStreamBytes from chunk (hash of CTA and n) & chunk_mask of the cache there. The host
// makes chunk_mask + 1 the largest power of two of whole chunks the cache holds (32-bit math: the
// producer has 32 registers).
__device__ __forceinline__ void lab_stream_copy(const void* cache, uint32_t chunk_mask, unsigned char* slots,
                                                uint64_t* full, int n) {
  const int slot = n % kLabStreamSlots;
  if (n >= kLabStreamSlots) mbar_wait(&full[slot], (n / kLabStreamSlots - 1) & 1);
  const uint32_t chunk = (blockIdx.x * 40503u + uint32_t(n) * 2654435761u) & chunk_mask;
  mbar_arrive_expect_tx(&full[slot], uint32_t(kLabStreamBytes));
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   smem_addr(slots + slot * kLabStreamBytes)),
               "l"(static_cast<const unsigned char*>(cache) + uint64_t(chunk) * kLabStreamBytes), "r"(kLabStreamBytes),
               "r"(smem_addr(&full[slot]))
               : "memory");
}
// Before the CTA leaves: every copy issued has landed (n: copies issued).
__device__ __forceinline__ void lab_stream_drain(uint64_t* full, int n) {
  for (int k = n > kLabStreamSlots ? n - kLabStreamSlots : 0; k < n; ++k)
    mbar_wait(&full[k % kLabStreamSlots], (k / kLabStreamSlots) & 1);
}
#endif  // MA_EXTEND_HAS_WGMMA

}  // namespace mixed_attn::gpu::extend_detail
