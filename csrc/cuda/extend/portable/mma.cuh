// Architecture-specific primitives of the extend kernel: global -> shared
// copies, shared -> register fragment loads and the tensor-core / matrix-core
// multiply-accumulate. Everything else in the extend kernel is plain CUDA/HIP
// through compat.h; this header is the one place that differs per architecture
// (the fragment layouts themselves are in extend/portable/frag_layout.h).
//
// NVIDIA (sm_80+): cp.async, ldmatrix, mma.sync.m16n8k16 (bf16 / fp16 inputs,
// fp32 accumulators), in arch/sm80.cuh with the fragment layouts the kernel
// relies on.
//
// AMD CDNA2/CDNA3 (gfx90a, gfx940/941/942; 64-lane wavefronts):
// v_mfma_f32_16x16x16{f16,bf16_1k}, layouts in extend/portable/frag_layout.h (Mfma16).
// There is no asynchronous global -> LDS copy the kernel can use, so
// cp_async_16 is a plain 16-byte load and LDS store and commit / wait are
// no-ops: the kernel's multi-slot pipeline then still keeps loads of one slot
// from racing with reads of another, and latency is hidden by the other
// wavefronts on the CU instead. The HIP path is compiled in CI (hipcc, gfx90a
// and gfx940) and its fragment bookkeeping is emulated on the CPU
// (tests/test_extend_frag_layout.py), but it has not run on AMD hardware yet.
#pragma once
#include <cstdint>
#include <type_traits>

#include "cuda/arch/sm80.cuh"
#include "cuda/common/math.cuh"
#include "cuda/extend/portable/frag_layout.h"
#include "mixed_attn/compat.h"

// The host pass counts as capable on both vendors (the kernel's host stub must
// exist); a device pass for another GPU compiles the kernel to an empty body,
// which the launch policy refuses on HIP (DeviceDesc::hip_mfma, device_desc.cu).
#if defined(MA_CUDA) && (!defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800)
#define MA_EXTEND_HAS_MMA 1
#elif defined(MA_HIP) && (!defined(__HIP_DEVICE_COMPILE__) || defined(__gfx90a__) || defined(__gfx940__) || \
                          defined(__gfx941__) || defined(__gfx942__) || defined(__gfx950__))
#define MA_EXTEND_HAS_MMA 1
#else
#define MA_EXTEND_HAS_MMA 0
#endif

namespace mixed_attn::gpu::extend_detail {

// CUDA: cp.async, ldmatrix, mma.sync and MmaType are in arch/sm80.cuh (shared with the decode
// kernel); the HIP stand-ins follow.

#if defined(MA_HIP)
// b16 bits of a float, rounded to nearest even (through compat.h, which knows
// the bf16 type of the ROCm in use).
template <typename T>
__device__ __forceinline__ uint32_t b16_bits(float x) {
  const T v = ma_from_float<T>(x);
  uint16_t bits;
  __builtin_memcpy(&bits, &v, sizeof(bits));
  return bits;
}
template <typename T> struct MmaType {
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    return b16_bits<T>(lo) | (b16_bits<T>(hi) << 16);
  }
  static __device__ __forceinline__ void store2(T* dst, float a, float b) {
    *reinterpret_cast<uint32_t*>(dst) = pack(a, b);
  }
};

// Synchronous stand-in for cp.async (see the header comment): 16 bytes, zeros
// when !valid so that keys outside the attended range cannot inject NaN into P.V.
__device__ __forceinline__ void cp_async_16(void* smem_dst, const void* gmem_src, bool valid) {
  uint4 v = make_uint4(0u, 0u, 0u, 0u);
  if (valid) v = *reinterpret_cast<const uint4*>(gmem_src);
  *reinterpret_cast<uint4*>(smem_dst) = v;
}
__device__ __forceinline__ void cp_async_commit() {}
template <int N>
__device__ __forceinline__ void cp_async_wait() {}

// One MFMA operand: 4 b16 elements (element e in bits [16e, 16e + 16)).
struct MfmaOperand { uint32_t w[2]; };
__device__ __forceinline__ MfmaOperand lds_load_operand(const void* p) {
  const uint2 v = *reinterpret_cast<const uint2*>(p);  // 8-byte aligned by construction
  return MfmaOperand{{v.x, v.y}};
}

// c += a * b for one 16x16x16 tile (layouts: Mfma16 in extend/portable/frag_layout.h).
typedef float ma_floatx4 __attribute__((ext_vector_type(4)));
typedef _Float16 ma_halfx4 __attribute__((ext_vector_type(4)));
typedef short ma_shortx4 __attribute__((ext_vector_type(4)));
template <typename T>
__device__ __forceinline__ void mfma_16x16x16(float (&c)[4], const MfmaOperand& a, const MfmaOperand& b) {
  ma_floatx4 acc = {c[0], c[1], c[2], c[3]};
#if defined(__HIP_DEVICE_COMPILE__)
  if constexpr (std::is_same<T, ma_half>::value) {
    ma_halfx4 av, bv;
    __builtin_memcpy(&av, a.w, 8);
    __builtin_memcpy(&bv, b.w, 8);
    acc = __builtin_amdgcn_mfma_f32_16x16x16f16(av, bv, acc, 0, 0, 0);
  } else {
    ma_shortx4 av, bv;
    __builtin_memcpy(&av, a.w, 8);
    __builtin_memcpy(&bv, b.w, 8);
    acc = __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(av, bv, acc, 0, 0, 0);
  }
#endif
  c[0] = acc[0];
  c[1] = acc[1];
  c[2] = acc[2];
  c[3] = acc[3];
}
#endif  // MA_HIP

}  // namespace mixed_attn::gpu::extend_detail
