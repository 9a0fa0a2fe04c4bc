// Which kernel variants this build holds (CMake options MIXED_ATTN_HEAD_DIMS, MIXED_ATTN_FP8,
// MIXED_ATTN_EXTEND_SM90: a developer builds one variant in seconds). The dispatchers use the
// macros so that a variant left out is never referenced; gpu::build_has() (launch.h) lets the op
// layer refuse such a call before anything is launched.
#pragma once

#if defined(MA_NO_HEAD_DIM_64)
#define MA_IF_HD64(call) "this build has no kernels for head_dim 64 (MIXED_ATTN_HEAD_DIMS)"
#else
#define MA_IF_HD64(call) call
#endif
#if defined(MA_NO_HEAD_DIM_128)
#define MA_IF_HD128(call) "this build has no kernels for head_dim 128 (MIXED_ATTN_HEAD_DIMS)"
#else
#define MA_IF_HD128(call) call
#endif
#if defined(MA_NO_HEAD_DIM_256)
#define MA_IF_HD256(call) "this build has no kernels for head_dim 256 (MIXED_ATTN_HEAD_DIMS)"
#else
#define MA_IF_HD256(call) call
#endif
#if defined(MA_NO_FP8)
#define MA_IF_FP8(call) "this build has no kernels for float8_e4m3fn caches (MIXED_ATTN_FP8=OFF)"
#else
#define MA_IF_FP8(call) call
#endif

#if defined(MA_NO_HEAD_DIM_64)
#define MA_NO_HEAD_DIM_64_V 1
#else
#define MA_NO_HEAD_DIM_64_V 0
#endif
#if defined(MA_NO_HEAD_DIM_128)
#define MA_NO_HEAD_DIM_128_V 1
#else
#define MA_NO_HEAD_DIM_128_V 0
#endif
#if defined(MA_NO_HEAD_DIM_256)
#define MA_NO_HEAD_DIM_256_V 1
#else
#define MA_NO_HEAD_DIM_256_V 0
#endif
#if defined(MA_NO_FP8)
#define MA_NO_FP8_V 1
#else
#define MA_NO_FP8_V 0
#endif

namespace mixed_attn::gpu {
constexpr bool fp8_built() { return !MA_NO_FP8_V; }
constexpr bool head_dim_built(int d) {
  return (d == 64 && !MA_NO_HEAD_DIM_64_V) || (d == 128 && !MA_NO_HEAD_DIM_128_V) ||
         (d == 256 && !MA_NO_HEAD_DIM_256_V);
}
}  // namespace mixed_attn::gpu
