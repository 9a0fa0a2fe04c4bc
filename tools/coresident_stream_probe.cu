// Issue 14, session 12: what does a small CTA stream from global memory while it runs beside a
// big CTA on the same SM? Session 12 found the narrow decode (64 threads, 104 registers, 48 KB
// ring) running beside the lab extend (384 threads, 136 registers, 167 KB), but at ~3.3 GB/s a
// CTA against ~8 GB/s alone (benchmarks/RESULTS.md, session 12). This probe separates the
// candidate throttles with synthetic kernels of the same budgets:
//   big (132 CTAs, one an SM, launched first), busy for ~2 ms with one of
//     idle   - a %globaltimer spin (issues almost nothing),
//     fma    - FP32 FMA chains on every warp (issue slots and the FMA pipe),
//     mma    - mma.sync m16n8k16 bf16 chains on every warp (the tensor cores),
//     smem   - 16-byte shared-memory loads on every warp (shared-memory bandwidth);
//   small (one an SM, or 4 an SM alone), streaming its own slice of a 4 GB buffer through a
//     3-stage ring of 16 KB cp.async tiles (the narrow decode's copy pattern), either
//     copy     - the tile's words summed (little work), or
//     copy+mma - plus 16 mma.sync a 4 KB of tile, as the narrow decode does on K and V.
// Each small CTA stamps its SM, start, end and bytes; the probe prints the small kernel's
// median GB/s a CTA and whether its CTAs started beside a big one.
//
// Build and run on the GPU machine:
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -o /tmp/stream_probe tools/coresident_stream_probe.cu
//   /tmp/stream_probe
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "probe_clock.cuh"

