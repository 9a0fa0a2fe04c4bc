// Architecture-specific primitives of the extend kernel: global -> shared
// copies, shared -> register fragment loads and the tensor-core / matrix-core
// multiply-accumulate. Everything else in the extend kernel is plain CUDA/HIP
// through compat.h; this header is the one place that differs per architecture
// (the fragment layouts themselves are in extend_frag_layout.h).
//
// NVIDIA (sm_80+): cp.async, ldmatrix, mma.sync.m16n8k16 (bf16 / fp16 inputs,
// fp32 accumulators). The fragment layouts below are the PTX ISA's for
// m16n8k16 with .row.col operands; the kernel relies on them:
//   A (16x16): a0 = (g, 2t..2t+1), a1 = (g+8, 2t..), a2 = (g, 2t+8..), a3 = (g+8, 2t+8..)
//   B (16x8):  b0 = (k 2t..2t+1, n g), b1 = (k 2t+8.., n g)
//   C (16x8):  c0,c1 = (g, 2t..2t+1), c2,c3 = (g+8, 2t..2t+1)
// with g = lane / 4, t = lane % 4.
//
// AMD CDNA2/CDNA3 (gfx90a, gfx940/941/942; 64-lane wavefronts):
// v_mfma_f32_16x16x16{f16,bf16_1k}, layouts in extend_frag_layout.h (Mfma16).
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

#include "cuda/extend_frag_layout.h"
#include "mixed_attn/compat.h"

// The host pass counts as capable on both vendors (the kernel's host stub must
// exist); a device pass for another GPU compiles the kernel to an empty body,
// which launch_extend rejects at run time on HIP.
#if defined(MA_CUDA) && (!defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800)
#define MA_EXTEND_HAS_MMA 1
#elif defined(MA_HIP) &&                                                                 \
    (!defined(__HIP_DEVICE_COMPILE__) || defined(__gfx90a__) || defined(__gfx940__) ||  \
     defined(__gfx941__) || defined(__gfx942__) || defined(__gfx950__))
#define MA_EXTEND_HAS_MMA 1
#else
#define MA_EXTEND_HAS_MMA 0
#endif

namespace mixed_attn::gpu::extend_detail {

#if defined(MA_CUDA)
// Element type tags: the kernel is written once for bf16 and fp16.
template <typename T> struct MmaType;
template <> struct MmaType<ma_bf16> {
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
  static __device__ __forceinline__ void store2(ma_bf16* dst, float a, float b) {
    *reinterpret_cast<__nv_bfloat162*>(dst) = __floats2bfloat162_rn(a, b);
  }
};
template <> struct MmaType<ma_half> {
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
  static __device__ __forceinline__ void store2(ma_half* dst, float a, float b) {
    *reinterpret_cast<__half2*>(dst) = __floats2half2_rn(a, b);
  }
};

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte async copy; src_bytes == 0 writes zeros (used for keys outside the
// attended range, so that masked-out values can never inject NaN into P.V).
__device__ __forceinline__ void cp_async_16(void* smem_dst, const void* gmem_src, bool valid) {
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem_dst)),
               "l"(gmem_src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* smem_row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(smem_row)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* smem_row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(smem_row)));
}

// c += a * b for one 16x8x16 tile.
template <typename T>
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                          uint32_t b1);
template <>
__device__ __forceinline__ void mma_16816<ma_bf16>(float (&c)[4], const uint32_t (&a)[4],
                                                   uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma_16816<ma_half>(float (&c)[4], const uint32_t (&a)[4],
                                                   uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

#endif  // MA_CUDA

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
struct MfmaOperand {
  uint32_t w[2];
};
__device__ __forceinline__ MfmaOperand lds_load_operand(const void* p) {
  const uint2 v = *reinterpret_cast<const uint2*>(p);  // 8-byte aligned by construction
  return MfmaOperand{{v.x, v.y}};
}

// c += a * b for one 16x16x16 tile (layouts: Mfma16 in extend_frag_layout.h).
typedef float ma_floatx4 __attribute__((ext_vector_type(4)));
typedef _Float16 ma_halfx4 __attribute__((ext_vector_type(4)));
typedef short ma_shortx4 __attribute__((ext_vector_type(4)));
template <typename T>
__device__ __forceinline__ void mfma_16x16x16(float (&c)[4], const MfmaOperand& a,
                                              const MfmaOperand& b) {
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

// exp2f lowers to v_exp_f32 (with a range fix-up for denormal results, which
// the softmax does not need but which costs little).
__device__ __forceinline__ float fast_exp2(float x) { return exp2f(x); }
#endif  // MA_HIP

}  // namespace mixed_attn::gpu::extend_detail
