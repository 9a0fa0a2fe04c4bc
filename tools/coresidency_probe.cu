// Issue 14: which resource budgets let a CTA of one kernel run beside a CTA of another kernel on
// the same SM of an H200? Session 10 launched a lab extend (384 threads at 136 registers, 167 KB
// of shared memory) and a lab decode (64 threads at up to 200 registers, 49 KB) on two streams
// and saw no overlap at all. This probe takes the kernels out of the question: two spin kernels
// whose register count, thread count and shared memory are set at compile time, each CTA stamping
// its SM and its start and end (%globaltimer), the big one launched first on one stream and the
// small one right after on another. It prints, per pair, the share of small CTAs that started
// while a big CTA was still running on the same SM.
//
// The rule under test (cuda_occupancy.h's register check): registers are allocated per SM
// sub-partition (4 of 16 K registers on sm_90), a CTA's warps rounded up to a multiple of 4, so a
// 384-thread CTA at R registers takes 3 warps x 32 R on each sub-partition and a small CTA fits
// beside it only if its warps need at most 16384 - 96 R registers each (R = 136: 104 a thread).
//
// Build and run on the GPU machine:
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -o /tmp/probe tools/coresidency_probe.cu
//   /tmp/probe
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "probe_clock.cuh"

namespace {

struct Stamp {
  unsigned smid;
  unsigned long long start_ns;
  unsigned long long end_ns;
};

// kLive values stay live across the spin loop (the empty asm makes each one an input and an
// output of every iteration), so the kernel's register count is kLive plus a few; the table at
// the end of main() prints what the compiler allocated.
template <int kLive, int kThreads>
__global__ void __launch_bounds__(kThreads, 1) spin_kernel(Stamp* stamps, float* sink, unsigned long long spin_ns) {
  extern __shared__ float smem[];
  float live[kLive];
#pragma unroll
  for (int i = 0; i < kLive; ++i) live[i] = static_cast<float>(threadIdx.x + i);
  const unsigned long long start = global_ns();
  smem[threadIdx.x] = live[0];
  while (global_ns() - start < spin_ns) {
#pragma unroll
    for (int i = 0; i < kLive; ++i) asm volatile("" : "+f"(live[i]));
  }
  float acc = smem[threadIdx.x];
#pragma unroll
  for (int i = 0; i < kLive; ++i) acc += live[i];
  if (acc == -1.0f) sink[threadIdx.x] = acc;  // never true; keeps the values
  __syncthreads();
  if (threadIdx.x == 0) stamps[blockIdx.x] = Stamp{sm_id(), start, global_ns()};
}

struct KernelShape {
  const char* name;
  void (*fn)(Stamp*, float*, unsigned long long);
  int threads;
  int regs;  // filled from cudaFuncGetAttributes
};

template <int kLive, int kThreads>
KernelShape shape(const char* name) {
  return KernelShape{name, spin_kernel<kLive, kThreads>, kThreads, 0};
}

#define CHECK(x)                                                                     \
  do {                                                                               \
    cudaError_t e = (x);                                                             \
    if (e != cudaSuccess) {                                                          \
      std::printf("%s failed: %s (line %d)\n", #x, cudaGetErrorString(e), __LINE__); \
      return false;                                                                  \
    }                                                                                \
  } while (0)

bool run_pair(const KernelShape& big, int big_smem, const KernelShape& small, int small_smem, bool max_carveout,
              int sms) {
  for (auto* k : {&big, &small}) {
    int bytes = k == &big ? big_smem : small_smem;
    CHECK(cudaFuncSetAttribute(k->fn, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    CHECK(cudaFuncSetAttribute(k->fn, cudaFuncAttributePreferredSharedMemoryCarveout, max_carveout ? 100 : -1));
  }
  const int big_ctas = sms, small_ctas = 4 * sms;
  Stamp* stamps;
  float* sink;
  CHECK(cudaMalloc(&stamps, sizeof(Stamp) * (big_ctas + small_ctas)));
  CHECK(cudaMalloc(&sink, sizeof(float) * 1024));
  cudaStream_t s_big, s_small;
  CHECK(cudaStreamCreateWithFlags(&s_big, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&s_small, cudaStreamNonBlocking));
  // Warm-up launch of each, then the measured pair: big first, small right after.
  for (int rep = 0; rep < 2; ++rep) {
    big.fn<<<big_ctas, big.threads, big_smem, s_big>>>(stamps, sink, 200000ull);
    CHECK(cudaGetLastError());
    small.fn<<<small_ctas, small.threads, small_smem, s_small>>>(stamps + big_ctas, sink, 20000ull);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
  }
  std::vector<Stamp> h(big_ctas + small_ctas);
  CHECK(cudaMemcpy(h.data(), stamps, sizeof(Stamp) * h.size(), cudaMemcpyDeviceToHost));
  // A small CTA overlaps if it started on an SM while a big CTA ran there.
  int beside = 0;
  unsigned long long big_end = 0, t0 = ~0ull, small_end = 0;
  for (int b = 0; b < big_ctas; ++b) {
    big_end = std::max(big_end, h[b].end_ns);
    t0 = std::min(t0, h[b].start_ns);
  }
  for (int s = big_ctas; s < big_ctas + small_ctas; ++s) {
    small_end = std::max(small_end, h[s].end_ns);
    for (int b = 0; b < big_ctas; ++b) {
      if (h[b].smid == h[s].smid && h[s].start_ns >= h[b].start_ns && h[s].start_ns < h[b].end_ns) {
        ++beside;
        break;
      }
    }
  }
  std::printf(
      "%-12s (%3d thr, %3d regs, %3d KB) + %-12s (%3d thr, %3d regs, %2d KB) carveout %-7s: "
      "%4d of %d small CTAs beside a big one; big span %.0f us, small ends at %.0f us\n",
      big.name, big.threads, big.regs, big_smem / 1024, small.name, small.threads, small.regs, small_smem / 1024,
      max_carveout ? "max" : "default", beside, small_ctas, (big_end - t0) * 1e-3, (small_end - t0) * 1e-3);
  cudaFree(stamps);
  cudaFree(sink);
  cudaStreamDestroy(s_big);
  cudaStreamDestroy(s_small);
  return true;
}

}  // namespace

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  // Live-value counts picked so the compiler allocates the named register counts (printed).
  std::vector<KernelShape> bigs = {shape<126, 384>("big136"), shape<158, 384>("big168"), shape<118, 384>("big128")};
  std::vector<KernelShape> smalls = {shape<86, 64>("small96"),   shape<94, 64>("small104"),
                                     shape<102, 64>("small112"), shape<118, 64>("small128"),
                                     shape<190, 64>("small200"), shape<94, 128>("small104x4")};
  for (auto* list : {&bigs, &smalls}) {
    for (auto& k : *list) {
      cudaFuncAttributes a;
      if (cudaFuncGetAttributes(&a, k.fn) != cudaSuccess) return 1;
      k.regs = a.numRegs;
    }
  }
  const int big_smem = 167 * 1024, small_smem = 49 * 1024;
  bool ok = true;
  // Shared memory alone: both at few registers (the smallest shapes' counts are still set by
  // their live values, so use the 128-register big beside the 96-register small).
  for (bool carve : {false, true}) {
    for (auto& b : bigs) {
      for (auto& s : smalls) ok &= run_pair(b, big_smem, s, small_smem, carve, sms);
    }
  }
  // Shared memory as the only limit: the big one at 200 KB leaves no room for 49 KB.
  ok &= run_pair(bigs[2], 200 * 1024, smalls[0], small_smem, true, sms);
  return ok ? 0 : 1;
}