namespace {

struct Stamp {
  unsigned smid;
  unsigned long long start_ns, end_ns, bytes;
};

__device__ __forceinline__ void mma_bf16(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

enum BigMode { kIdle = 0, kFma, kMma, kSmem };
const char* const kBigNames[] = {"idle", "fma", "mma", "smem"};

// Values kept live across a kernel's loop (each an input and an output of an empty asm every
// outer iteration), so that the kernel allocates its budget's registers, capped by __maxnreg__:
// co-residency depends on the allocated count, not on what the work needs (the table printed at
// the start gives the counts).
template <int kLive>
struct LiveSet {
  float v[kLive];
  __device__ __forceinline__ explicit LiveSet(float seed) {
#pragma unroll
    for (int i = 0; i < kLive; ++i) v[i] = seed + float(i);
  }
  __device__ __forceinline__ void touch() {
#pragma unroll
    for (int i = 0; i < kLive; ++i) asm volatile("" : "+f"(v[i]));
  }
  __device__ __forceinline__ float sum() const {
    float r = 0.f;
#pragma unroll
    for (int i = 0; i < kLive; ++i) r += v[i];
    return r;
  }
};

// The big CTA: 384 threads, held at 136 registers a thread (the lab extend's launch count).
template <int kMode>
__global__ void __maxnreg__(136) big_kernel(float* sink, Stamp* stamps, unsigned long long busy_ns) {
  extern __shared__ __align__(16) unsigned char smem[];
  const unsigned long long start = global_ns();
  LiveSet<kMode == kMma ? 108 : 124> live(float(threadIdx.x));
  float acc[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) acc[i] = float(threadIdx.x + i);
  float c[4][4] = {};
  const uint32_t w = 0x3f803f80u + threadIdx.x;  // bf16 pairs near 1
  uint4 s4 = make_uint4(0, 0, 0, 0);
  const uint4* sp = reinterpret_cast<const uint4*>(smem);
  if (threadIdx.x < 64) reinterpret_cast<uint4*>(smem)[threadIdx.x] = make_uint4(1, 2, 3, 4);
  __syncthreads();
  int it = 0;
  while (global_ns() - start < busy_ns) {
    live.touch();
    for (int k = 0; k < 64; ++k, ++it) {
      if constexpr (kMode == kFma) {
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[i] = fmaf(acc[i], 1.0000001f, 0.5f);
      } else if constexpr (kMode == kMma) {
#pragma unroll
        for (int i = 0; i < 4; ++i) mma_bf16(c[i], w, w + 1, w + 2, w + 3, w + i, w + 5);
      } else if constexpr (kMode == kSmem) {
        const uint4 v = sp[(threadIdx.x + it * 32) & 8191];  // 128 KB of the 167
        s4.x ^= v.x;
        s4.y ^= v.y;
        s4.z ^= v.z;
        s4.w ^= v.w;
      }
    }
  }
  float r = acc[0] + float(s4.x ^ s4.y ^ s4.z ^ s4.w) + live.sum();
#pragma unroll
  for (int i = 0; i < 4; ++i) r += c[i][0] + c[i][1] + c[i][2] + c[i][3];
  if (r == -1.0f) sink[threadIdx.x] = r;  // never true: keeps the work
  if (threadIdx.x == 0) stamps[blockIdx.x] = Stamp{sm_id(), start, global_ns(), 0};
}

// The small CTA: 64 threads, at most 104 registers, a 3 x 16 KB cp.async ring over its slice.
constexpr int kSmallThreads = 64, kStageBytes = 16 * 1024, kStages = 3;
template <bool kMmaWork>
__global__ void __maxnreg__(104)
    small_kernel(const uint4* __restrict__ src, size_t slice_bytes, Stamp* stamps, float* sink) {
  extern __shared__ __align__(16) unsigned char smem[];
  const unsigned long long start = global_ns();
  LiveSet<kMmaWork ? 80 : 84> live(float(threadIdx.x));
  const char* base = reinterpret_cast<const char*>(src) + size_t(blockIdx.x) * slice_bytes;
  const int tiles = int(slice_bytes / kStageBytes);
  const uint32_t sbase = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  auto issue = [&](int t) {
    const char* g = base + size_t(t) * kStageBytes;
    const uint32_t s = sbase + (t % kStages) * kStageBytes;
    for (int off = threadIdx.x * 16; off < kStageBytes; off += kSmallThreads * 16)
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s + off), "l"(g + off));
  };
  for (int t = 0; t < kStages - 1; ++t) {
    if (t < tiles) issue(t);
    asm volatile("cp.async.commit_group;\n" ::);
  }
  uint32_t x = 0;
  float c[4] = {0.f, 0.f, 0.f, 0.f};
  for (int t = 0; t < tiles; ++t) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kStages - 2));
    __syncthreads();
    live.touch();
    if (t + kStages - 1 < tiles) issue(t + kStages - 1);
    asm volatile("cp.async.commit_group;\n" ::);
    const uint4* tile = reinterpret_cast<const uint4*>(smem + (t % kStages) * kStageBytes);
    // Each thread reads its 16 chunks of 16 bytes of the tile (the decode reads every byte once).
    for (int i = threadIdx.x; i < kStageBytes / 16; i += kSmallThreads) {
      const uint4 v = tile[i];
      x ^= v.x ^ v.y ^ v.z ^ v.w;
      if constexpr (kMmaWork) {
        // 16 mma.sync a 4 KB: one a 256 bytes, here one for each 16-byte chunk read by a warp's
        // 16 lanes, about the narrow decode's MMA count a byte at head dim 128.
        if ((i & 15) == 0) mma_bf16(c, v.x, v.y, v.z, v.w, v.x, v.y);
      }
    }
  }
  if (float(x) + c[0] + c[1] + c[2] + c[3] + live.sum() == -1.0f) sink[threadIdx.x] = 1.0f;
  __syncthreads();
  if (threadIdx.x == 0) stamps[blockIdx.x] = Stamp{sm_id(), start, global_ns(), uint64_t(tiles) * kStageBytes};
}

