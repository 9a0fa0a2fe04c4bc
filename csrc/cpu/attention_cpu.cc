#include "cpu/attention_cpu.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "mixed_attn/numeric_host.h"

namespace mixed_attn::cpu {
namespace {

using host::bf16_t;
using host::fp16_t;
using host::fp8e4m3_t;
using host::from_float;
using host::to_float;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Calls f.template operator()<QT, KT>() for the runtime (q dtype, cache dtype).
template <typename F>
void dispatch_types(DType q, DType kv, F&& f) {
  auto with_q = [&](auto q_tag) {
    using QT = decltype(q_tag);
    if (kv == DType::kFloat8E4M3) f(q_tag, fp8e4m3_t{});
    else f(q_tag, QT{});
  };
  switch (q) {
    case DType::kFloat32: with_q(float{}); break;
    case DType::kFloat16: with_q(fp16_t{}); break;
    case DType::kBFloat16: with_q(bf16_t{}); break;
    default: break;  // rejected by the op layer
  }
}

// Online-softmax state of one query head over a run of keys.
struct SoftmaxState {
  float m = kNegInf;  // running max of the scores
  float l = 0.f;      // running sum of exp(score - m)
  std::vector<float> acc;  // running sum of exp(score - m) * v
};

// Scores of the queries of one kv-head group against keys [lo, hi) of a row,
// folded into `states` (one per q head of the group).
template <typename KT>
void attend_keys(const AttentionCommon& c, int32_t row, int32_t kv_head, int32_t lo, int32_t hi,
                 const std::vector<float>& q_group /* [G, D] */, std::vector<SoftmaxState>& states,
                 std::vector<float>& kbuf, std::vector<float>& vbuf) {
  const int D = c.head_dim, G = int(states.size());
  const KT* kc = static_cast<const KT*>(c.k_cache);
  const KT* vc = static_cast<const KT*>(c.v_cache);
  const int32_t* pages = c.kv_indices + c.plan.kv_indptr[row];
  for (int32_t j = lo; j < hi; ++j) {
    const int64_t page = pages[j / c.page_size], slot = j % c.page_size;
    const KT* kp = kc + page * c.k_stride_page + slot * c.k_stride_slot + kv_head * c.k_stride_head;
    const KT* vp = vc + page * c.v_stride_page + slot * c.v_stride_slot + kv_head * c.v_stride_head;
    for (int d = 0; d < D; ++d) {
      kbuf[d] = to_float(kp[d]) * c.k_scale;
      vbuf[d] = to_float(vp[d]) * c.v_scale;
    }
    for (int g = 0; g < G; ++g) {
      const float* qg = q_group.data() + size_t(g) * D;
      float s = 0.f;
      for (int d = 0; d < D; ++d) s += qg[d] * kbuf[d];
      s *= c.sm_scale;
      if (c.logit_cap > 0.f) s = c.logit_cap * std::tanh(s / c.logit_cap);
      SoftmaxState& st = states[g];
      if (s > st.m) {
        const float corr = std::exp(st.m - s);  // exp(-inf) = 0 on the first key
        st.l *= corr;
        for (int d = 0; d < D; ++d) st.acc[d] *= corr;
        st.m = s;
      }
      const float p = std::exp(s - st.m);
      st.l += p;
      for (int d = 0; d < D; ++d) st.acc[d] += p * vbuf[d];
    }
  }
}

template <typename QT>
void load_q_group(const AttentionCommon& c, int64_t token, int32_t kv_head, std::vector<float>& q_group) {
  const int D = c.head_dim, G = c.num_qo_heads / c.num_kv_heads;
  const QT* q = static_cast<const QT*>(c.q);
  for (int g = 0; g < G; ++g) {
    const QT* qp = q + token * c.q_stride_token + int64_t(kv_head * G + g) * c.q_stride_head;
    for (int d = 0; d < D; ++d) q_group[size_t(g) * D + d] = to_float(qp[d]);
  }
}

// Finalises one head's state (sink included) into out / lse.
template <typename QT>
void write_output(const AttentionCommon& c, int64_t token, int32_t head, const SoftmaxState& st) {
  float m = st.m, l = st.l;
  float scale_acc = 1.f;
  if (c.maybe_sinks) {
    const float sink = c.maybe_sinks[head];
    const float m2 = std::max(m, sink);
    scale_acc = std::exp(m - m2);
    l = l * scale_acc + std::exp(sink - m2);
    m = m2;
  }
  QT* o = static_cast<QT*>(c.out) + token * c.out_stride_token + int64_t(head) * c.out_stride_head;
  const float inv_l = 1.f / l;  // l > 0: every query sees at least its own key
  for (int d = 0; d < c.head_dim; ++d) o[d] = from_float<QT>(st.acc[d] * scale_acc * inv_l);
  if (c.maybe_lse) c.maybe_lse[token * c.lse_stride_token + head] = m + std::log(l);
}

template <typename QT, typename KT>
void extend_impl(const ExtendParams& p) {
  const AttentionCommon& c = p.attn;
  const PlanView& pl = c.plan;
  const int D = c.head_dim, G = c.num_qo_heads / c.num_kv_heads;
#pragma omp parallel for schedule(dynamic, 1)
  for (int32_t t = 0; t < pl.num_extend_tiles; ++t) {
    const int32_t row = pl.extend_tiles[2 * t], q_start = pl.extend_tiles[2 * t + 1];
    const int32_t ext = pl.qo_indptr[row + 1] - pl.qo_indptr[row];
    const int32_t prefix = pl.seq_lens[row] - ext;
    const int32_t q_end = std::min(q_start + pl.extend_tile_tokens, ext);
    std::vector<float> q_group(size_t(G) * D), kbuf(D), vbuf(D);
    std::vector<SoftmaxState> states(G);
    for (int32_t i = q_start; i < q_end; ++i) {
      const int64_t token = pl.qo_indptr[row] + i;
      const int32_t pos = prefix + i;
      const int32_t lo = c.window_left >= 0 ? std::max(0, pos - c.window_left) : 0;
      for (int32_t h = 0; h < c.num_kv_heads; ++h) {
        load_q_group<QT>(c, token, h, q_group);
        for (auto& st : states) {
          st.m = kNegInf;
          st.l = 0.f;
          st.acc.assign(D, 0.f);
        }
        attend_keys<KT>(c, row, h, lo, pos + 1, q_group, states, kbuf, vbuf);
        for (int g = 0; g < G; ++g) write_output<QT>(c, token, h * G + g, states[g]);
      }
    }
  }
}

template <typename QT, typename KT>
void decode_impl(const DecodeParams& p) {
  const AttentionCommon& c = p.attn;
  const PlanView& pl = c.plan;
  const int D = c.head_dim, Hq = c.num_qo_heads, G = Hq / c.num_kv_heads;
  // Stage 1: one partial per (decode row, split, query token), every q head. A row of q new
  // tokens and n splits owns the q * n arena slots from decode_split_indptr[d], split-major
  // (slot first + s * q + i); query i sees keys up to its own position (causal among the
  // row's new tokens) and from its own window edge.
#pragma omp parallel for schedule(dynamic, 1)
  for (int32_t d = 0; d < pl.num_decode_rows; ++d) {
    const int32_t row = pl.decode_rows[d];
    const int32_t seq = pl.seq_lens[row];
    const int32_t q_len = pl.qo_indptr[row + 1] - pl.qo_indptr[row];
    const int32_t kv_start = pl.decode_kv_start[d], chunk = pl.decode_chunk_tokens[d];
    const int32_t first = pl.decode_split_indptr[d];
    const int32_t n_splits = (pl.decode_split_indptr[d + 1] - first) / q_len;
    std::vector<float> q_group(size_t(G) * D), kbuf(D), vbuf(D);
    std::vector<SoftmaxState> states(G);
    for (int32_t i = 0; i < q_len; ++i) {
      const int64_t token = pl.qo_indptr[row] + i;
      const int32_t pos = seq - q_len + i;
      const int32_t visible_lo = c.window_left >= 0 ? std::max(0, pos - c.window_left) : 0;
      for (int32_t h = 0; h < c.num_kv_heads; ++h) {
        load_q_group<QT>(c, token, h, q_group);
        for (int32_t s = 0; s < n_splits; ++s) {
          const int32_t lo = std::max(visible_lo, kv_start + s * chunk);
          const int32_t hi = std::min(pos + 1, kv_start + (s + 1) * chunk);
          for (auto& st : states) {
            st.m = kNegInf;
            st.l = 0.f;
            st.acc.assign(D, 0.f);
          }
          if (lo < hi) attend_keys<KT>(c, row, h, lo, hi, q_group, states, kbuf, vbuf);
          const int64_t slot = first + int64_t(s) * q_len + i;
          for (int g = 0; g < G; ++g) {
            const int32_t head = h * G + g;
            const SoftmaxState& st = states[g];
            float* po = p.partial_out + (slot * Hq + head) * D;
            const bool empty = st.l == 0.f;
            for (int e = 0; e < D; ++e) po[e] = empty ? 0.f : st.acc[e] / st.l;
            p.partial_lse[slot * Hq + head] = empty ? kNegInf : st.m + std::log(st.l);
          }
        }
      }
    }
  }
  // Stage 2: merge the splits of each (decode row, query token, q head) in split order.
#pragma omp parallel for schedule(static)
  for (int32_t d = 0; d < pl.num_decode_rows; ++d) {
    const int32_t row = pl.decode_rows[d];
    const int32_t q_len = pl.qo_indptr[row + 1] - pl.qo_indptr[row];
    const int32_t first = pl.decode_split_indptr[d];
    const int32_t n_splits = (pl.decode_split_indptr[d + 1] - first) / q_len;
    std::vector<float> acc(D);
    for (int32_t i = 0; i < q_len; ++i) {
      const int64_t token = pl.qo_indptr[row] + i;
      for (int32_t head = 0; head < Hq; ++head) {
        auto slot_of = [&](int32_t s) { return int64_t(first) + int64_t(s) * q_len + i; };
        float m = c.maybe_sinks ? c.maybe_sinks[head] : kNegInf;
        for (int32_t s = 0; s < n_splits; ++s) m = std::max(m, p.partial_lse[slot_of(s) * Hq + head]);
        float l = c.maybe_sinks ? std::exp(c.maybe_sinks[head] - m) : 0.f;
        std::fill(acc.begin(), acc.end(), 0.f);
        for (int32_t s = 0; s < n_splits; ++s) {
          const float lse_s = p.partial_lse[slot_of(s) * Hq + head];
          if (lse_s == kNegInf) continue;
          const float w = std::exp(lse_s - m);
          l += w;
          const float* po = p.partial_out + (slot_of(s) * Hq + head) * D;
          for (int e = 0; e < D; ++e) acc[e] += w * po[e];
        }
        QT* o = static_cast<QT*>(c.out) + token * c.out_stride_token + int64_t(head) * c.out_stride_head;
        for (int e = 0; e < D; ++e) o[e] = from_float<QT>(acc[e] / l);
        if (c.maybe_lse) c.maybe_lse[token * c.lse_stride_token + head] = m + std::log(l);
      }
    }
  }
}

template <typename ST, typename KT>
void save_impl(const SaveKVParams& p) {
  const PlanView& pl = p.plan;
  const ST* k = static_cast<const ST*>(p.k);
  const ST* v = static_cast<const ST*>(p.v);
  KT* kc = static_cast<KT*>(p.k_cache);
  KT* vc = static_cast<KT*>(p.v_cache);
  const bool fp8 = p.kv_dtype == DType::kFloat8E4M3;
  for (int32_t row = 0; row < pl.num_rows; ++row) {
    const int32_t ext = pl.qo_indptr[row + 1] - pl.qo_indptr[row];
    const int32_t prefix = pl.seq_lens[row] - ext;
    const int32_t* pages = p.kv_indices + pl.kv_indptr[row];
    for (int32_t i = 0; i < ext; ++i) {
      const int64_t token = pl.qo_indptr[row] + i;
      const int32_t pos = prefix + i;
      const int64_t page = pages[pos / p.page_size], slot = pos % p.page_size;
      for (int32_t h = 0; h < p.num_kv_heads; ++h) {
        const ST* ks = k + token * p.k_stride_token + h * p.k_stride_head;
        const ST* vs = v + token * p.v_stride_token + h * p.v_stride_head;
        KT* kd = kc + page * p.kc_stride_page + slot * p.kc_stride_slot + h * p.kc_stride_head;
        KT* vd = vc + page * p.vc_stride_page + slot * p.vc_stride_slot + h * p.vc_stride_head;
        for (int d = 0; d < p.head_dim; ++d) {
          // Same-dtype caches copy the bits; fp8 stores x / scale, saturated.
          kd[d] = fp8 ? from_float<KT>(to_float(ks[d]) / p.k_scale) : from_float<KT>(to_float(ks[d]));
          vd[d] = fp8 ? from_float<KT>(to_float(vs[d]) / p.v_scale) : from_float<KT>(to_float(vs[d]));
        }
      }
    }
  }
}

}  // namespace

void save_kv(const SaveKVParams& p) {
  dispatch_types(p.src_dtype, p.kv_dtype, [&](auto s, auto k) { save_impl<decltype(s), decltype(k)>(p); });
}

void extend(const ExtendParams& p) {
  if (p.attn.plan.num_extend_tiles == 0) return;
  dispatch_types(p.attn.q_dtype, p.attn.kv_dtype, [&](auto q, auto k) { extend_impl<decltype(q), decltype(k)>(p); });
}

void decode(const DecodeParams& p) {
  if (p.attn.plan.num_decode_rows == 0) return;
  dispatch_types(p.attn.q_dtype, p.attn.kv_dtype, [&](auto q, auto k) { decode_impl<decltype(q), decltype(k)>(p); });
}

}  // namespace mixed_attn::cpu
