// One source for CUDA and HIP: the few runtime and intrinsic names that differ.
// Include this instead of cuda_runtime.h / hip_runtime.h in every .cu file.
#pragma once

#if defined(__HIPCC__) || defined(USE_ROCM)
#include <hip/hip_bf16.h>
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>
#define MA_HIP 1
using gpuStream_t = hipStream_t;
using gpuError_t = hipError_t;
#define gpuSuccess hipSuccess
#define gpuGetLastError hipGetLastError
#define gpuGetErrorString hipGetErrorString
#define gpuFuncSetAttribute hipFuncSetAttribute
#define gpuFuncAttributeMaxDynamicSharedMemorySize hipFuncAttributeMaxDynamicSharedMemorySize
using ma_half = __half;
using ma_bf16 = __hip_bfloat16;
// CDNA wavefronts are 64 lanes wide.
constexpr int kWarpSize = 64;
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
#define MA_SHFL_XOR(v, m) __shfl_xor_sync(0xffffffffu, (v), (m))
#endif

// Returns the last launch error as the launcher's result (nullptr = success).
#define MA_RETURN_LAUNCH_STATUS()                         \
  do {                                                    \
    gpuError_t _e = gpuGetLastError();                    \
    return _e == gpuSuccess ? nullptr : gpuGetErrorString(_e); \
  } while (0)
