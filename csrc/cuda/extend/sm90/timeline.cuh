// Lab instrumentation of the sm_90a extend kernel: per (CTA, item) timestamps of the roles'
// phases (%globaltimer, ns), to see where an item's fixed cost goes (benchmarks/RESULTS.md,
// session 9: about 9.5 us an item beside its keys). Off unless the build defines
// MA_SM90_TIMELINE=1 (scripts/build_inplace.sh "-DCMAKE_CUDA_FLAGS=-DMA_SM90_TIMELINE=1"); then
// every stamp macro below expands to a store by one thread of the role, and each extend
// instantiation file exports a C function that copies its records out
// (ma_sm90_timeline_hd{64,128,256}: tools/sm90_timeline.py reads them through ctypes). Off, the
// macros expand to nothing and the kernel is unchanged.
#pragma once
#include <cstdint>

#ifndef MA_SM90_TIMELINE
#define MA_SM90_TIMELINE 0
#endif

namespace mixed_attn::gpu::extend_detail {

// The stamps of one record, in the order of the roles' work on an item.
enum Sm90TimelineEvent : int {
  kTlProducerStart = 0,  // producer thread 0 begins the item
  kTlProducerQ,          // ... has issued the first pass's Q copies
  kTlProducerFirstKv,    // ... has issued the first K tile's copies
  kTlProducerEnd,        // ... has issued the item's last V tile
  kTlConsumerStart,      // consumer thread 128 (warpgroup 1, warp 0, lane 0) begins the item
  kTlConsumerQ,          // ... has seen the first pass's Q land
  kTlConsumerFirstS,     // ... has the first S tile in registers
  kTlConsumerMainloop,   // ... has the last pass's last P V done
  kTlConsumerEnd,        // ... has stored the last pass's output
  kTlNumEvents
};
constexpr int kTlRounds = 32;              // records per CTA: items beyond are not recorded
constexpr int kTlCapacity = 1 << 15;       // records per instantiation file
struct Sm90TimelineRecord {
  uint32_t cta, sm, item, valid;
  uint64_t t[kTlNumEvents + 1];
};

#if MA_SM90_TIMELINE
// One buffer per instantiation file (no relocatable device code: each file's module has its own).
static __device__ Sm90TimelineRecord g_sm90_timeline[kTlCapacity];

__device__ __forceinline__ uint64_t sm90_globaltimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ uint32_t sm90_smid() {
  uint32_t s;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
  return s;
}
// The record of round r of this CTA, or null past the buffer.
__device__ __forceinline__ uint64_t* sm90_timeline_slot(int r, int item, bool writer) {
  const int64_t index = int64_t(blockIdx.x) * kTlRounds + r;
  if (r >= kTlRounds || index >= kTlCapacity) return nullptr;
  Sm90TimelineRecord& rec = g_sm90_timeline[index];
  if (writer) {
    rec.cta = blockIdx.x;
    rec.sm = sm90_smid();
    rec.item = uint32_t(item);
    rec.valid = 1;
  }
  return rec.t;
}
#define MA_TL_BIND(ring, r, item, thread_is_stamper) \
  (ring).tl = (thread_is_stamper) ? sm90_timeline_slot((r), (item), (thread_is_stamper)) : nullptr
#define MA_TL_STAMP(ring, ev, cond)                                           \
  do {                                                                        \
    if ((ring).tl != nullptr && (cond)) (ring).tl[(ev)] = sm90_globaltimer(); \
  } while (0)
// Host: copies up to max_records records of this file's buffer into dst (host memory) and,
// when reset != 0, zeroes the buffer. Returns 0 or a CUDA error code.
#define MA_SM90_TIMELINE_EXPORT(name)                                                         \
  extern "C" int name(void* dst, int max_records, int reset) {                                \
    using mixed_attn::gpu::extend_detail::g_sm90_timeline;                                    \
    using mixed_attn::gpu::extend_detail::kTlCapacity;                                        \
    using mixed_attn::gpu::extend_detail::Sm90TimelineRecord;                                 \
    const int n = max_records < kTlCapacity ? max_records : kTlCapacity;                      \
    cudaError_t e = cudaSuccess;                                                              \
    if (dst != nullptr && n > 0)                                                              \
      e = cudaMemcpyFromSymbol(dst, g_sm90_timeline, sizeof(Sm90TimelineRecord) * size_t(n)); \
    if (e == cudaSuccess && reset) {                                                          \
      void* p = nullptr;                                                                      \
      e = cudaGetSymbolAddress(&p, g_sm90_timeline);                                          \
      if (e == cudaSuccess) e = cudaMemset(p, 0, sizeof(g_sm90_timeline));                    \
    }                                                                                         \
    return int(e);                                                                            \
  }
#else
#define MA_TL_BIND(ring, r, item, thread_is_stamper) \
  do {                                               \
  } while (0)
#define MA_TL_STAMP(ring, ev, cond) \
  do {                              \
  } while (0)
#endif

}  // namespace mixed_attn::gpu::extend_detail
