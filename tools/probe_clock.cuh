// %globaltimer (ns) and %smid for the standalone probes (tools/coresidency_probe.cu,
// tools/coresident_stream_probe.cu). The sm_90a timeline (csrc/cuda/extend/sm90/timeline.cuh)
// has its own: it lives with its device buffer, which the probes must not pull in.
#pragma once

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ unsigned sm_id() {
  unsigned s;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
  return s;
}
