// Declarations of the extend kernel's instantiations (defined in
// extend_d64.cu, extend_d128.cu, extend_d256.cu), so that extend.cu can
// dispatch without compiling any kernel itself.
#pragma once
#include "mixed_attn/compat.h"
#include "mixed_attn/params.h"

namespace mixed_attn::gpu::extend_detail {

// One (head dim, element type, fp8 cache) instantiation of the extend kernel.
template <int kHeadDim, typename T, bool kFp8>
const char* launch_extend_impl(const ExtendParams& p, gpuStream_t stream);

// One (head dim, element type) instantiation of the warp-specialised sm_90a
// kernel (extend_sm90.cuh; b16 caches only). num_sms feeds the KV-split policy;
// forced_kv_splits > 0 overrides it.
template <int kHeadDim, typename T>
const char* launch_extend_sm90_impl(const ExtendParams& p, gpuStream_t stream, int num_sms, int forced_kv_splits);

}  // namespace mixed_attn::gpu::extend_detail
