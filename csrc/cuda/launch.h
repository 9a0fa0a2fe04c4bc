// Host entry points of the GPU kernels. Included by the torch binding layer
// (csrc/torch/ops_cuda.cc) and implemented in csrc/cuda/*.cu. No torch and no
// CUDA headers here: streams travel as void* (cudaStream_t / hipStream_t).
//
// Every launcher returns nullptr on success, otherwise a static string that
// says what failed (an unsupported configuration, or the CUDA error string).
// Launchers never allocate memory and never synchronise with the host.
#pragma once
#include "mixed_attn/launch_policy.h"
#include "mixed_attn/params.h"

namespace mixed_attn::gpu {

// Writes the new tokens of the whole batch into the paged cache (k/v -> cache,
// quantised to e4m3 when kv_dtype is kFloat8E4M3). Must run before attention.
const char* launch_save_kv(const SaveKVParams& p, void* stream);

// Split-KV decode over plan.decode_rows: stage-1 partials into the arena, then
// the merge into out (and lse). No-op when plan.num_decode_rows == 0.
const char* launch_decode(const DecodeParams& p, void* stream);

// Extend kernel over plan.extend_tiles, on the kernel, KV split and copy path
// the plan recorded. No-op when plan.num_extend_tiles == 0.
const char* launch_extend(const ExtendParams& p, void* stream);

// Whether launch_extend launches a grid for these params (graph-safe plans: the bucket's tiles).
inline bool extend_launches(const ExtendParams& p) {
  const PlanView& v = p.attn.plan;
  return (v.maybe_counts != nullptr ? v.graph_max_tiles : v.num_extend_tiles) > 0;
}

// Describes GPU `device` (-1: the current one) for the launch policy: compute
// capability, SMs, whether this build holds the sm_90a kernels, whether the
// driver can encode TMA maps. Queried on the host; the caller caches it.
const char* query_device(int device, DeviceDesc* out);

// Whether this build holds the kernels for a head dim / for float8 caches (CMake options
// MIXED_ATTN_HEAD_DIMS / MIXED_ATTN_FP8): the op layer refuses other calls before any launch.
bool build_has_head_dim(int head_dim);
bool build_has_fp8();

}  // namespace mixed_attn::gpu
