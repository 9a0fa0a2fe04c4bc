// Stage 1 of the split-KV decode without matrix instructions: the HIP path
// (CDNA's matrix units need their own inner loop, not written yet) and, on
// CUDA, an independent implementation that the tests compare the tensor-core
// kernel against (decode_backend="portable"). Same grid, same outputs, same
// arena layout; simple and slow: each query head of the block re-reads the
// split's keys, one key per thread for the scores, one dimension per thread
// for the output.
#pragma once
#include "cuda/decode/common.cuh"

namespace mixed_attn::gpu::decode {

constexpr int kPortableThreads = 128;

template <bool kMax>
__device__ __forceinline__ float block_reduce(float x, float* red) {
  red[threadIdx.x] = x;
  __syncthreads();
  for (int stride = kPortableThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      const float y = red[threadIdx.x + stride];
      red[threadIdx.x] = kMax ? fmaxf(red[threadIdx.x], y) : red[threadIdx.x] + y;
    }
    __syncthreads();
  }
  const float r = red[0];
  __syncthreads();
  return r;
}

template <typename CT>
__device__ __forceinline__ float cache_to_float(CT x) {
  if constexpr (std::is_same_v<CT, uint8_t>) return ma_fp8e4m3_to_float(x);
  else return to_float<CT>(x);
}

// CT: the cache element type (QT, or uint8_t for fp8 e4m3).
template <int D, typename QT, typename CT>
__global__ void __launch_bounds__(kPortableThreads)
    decode_split_portable_kernel(const DecodeParams p, const DecodeConsts c) {
  constexpr int kDimsPerThread = (D + kPortableThreads - 1) / kPortableThreads;
  __shared__ float q_s[D];
  __shared__ float p_s[kPortableThreads];
  __shared__ int64_t k_off_s[kPortableThreads];
  __shared__ int64_t v_off_s[kPortableThreads];
  __shared__ float red[kPortableThreads];
  pdl_allow_dependents();  // the merge may launch now; it waits for this grid before reading

  const AttentionCommon& a = p.attn;
  SplitView sv;
  if (!load_split_view(a, blockIdx.x, blockIdx.z, sv)) return;
  const int kv_head = blockIdx.y / c.row_blocks;
  const int cta_rows = 16 * a.plan.decode_cta_blocks;  // (query, head) pairs as the tensor-core kernel
  const int pair0 = (blockIdx.y % c.row_blocks) * cta_rows;
  const int rows = min(cta_rows, sv.q_len * c.group - pair0);
  const int tid = threadIdx.x;
  const CT* kc = static_cast<const CT*>(a.k_cache);
  const CT* vc = static_cast<const CT*>(a.v_cache);
  const bool final_out = sv.num_splits == 1;
  const float v_scale = a.kv_dtype == DType::kFloat8E4M3 ? a.v_scale : 1.0f;

  for (int r = 0; r < rows; ++r) {
    const int qi = (pair0 + r) / c.group;
    const int hq = kv_head * c.group + (pair0 + r) % c.group;
    const int64_t token = sv.token + qi;
    const int64_t slot = sv.slot + qi;
    const int key_begin = max(sv.key_begin, query_visible_begin(sv, a.window_left, qi));
    const int key_end = query_key_end(sv, qi);
    const QT* q = static_cast<const QT*>(a.q) + token * a.q_stride_token + int64_t(hq) * a.q_stride_head;
    for (int d = tid; d < D; d += kPortableThreads) q_s[d] = to_float<QT>(q[d]);
    __syncthreads();
    float m = -INFINITY, l = 0.0f, acc[kDimsPerThread];
    for (int i = 0; i < kDimsPerThread; ++i) acc[i] = 0.0f;
    for (int base = key_begin; base < key_end; base += kPortableThreads) {
      const int key = base + tid;
      float score = -INFINITY;
      if (key < key_end) {
        int slot;
        const int64_t page = page_of_key(sv, c, a.page_size, key, slot);
        const int64_t k_off = page * a.k_stride_page + slot * a.k_stride_slot + kv_head * a.k_stride_head;
        k_off_s[tid] = k_off;
        v_off_s[tid] = page * a.v_stride_page + slot * a.v_stride_slot + kv_head * a.v_stride_head;
        float dot = 0.0f;
        for (int d = 0; d < D; ++d) dot += q_s[d] * cache_to_float<CT>(kc[k_off + d]);
        score = capped_score(dot, c);
      }
      const float mx = block_reduce<true>(score, red);
      // The merge of common/softmax.cuh: (m, l) with this block of keys, one key per thread.
      const float m_new = fmaxf(m, mx);
      const float alpha = state_weight(m, m_new);
      const float pk = state_weight(score, m_new);
      p_s[tid] = pk;
      const float sum = block_reduce<false>(pk, red);  // its barriers also publish p_s, *_off_s
      l = l * alpha + sum;
      m = m_new;
      const int n = min(kPortableThreads, key_end - base);
      for (int i = 0; i < kDimsPerThread; ++i) {
        const int d = tid + i * kPortableThreads;
        if (d >= D) break;
        float x = acc[i] * alpha;
        for (int j = 0; j < n; ++j)
          if (p_s[j] != 0.0f) x += p_s[j] * cache_to_float<CT>(vc[v_off_s[j] + d]);
        acc[i] = x;
      }
      __syncthreads();
    }
    const float sink = final_out && a.maybe_sinks ? a.maybe_sinks[hq] * kLog2e : -INFINITY;
    float f[1], lse;
    combine_parts<1>(&m, &l, 1, final_out, sink, v_scale, f, lse);
    for (int i = 0; i < kDimsPerThread; ++i) {
      const int d = tid + i * kPortableThreads;
      if (d >= D) break;
      if (final_out) {
        QT* dst = static_cast<QT*>(a.out) + token * a.out_stride_token + int64_t(hq) * a.out_stride_head;
        dst[d] = from_float<QT>(f[0] * acc[i]);
      } else {
        p.partial_out[(slot * a.num_qo_heads + hq) * D + d] = f[0] * acc[i];
      }
    }
    if (tid == 0) {
      if (final_out) {
        if (a.maybe_lse) a.maybe_lse[token * a.lse_stride_token + hq] = lse;
      } else {
        p.partial_lse[slot * a.num_qo_heads + hq] = lse;
      }
    }
    __syncthreads();
  }
}

}  // namespace mixed_attn::gpu::decode
