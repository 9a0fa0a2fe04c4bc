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

// Two e4m3 bytes to a bf16 pair by bit moves and one exact multiply, against four conversions
// (e4m3x2 -> f16x2 -> 2 x f32 -> bf16x2) in e4m3x2_to_b16 below: each byte goes to the high byte
// of its 16-bit lane; the lane's exponent and mantissa bits, shifted right by 4, sit where bf16
// keeps the low 4 exponent bits and the top 3 mantissa bits, which reads as the value times
// 2^-120 (e4m3's subnormals as bf16 subnormals); the multiply by 2^120 is exact. The NaN codes
// (S.1111.111) would read as 480: they are set to a quiet NaN explicitly.
// Not used yet: tools/check_e4m3_bf16_bits.cu checks it against the conversions over all 65536
// inputs on the GPU, and tools/pending/fp8_bf16_bit_widen.patch then switches the bf16 widenings
// to it (issue 13: fp8 caches on the sm_90a kernel are bound by the widening).
__device__ __forceinline__ uint32_t e4m3x2_to_bf16x2_bits(uint32_t two_bytes) {
  const uint32_t t = __byte_perm(two_bytes, 0u, 0x1404);  // byte 1 -> bits 31..24, byte 0 -> 15..8
  const uint32_t scaled = ((t >> 4) & 0x07F007F0u) | (t & 0x80008000u);  // value x 2^-120
  uint32_t r;
  // x 2^120 + (-0): exact, zeros keep their sign; fma.bf16x2 is sm_80+ (mul.bf16x2 sm_90+).
  asm("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(r) : "r"(scaled), "r"(0x7B807B80u), "r"(0x80008000u));
  const uint32_t nan_lanes = __vcmpeq2(t & 0x7F007F00u, 0x7F007F00u);         // 0xffff per NaN lane
  return r | (nan_lanes & 0x7FC07FC0u);
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
