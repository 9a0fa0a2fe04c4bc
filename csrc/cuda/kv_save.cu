// KV save: the new tokens' keys and values of the whole batch into the paged
// cache, before any attention of the step reads it. One CTA per token; each
// thread moves 8 elements (one 16-byte load) at a time. An fp8 e4m3 cache
// stores clamp(x / scale, -448, 448) rounded to nearest even.
#include "cuda/launch.h"
#include "cuda/decode/common.cuh"

namespace mixed_attn::gpu {
namespace {

constexpr int kSaveThreads = 128;

#if defined(MA_HIP)
// float -> e4m3fn, round to nearest even, saturating at +-448 (NaN stays NaN).
__device__ __forceinline__ uint8_t float_to_e4m3_sat(float x) {
  if (isnan(x)) return 0x7f;
  const uint8_t sign = signbit(x) ? 0x80 : 0;
  const float mag = fabsf(x);
  if (mag >= 448.0f) return sign | 0x7e;
  int e;
  frexpf(mag, &e);  // mag = f * 2^e, f in [0.5, 1)
  const int ue = max(e - 1, -6);
  const float step = ldexpf(1.0f, ue - 3);
  const float q = rintf(mag / step) * step;  // exact division by a power of two
  if (q == 0.0f) return sign;
  frexpf(q, &e);
  if (e - 1 < -6) return sign | uint8_t(q * 512.0f);  // subnormal: m * 2^-9
  const int m = int(ldexpf(q, -(e - 1) + 3)) - 8;
  return sign | uint8_t(((e - 1 + 7) << 3) | m);
}
#endif

// Eight source elements -> eight e4m3 bytes.
template <typename ST>
__device__ __forceinline__ uint2 quantize8(const ST* x, float scale) {
  union {
    uint8_t b[8];
    uint2 u;
  } out;
#if defined(MA_CUDA)
#pragma unroll
  for (int i = 0; i < 8; i += 2) {
    const float2 f = make_float2(decode::to_float<ST>(x[i]) / scale, decode::to_float<ST>(x[i + 1]) / scale);
    const __nv_fp8x2_storage_t two = __nv_cvt_float2_to_fp8x2(f, __NV_SATFINITE, __NV_E4M3);
    out.b[i] = uint8_t(two & 0xff);
    out.b[i + 1] = uint8_t(two >> 8);
  }
#else
#pragma unroll
  for (int i = 0; i < 8; ++i) out.b[i] = float_to_e4m3_sat(decode::to_float<ST>(x[i]) / scale);
#endif
  return out.u;
}

template <typename ST, bool kFp8>
__global__ void __launch_bounds__(kSaveThreads) save_kv_kernel(const SaveKVParams p) {
  const int token = blockIdx.x;
  const PlanView& plan = p.plan;
  // Graph-safe launches cover the bucket's tokens: padding past this step's is not saved.
  const int tokens = plan_count(plan, kCountTokens, plan.num_tokens);
  if (token >= tokens) return;
  const int row = find_owner(plan.qo_indptr, plan_count(plan, kCountRows, plan.num_rows), tokens, token);
  const int extend_len = plan.qo_indptr[row + 1] - plan.qo_indptr[row];
  const int pos = plan.seq_lens[row] - extend_len + (token - plan.qo_indptr[row]);
  const int64_t page = p.kv_indices[plan.kv_indptr[row] + pos / p.page_size];
  const int64_t slot = pos % p.page_size;

  const int vecs_per_head = p.head_dim / 8;
  const int vecs = p.num_kv_heads * vecs_per_head;
  for (int i = threadIdx.x; i < 2 * vecs; i += kSaveThreads) {
    const bool is_v = i >= vecs;
    const int j = is_v ? i - vecs : i;
    const int h = j / vecs_per_head, d = (j % vecs_per_head) * 8;
    const ST* src = static_cast<const ST*>(is_v ? p.v : p.k) +
                    int64_t(token) * (is_v ? p.v_stride_token : p.k_stride_token) +
                    int64_t(h) * (is_v ? p.v_stride_head : p.k_stride_head) + d;
    const int64_t dst_off = page * (is_v ? p.vc_stride_page : p.kc_stride_page) +
                            slot * (is_v ? p.vc_stride_slot : p.kc_stride_slot) +
                            int64_t(h) * (is_v ? p.vc_stride_head : p.kc_stride_head) + d;
    const uint4 raw = *reinterpret_cast<const uint4*>(src);
    if constexpr (kFp8) {
      // (a pointer view, not a union: ROCm's older bf16 class is not trivially constructible)
      const ST* x = reinterpret_cast<const ST*>(&raw);
      uint8_t* dst = static_cast<uint8_t*>(is_v ? p.v_cache : p.k_cache) + dst_off;
      *reinterpret_cast<uint2*>(dst) = quantize8<ST>(x, is_v ? p.v_scale : p.k_scale);
    } else {
      ST* dst = static_cast<ST*>(is_v ? p.v_cache : p.k_cache) + dst_off;
      *reinterpret_cast<uint4*>(dst) = raw;
    }
  }
}

bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15) == 0; }

}  // namespace

const char* launch_save_kv(const SaveKVParams& p, void* stream) {
  // Graph-safe plans launch over the bucket (the kernel reads the step's count).
  const int tokens = p.plan.maybe_counts != nullptr ? p.plan.graph_max_tokens : p.plan.num_tokens;
  if (tokens == 0) return nullptr;
  if (p.src_dtype != DType::kBFloat16 && p.src_dtype != DType::kFloat16)
    return "save_kv: k and v must be bfloat16 or float16";
  const bool fp8 = p.kv_dtype == DType::kFloat8E4M3;
  if (!fp8 && p.kv_dtype != p.src_dtype) return "save_kv: the KV cache must have k's dtype or float8_e4m3fn";
  if (p.head_dim % 8 != 0) return "save_kv: head_dim must be a multiple of 8";
  const int64_t cache_align = fp8 ? 8 : 8;  // elements: 8-byte (fp8) or 16-byte stores
  if (!aligned16(p.k) || !aligned16(p.v) || !aligned16(p.k_cache) || !aligned16(p.v_cache) || p.k_stride_token % 8 ||
      p.k_stride_head % 8 || p.v_stride_token % 8 || p.v_stride_head % 8 || p.kc_stride_page % cache_align ||
      p.kc_stride_slot % cache_align || p.kc_stride_head % cache_align || p.vc_stride_page % cache_align ||
      p.vc_stride_slot % cache_align || p.vc_stride_head % cache_align)
    return "save_kv: k, v and the KV cache need 16-byte aligned rows";
  const gpuStream_t s = static_cast<gpuStream_t>(stream);
  const bool bf16 = p.src_dtype == DType::kBFloat16;
  if (bf16) {
    if (fp8) save_kv_kernel<ma_bf16, true><<<tokens, kSaveThreads, 0, s>>>(p);
    else save_kv_kernel<ma_bf16, false><<<tokens, kSaveThreads, 0, s>>>(p);
  } else {
    if (fp8) save_kv_kernel<ma_half, true><<<tokens, kSaveThreads, 0, s>>>(p);
    else save_kv_kernel<ma_half, false><<<tokens, kSaveThreads, 0, s>>>(p);
  }
  MA_RETURN_LAUNCH_STATUS();
}

}  // namespace mixed_attn::gpu
