// Programmatic dependent launch (PDL, compute capability 9.0+): a kernel launched as the
// programmatic dependent of the one before it on the stream may start before that one has
// finished, once every CTA of the earlier kernel has signalled (pdl_allow_dependents) or exited.
//
// A split step launches KV save -> extend -> decode stage 1 -> decode merge. The decode reads
// nothing the extend writes (its rows, its partials), only the cache the KV save wrote, and the
// KV save completed before the extend started (an ordinary launch). So stage 1 launched as the
// extend's dependent needs no wait: its CTAs take the SMs the extend's last CTAs leave idle (the
// ragged end of a persistent or multi-wave launch). The merge reads stage 1's partials: launched
// as stage 1's dependent, it waits (pdl_wait_for_prerequisite) before its first read, and its
// launch and CTA start-up overlap stage 1's last wave. The plan decides (PlanView::pdl); the op
// layer launches stage 1 so only right after an extend launch (DecodeParams::follows_extend).
#pragma once
#include <utility>

#include "mixed_attn/compat.h"

namespace mixed_attn::gpu {

// Lets the dependent grid launch once every CTA of this grid has called it or exited. A no-op
// without a dependent launched programmatically, and below compute capability 9.0.
__device__ __forceinline__ void pdl_allow_dependents() {
#if defined(MA_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Waits until the grid this one was launched as a dependent of has completed and its memory
// operations are visible. Returns at once for an ordinary launch, and below 9.0.
__device__ __forceinline__ void pdl_wait_for_prerequisite() {
#if defined(MA_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Launches `kernel` as an ordinary launch, or (programmatic, CUDA) as the programmatic dependent
// of the previous kernel on `stream`. Returns nullptr or the runtime's error string.
template <typename... KernelArgs, typename... Args>
const char* launch_maybe_programmatic(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, int smem_bytes,
                                      gpuStream_t stream, bool programmatic, Args&&... args) {
#if defined(MA_CUDA)
  if (programmatic) {
    cudaLaunchConfig_t config = {};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = size_t(smem_bytes);
    config.stream = stream;
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    config.attrs = &attr;
    config.numAttrs = 1;
    const cudaError_t status = cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
    return status == cudaSuccess ? nullptr : cudaGetErrorString(status);
  }
#else
  (void)programmatic;
#endif
  kernel<<<grid, block, smem_bytes, stream>>>(std::forward<Args>(args)...);
  return nullptr;
}

}  // namespace mixed_attn::gpu
