// Host side: the opt-in to more than 48 KB of dynamic shared memory, cached per (kernel, device).
//
// cudaFuncSetAttribute(MaxDynamicSharedMemorySize) belongs to the function in the context of
// the current device: a flag per process would leave a second device without it, and setting
// it on every launch is a needless driver call. So the first launch of a kernel on a device
// sets it, later ones find it in the table. Thread-safe; legal during stream capture.
#pragma once
#include <mutex>

#include "mixed_attn/compat.h"

namespace mixed_attn::gpu {

// Returns nullptr on success, else the runtime's error string.
inline const char* opt_in_dynamic_smem(const void* kernel, int bytes) {
  int device = 0;
#if defined(MA_CUDA)
  const gpuError_t dev_status = cudaGetDevice(&device);
#else
  const gpuError_t dev_status = hipGetDevice(&device);
#endif
  if (dev_status != gpuSuccess) return gpuGetErrorString(dev_status);
  struct Entry {
    const void* kernel;
    int device;
    int bytes;
  };
  constexpr int kEntries = 256;  // kernels x devices; past it every launch sets the attribute
  static Entry table[kEntries];
  static int used = 0;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  int free_slot = used < kEntries ? used : -1;
  for (int i = 0; i < used; ++i)
    if (table[i].kernel == kernel && table[i].device == device) {
      if (table[i].bytes >= bytes) return nullptr;
      free_slot = i;
      break;
    }
  const gpuError_t status = gpuFuncSetAttribute(kernel, gpuFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (status != gpuSuccess) return gpuGetErrorString(status);
  if (free_slot >= 0) {
    table[free_slot] = Entry{kernel, device, bytes};
    if (free_slot == used) ++used;
  }
  return nullptr;
}

#if defined(MA_CUDA)
// Lab builds of the co-residency experiment (tools/pending/coresident.sh): asks for the SM's
// whole shared-memory carveout (228 KB) for a kernel. Left to the driver, an SM running one
// large-shared-memory CTA may be set to the smallest carveout that fits it (196 KB for a 167 KB
// extend CTA), leaving no room for another kernel's CTA beside it.
inline void lab_prefer_max_smem_carveout(const void* kernel) {
  cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
}
#endif

}  // namespace mixed_attn::gpu
