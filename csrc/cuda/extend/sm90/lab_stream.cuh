// Lab probe for issue 14 (docs/overlap_design.md, "Session 19"), compiled in only with
// -DMA_SM90_LAB_STREAM=1 (the default build has none of it): can an extend CTA stream a decode's
// bytes from HBM beside its own K/V copies without slowing its math? The fused step (one CTA
// serving extend tiles and decode units, its producer issuing both) needs about 20 GB/s an SM on
// case B while the consumers run at full rate. Here the producer's thread 0 issues, after each
// K/V tile, MA_LAB_STREAM_COPIES (host environment, read at launch) bulk copies of
// kLabStreamBytes from a pseudo-random place in the K cache (all of its pages: cache larger than
// L2 -> HBM reads) into a ring of kLabStreamSlots scratch slots no one reads. A copy waits for
// its slot's previous copy, as a decode's reads would wait for their tile to be consumed.
// Session 20's variant (MA_LAB_STREAM_NONBLOCK=1 at launch): a copy whose slot is still busy is
// not issued and the tile's remaining copies are dropped, so the producer never waits on its own
// stream (session 19's slowdown may be that wait: thread 0 blocked while the K/V tiles queue
// behind it); each CTA adds the copies it issued to a counter the probe reads back
// (ma_lab_stream_issued), which gives the bytes actually streamed. -DMA_SM90_LAB_STREAM_SLOTS /
// _KB set the ring (default 2 slots of 16 KB).
#pragma once
#include <cstdint>

#include "cuda/extend/sm90/sync.cuh"
#include "cuda/extend/sm90/wgmma.cuh"  // MA_EXTEND_HAS_WGMMA

#ifndef MA_SM90_LAB_STREAM
#define MA_SM90_LAB_STREAM 0
#endif

namespace mixed_attn::gpu::extend_detail {

#ifndef MA_SM90_LAB_STREAM_SLOTS
#define MA_SM90_LAB_STREAM_SLOTS 2
#endif
#ifndef MA_SM90_LAB_STREAM_KB
#define MA_SM90_LAB_STREAM_KB 16
#endif
constexpr int kLabStreamBytes = MA_SM90_LAB_STREAM_KB * 1024;
constexpr int kLabStreamSlots = MA_SM90_LAB_STREAM_SLOTS;
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

#if defined(MA_CUDA) && MA_SM90_LAB_STREAM
// Copies issued by every CTA of this file's launches since the last reset (ma_lab_stream_issued;
// no relocatable device code: each file's module has its own).
static __device__ unsigned long long g_lab_stream_issued;
#define MA_LAB_STREAM_EXPORT(name)                                                        \
  extern "C" int name(unsigned long long* out, int reset) {                               \
    using mixed_attn::gpu::extend_detail::g_lab_stream_issued;                            \
    cudaError_t e = cudaSuccess;                                                          \
    if (out != nullptr) e = cudaMemcpyFromSymbol(out, g_lab_stream_issued, sizeof(*out)); \
    if (e == cudaSuccess && reset) {                                                      \
      const unsigned long long zero = 0;                                                  \
      e = cudaMemcpyToSymbol(g_lab_stream_issued, &zero, sizeof(zero));                   \
    }                                                                                     \
    return int(e);                                                                        \
  }
#endif

#if MA_EXTEND_HAS_WGMMA

// Copy n of this CTA (thread 0 of the producer only): waits for its slot's copy n - slots (or,
// nonblocking, returns false without issuing when that copy has not landed), then lands
// kLabStreamBytes from chunk (hash of CTA and n) & chunk_mask of the cache there. The host makes
// chunk_mask + 1 the largest power of two of whole chunks the cache holds (32-bit math: the
// producer has 32 registers).
__device__ __forceinline__ bool lab_stream_copy(const void* cache, uint32_t chunk_mask, unsigned char* slots,
                                                uint64_t* full, int n, bool nonblocking) {
  const int slot = n % kLabStreamSlots;
  if (n >= kLabStreamSlots) {
    const int parity = (n / kLabStreamSlots - 1) & 1;
    if (nonblocking) {
      uint32_t done;
      asm volatile(
          "{\n"
          ".reg .pred p;\n"
          "mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n"
          "selp.u32 %0, 1, 0, p;\n"
          "}\n"
          : "=r"(done)
          : "r"(smem_addr(&full[slot])), "r"(parity)
          : "memory");
      if (!done) return false;
    } else {
      mbar_wait(&full[slot], parity);
    }
  }
  const uint32_t chunk = (blockIdx.x * 40503u + uint32_t(n) * 2654435761u) & chunk_mask;
  mbar_arrive_expect_tx(&full[slot], uint32_t(kLabStreamBytes));
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   smem_addr(slots + slot * kLabStreamBytes)),
               "l"(static_cast<const unsigned char*>(cache) + uint64_t(chunk) * kLabStreamBytes), "r"(kLabStreamBytes),
               "r"(smem_addr(&full[slot]))
               : "memory");
  return true;
}
// Before the CTA leaves: every copy issued has landed (n: copies issued), and the count is added.
__device__ __forceinline__ void lab_stream_drain(uint64_t* full, int n) {
  for (int k = n > kLabStreamSlots ? n - kLabStreamSlots : 0; k < n; ++k)
    mbar_wait(&full[k % kLabStreamSlots], (k / kLabStreamSlots) & 1);
#if MA_SM90_LAB_STREAM
  atomicAdd(&g_lab_stream_issued, static_cast<unsigned long long>(n));
#endif
}
#endif  // MA_EXTEND_HAS_WGMMA

}  // namespace mixed_attn::gpu::extend_detail
