// Declarations of the extend kernel's instantiations (defined in
// extend/instantiate_hd{64,128,256}.cu), so that extend/launch_extend.cu can
// dispatch without compiling any kernel itself.
#pragma once
#include "mixed_attn/compat.h"
#include "mixed_attn/launch_policy.h"
#include "mixed_attn/params.h"

namespace mixed_attn::gpu::extend_detail {

// One (head dim, element type, fp8 cache) instantiation of the extend kernel.
template <int kHeadDim, typename T, bool kFp8>
const char* launch_extend_impl(const ExtendParams& p, gpuStream_t stream);

// One (head dim, consumer warpgroups, element type, fp8 cache) instantiation of the
// warp-specialised sm_90a kernel (extend/sm90/kernel.cuh), launched with the plan's KV split and
// copy path: the default shape (extend_sm90_wgs) at every head dim, and at head dim 128 with a
// 16-bit cache also the 128-row one (extend_sm90_alt_block_rows).
template <int kHeadDim, int kWGs, typename T, bool kFp8>
const char* launch_extend_sm90_impl(const ExtendParams& p, gpuStream_t stream);

}  // namespace mixed_attn::gpu::extend_detail