#define CHECK(x)                                                                     \
  do {                                                                               \
    cudaError_t e = (x);                                                             \
    if (e != cudaSuccess) {                                                          \
      std::printf("%s failed: %s (line %d)\n", #x, cudaGetErrorString(e), __LINE__); \
      return false;                                                                  \
    }                                                                                \
  } while (0)

using BigFn = void (*)(float*, Stamp*, unsigned long long);
using SmallFn = void (*)(const uint4*, size_t, Stamp*, float*);

// big < 0: the small kernel alone with `per_sm` CTAs an SM.
bool run(int big, BigFn big_fn, bool mma_work, SmallFn small_fn, int per_sm, int sms, const uint4* buf,
         size_t buf_bytes, Stamp* stamps, Stamp* big_stamps, float* sink, cudaStream_t s_big, cudaStream_t s_small) {
  const int big_smem = 167 * 1024, small_smem = kStages * kStageBytes;
  const int ctas = sms * per_sm;
  const size_t slice = (buf_bytes / ctas) / kStageBytes * kStageBytes;
  for (int rep = 0; rep < 2; ++rep) {
    if (big >= 0) big_fn<<<sms, 384, big_smem, s_big>>>(sink, big_stamps, 2000000ull);  // first
    CHECK(cudaGetLastError());
    small_fn<<<ctas, kSmallThreads, small_smem, s_small>>>(buf, slice, stamps, sink);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
  }
  std::vector<Stamp> h(ctas), hb(big >= 0 ? sms : 0);
  CHECK(cudaMemcpy(h.data(), stamps, sizeof(Stamp) * ctas, cudaMemcpyDeviceToHost));
  if (big >= 0) CHECK(cudaMemcpy(hb.data(), big_stamps, sizeof(Stamp) * sms, cudaMemcpyDeviceToHost));
  // A small CTA ran beside a big one if it started on an SM while a big CTA ran there.
  int beside = 0;
  for (const Stamp& s : h) {
    for (const Stamp& b : hb) {
      if (b.smid == s.smid && s.start_ns >= b.start_ns && s.start_ns < b.end_ns) {
        ++beside;
        break;
      }
    }
  }
  std::vector<double> gbps;
  unsigned long long t0 = ~0ull, t1 = 0, bytes = 0;
  for (const Stamp& s : h) {
    gbps.push_back(double(s.bytes) / double(s.end_ns - s.start_ns));  // bytes / ns = GB/s
    t0 = std::min(t0, s.start_ns);
    t1 = std::max(t1, s.end_ns);
    bytes += s.bytes;
  }
  std::sort(gbps.begin(), gbps.end());
  std::printf(
      "big %-5s | small %-8s x %d/SM: %4d of %4d beside a big CTA; %.1f GB/s a CTA (median; p10 %.1f, p90 "
      "%.1f), %.2f TB/s in all, %.0f us\n",
      big >= 0 ? kBigNames[big] : "none", mma_work ? "copy+mma" : "copy", per_sm, beside, ctas, gbps[gbps.size() / 2],
      gbps[gbps.size() / 10], gbps[gbps.size() * 9 / 10], double(bytes) / double(t1 - t0) * 1e-3, (t1 - t0) * 1e-3);
  return true;
}

bool main_checked() {
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const BigFn bigs[] = {big_kernel<kIdle>, big_kernel<kFma>, big_kernel<kMma>, big_kernel<kSmem>};
  const SmallFn smalls[] = {small_kernel<false>, small_kernel<true>};
  for (BigFn f : bigs) {
    CHECK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, 167 * 1024));
    CHECK(cudaFuncSetAttribute(f, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
  }
  for (SmallFn f : smalls) {
    CHECK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, kStages * kStageBytes));
    CHECK(cudaFuncSetAttribute(f, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
  }
  for (int i = 0; i < 4; ++i) {
    cudaFuncAttributes a;
    CHECK(cudaFuncGetAttributes(&a, bigs[i]));
    std::printf("big %s: %d registers, %zu bytes local\n", kBigNames[i], a.numRegs, a.localSizeBytes);
  }
  for (int i = 0; i < 2; ++i) {
    cudaFuncAttributes a;
    CHECK(cudaFuncGetAttributes(&a, smalls[i]));
    std::printf("small %s: %d registers, %zu bytes local\n", i ? "copy+mma" : "copy", a.numRegs, a.localSizeBytes);
  }
  const size_t buf_bytes = size_t(4) << 30;
  uint4* buf;
  Stamp* stamps;
  float* sink;
  CHECK(cudaMalloc(&buf, buf_bytes));
  CHECK(cudaMemset(buf, 1, buf_bytes));
  Stamp* big_stamps;
  CHECK(cudaMalloc(&stamps, sizeof(Stamp) * 4 * sms));
  CHECK(cudaMalloc(&big_stamps, sizeof(Stamp) * sms));
  CHECK(cudaMalloc(&sink, sizeof(float) * 1024));
  cudaStream_t s_big, s_small;
  CHECK(cudaStreamCreateWithFlags(&s_big, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&s_small, cudaStreamNonBlocking));
  bool ok = true;
  // The small kernel's slices are sized so that a CTA streams for about 1 ms beside the big one
  // at the measured rates (4 GB over 132 CTAs: 32 MB a CTA; at 3-30 GB/s, 1-10 ms: the big
  // kernel's 2 ms cover the first part, so read the median with the big span in mind).
  for (int m = 0; m < 2; ++m) {
    ok &= run(-1, nullptr, m == 1, smalls[m], 1, sms, buf, buf_bytes / 8, stamps, big_stamps, sink, s_big, s_small);
    ok &= run(-1, nullptr, m == 1, smalls[m], 4, sms, buf, buf_bytes, stamps, big_stamps, sink, s_big, s_small);
    for (int b = 0; b < 4; ++b)
      ok &= run(b, bigs[b], m == 1, smalls[m], 1, sms, buf, buf_bytes / 8, stamps, big_stamps, sink, s_big, s_small);
  }
  cudaFree(buf);
  cudaFree(stamps);
  cudaFree(big_stamps);
  cudaFree(sink);
  return ok;
}

}  // namespace

int main() { return main_checked() ? 0 : 1; }
