// Checks e4m3x2_to_bf16x2_bits (csrc/cuda/common/fp8.cuh) against the conversions (cvt e4m3x2 ->
// f16x2 -> 2 x f32 -> bf16x2, written out here so that the check stays independent of which one
// e4m3x2_to_b16 uses) over all 65536 two-byte inputs, bit for bit (NaN lanes: both NaN).
// Build and run on the GPU machine (repository root):
//   nvcc -std=c++17 -O3 -I csrc/include -I csrc -DMA_CUDA -gencode=arch=compute_90a,code=sm_90a \
//     -o /tmp/check_e4m3 tools/check_e4m3_bf16_bits.cu && /tmp/check_e4m3
#include <cstdio>

#include "cuda/common/fp8.cuh"

namespace {

__global__ void both_ways(uint32_t* bits, uint32_t* cvt) {
  const uint32_t x = blockIdx.x * blockDim.x + threadIdx.x;  // the two bytes
  if (x >= 65536u) return;
  bits[x] = mixed_attn::gpu::e4m3x2_to_bf16x2_bits(x);
  const uint32_t h = mixed_attn::gpu::e4m3x2_to_half2(x);
  const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h));
  __nv_bfloat162 b = __floats2bfloat162_rn(f.x, f.y);
  cvt[x] = *reinterpret_cast<uint32_t*>(&b);
}

bool is_nan_bf16(uint32_t h) { return (h & 0x7F80u) == 0x7F80u && (h & 0x7Fu) != 0; }

}  // namespace

int main() {
  uint32_t *bits, *cvt;
  cudaMallocManaged(&bits, 65536 * 4);
  cudaMallocManaged(&cvt, 65536 * 4);
  both_ways<<<256, 256>>>(bits, cvt);
  if (cudaDeviceSynchronize() != cudaSuccess) {
    std::printf("launch failed\n");
    return 2;
  }
  int bad = 0, nans = 0;
  for (uint32_t x = 0; x < 65536u; ++x) {
    for (int lane = 0; lane < 2; ++lane) {
      const uint32_t a = (bits[x] >> (16 * lane)) & 0xFFFFu, b = (cvt[x] >> (16 * lane)) & 0xFFFFu;
      if (is_nan_bf16(b)) {
        ++nans;
        if (!is_nan_bf16(a)) ++bad;
      } else if (a != b) {
        if (bad++ < 8) std::printf("byte pair 0x%04x lane %d: bits 0x%04x, conversions 0x%04x\n", x, lane, a, b);
      }
    }
  }
  std::printf("e4m3x2_to_bf16x2_bits: %d mismatches over 131072 lanes (%d NaN lanes)\n", bad, nans);
  return bad == 0 ? 0 : 1;
}
