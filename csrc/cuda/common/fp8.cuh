// fp8 e4m3fn (the torch float8_e4m3fn layout) widening, one definition for every kernel.
// Every e4m3 value is exactly an fp16 and a bf16 value, so all of these are exact. The cache
// never holds the NaN code (the save saturates), so NaN handling is not relied on.
// Scalar (portable) form: ma_fp8e4m3_to_float in compat.h.
#pragma once
#include <cstdint>

#include <type_traits>

#include "mixed_attn/compat.h"

namespace mixed_attn::gpu {

#if defined(MA_CUDA)
// Two e4m3 bytes (low byte -> low half) to an fp16 pair, as the 32-bit register of a half2:
// cvt.rn.f16x2.e4m3x2 on sm_89+ (cuda_fp8.h's bit-level fallback on older targets).
__device__ __forceinline__ uint32_t e4m3x2_to_half2(uint32_t two_bytes) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two_bytes & 0xffffu), __NV_E4M3);
  return uint32_t(h.x) | (uint32_t(h.y) << 16);
}
#endif

// Two e4m3 bytes to a packed pair of b16 values of type T (ma_half or ma_bf16).
template <typename T>
__device__ __forceinline__ uint32_t e4m3x2_to_b16(uint32_t two_bytes) {
#if defined(MA_CUDA)
  const uint32_t h = e4m3x2_to_half2(two_bytes);
  if constexpr (std::is_same_v<T, ma_half>) {
    return h;
  } else {
    const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h));
    __nv_bfloat162 b = __floats2bfloat162_rn(f.x, f.y);  // exact: e4m3 fits in bf16
    return *reinterpret_cast<uint32_t*>(&b);
  }
#else
  // Through fp32 (compat.h); the rounding to b16 is exact too.
  const T lo = ma_from_float<T>(ma_fp8e4m3_to_float(uint8_t(two_bytes & 0xFFu)));
  const T hi = ma_from_float<T>(ma_fp8e4m3_to_float(uint8_t((two_bytes >> 8) & 0xFFu)));
  uint16_t lo_bits, hi_bits;
  __builtin_memcpy(&lo_bits, &lo, sizeof(lo_bits));
  __builtin_memcpy(&hi_bits, &hi, sizeof(hi_bits));
  return uint32_t(lo_bits) | (uint32_t(hi_bits) << 16);
#endif
}

}  // namespace mixed_attn::gpu
