// One source for CUDA and HIP: the few runtime and intrinsic names that differ.
// Include this instead of cuda_runtime.h / hip_runtime.h in every .cu file.
#pragma once
#include <cstdint>

#if defined(__HIPCC__) || defined(USE_ROCM)
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>
// ROCm 6 has __hip_bfloat16; older ROCm (Debian's 5.2) only the hip_bfloat16 class.
#if __has_include(<hip/hip_bf16.h>)
#include <hip/hip_bf16.h>
#define MA_HIP_NEW_BF16 1
#else
#include <hip/hip_bfloat16.h>
#endif
#define MA_HIP 1
using gpuStream_t = hipStream_t;
using gpuError_t = hipError_t;
#define gpuSuccess hipSuccess
#define gpuGetLastError hipGetLastError
#define gpuGetErrorString hipGetErrorString
#define gpuFuncSetAttribute hipFuncSetAttribute
#define gpuFuncAttributeMaxDynamicSharedMemorySize hipFuncAttributeMaxDynamicSharedMemorySize
using ma_half = __half;
#ifdef MA_HIP_NEW_BF16
using ma_bf16 = __hip_bfloat16;
#else
using ma_bf16 = hip_bfloat16;
#endif
// CDNA wavefronts are 64 lanes wide.
constexpr int kWarpSize = 64;
constexpr bool kIsHip = true;
#define MA_SHFL_XOR(v, m) __shfl_xor((v), (m))
#else
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#define MA_CUDA 1
using gpuStream_t = cudaStream_t;
using gpuError_t = cudaError_t;
#define gpuSuccess cudaSuccess
#define gpuGetLastError cudaGetLastError
#define gpuGetErrorString cudaGetErrorString
#define gpuFuncSetAttribute cudaFuncSetAttribute
#define gpuFuncAttributeMaxDynamicSharedMemorySize cudaFuncAttributeMaxDynamicSharedMemorySize
using ma_half = __half;
using ma_bf16 = __nv_bfloat16;
constexpr int kWarpSize = 32;
constexpr bool kIsHip = false;
#define MA_SHFL_XOR(v, m) __shfl_xor_sync(0xffffffffu, (v), (m))
#endif

// Returns the last launch error as the launcher's result (nullptr = success).
#define MA_RETURN_LAUNCH_STATUS()                              \
  do {                                                         \
    gpuError_t _e = gpuGetLastError();                         \
    return _e == gpuSuccess ? nullptr : gpuGetErrorString(_e); \
  } while (0)

#define MA_DEVICE __device__ __forceinline__

// Scalar conversions that read the same on both vendors. Kernels may use faster
// packed intrinsics on their CUDA path; these are the portable baseline.
MA_DEVICE float ma_to_float(float x) { return x; }
MA_DEVICE float ma_to_float(ma_half x) { return __half2float(x); }
#if defined(MA_HIP) && !defined(MA_HIP_NEW_BF16)
MA_DEVICE float ma_to_float(ma_bf16 x) { return float(x); }
#else
MA_DEVICE float ma_to_float(ma_bf16 x) { return __bfloat162float(x); }
#endif

template <typename T> MA_DEVICE T ma_from_float(float x);
template <> MA_DEVICE float ma_from_float<float>(float x) { return x; }
template <> MA_DEVICE ma_half ma_from_float<ma_half>(float x) { return __float2half_rn(x); }
#if defined(MA_HIP) && !defined(MA_HIP_NEW_BF16)
template <> MA_DEVICE ma_bf16 ma_from_float<ma_bf16>(float x) { return ma_bf16::round_to_bfloat16(x); }
#else
template <> MA_DEVICE ma_bf16 ma_from_float<ma_bf16>(float x) { return __float2bfloat16_rn(x); }
#endif

// fp8 e4m3fn (OCP, the torch float8_e4m3fn layout) -> float, from the bits, on any GPU:
// the 7 exponent+mantissa bits placed at float bit 20 give 2^(e-127)(1 + m/8); the multiply
// by 2^120 re-biases to e4m3's bias 7 (subnormals come out right too, as long as float
// denormals are not flushed). The save never stores the NaN pattern (it saturates).
MA_DEVICE float ma_fp8e4m3_to_float(uint8_t bits) {
  const float mag = __uint_as_float(uint32_t(bits & 0x7f) << 20) * 1.329227995784916e36f;  // 2^120
  return (bits & 0x80) ? -mag : mag;
}
