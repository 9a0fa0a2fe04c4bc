// Stage 1 of the split-KV decode on NVIDIA tensor cores for CTAs of at most 8 (query, head)
// pairs, computed transposed (mma.sync m16n8k16): keys and head-dim columns on the MMA's M
// side, the pairs on N. Each warp owns 16 keys of every tile:
//   S^T[16 keys x 8 pairs] = K Q^T          (K rows are the A operand, as read by the wide kernel)
//   online softmax per pair in fp32 (a pair is a C column: its 16 keys sit on 8 lanes)
//   O^T[D x 8 pairs]      += V^T P^T        (P^T moved into the B layout by movmatrix.trans)
// and the warps' states are combined through shared memory at the end.
//
// Why: the wide kernel (stage1_tensor_core.cuh) puts the pairs on M, so with <= 8 pairs half of
// its 16 x D fp32 accumulator (D / 2 registers a thread) and half of every MMA is padding. Here
// O^T is D / 4 registers a thread, none of it padding, and a thread's softmax state covers the
// same two pairs as its O^T registers (no shuffles to rescale). At head dim 128 the kernel
// takes about 100 registers, which lets a CTA run beside an extend CTA on one SM
// (docs/overlap_design.md: 3 R_extend + r_decode <= 512).
//
// Layout tricks (all exact), on top of the wide kernel's (same K/V ring, same swizzle, same d
// order of the Q.K sums):
// - O^T's rows may be permuted: row slot r of M tile mt holds d = (r % 8) * D/8 + 2 mt + r / 8,
//   so lane g's A operand (slots g and g + 8) is elements 2 mt and 2 mt + 1 of one contiguous
//   run of D/8 elements of each V row, the run the wide kernel reads for its output slot g.
// fp8 e4m3 tiles are converted to fp16 in registers (exact) and multiplied in fp16; k_scale is
// folded into the score scale and v_scale into the output.
#pragma once
#include "cuda/decode/tc_common.cuh"

#if defined(MA_CUDA)
#include "cuda/arch/sm80.cuh"
#include "cuda/common/fp8.cuh"
#include "cuda/extend/portable/frag_layout.h"

// Tuning knobs (lab: tools/pending/coresident.sh sets a small ring so that a CTA fits beside an
// extend CTA; `MA_DECODE_NARROW_MAXNREG` caps its registers).
#ifndef MA_DECODE_NARROW_RING_KB
#define MA_DECODE_NARROW_RING_KB 96
#endif
#if defined(MA_DECODE_NARROW_MAXNREG)
#define MA_DECODE_NARROW_BOUNDS(...) __maxnreg__(MA_DECODE_NARROW_MAXNREG)
#else
#define MA_DECODE_NARROW_BOUNDS(...) __launch_bounds__(__VA_ARGS__)
#endif

namespace mixed_attn::gpu::decode {

template <int D, bool kFp8>
struct NarrowTraits {
  static constexpr int kPairs = kDecodeBlockRows / 2;     // the MMA's N
  static constexpr int kElem = kFp8 ? 1 : 2;              // bytes per cache element
  static constexpr int kRowBytes = D * kElem;             // one key of one kv head
  static constexpr int kChunks = kRowBytes / 16;          // 16-byte chunks per row
#if defined(MA_DECODE_NARROW_WARPS)
  static constexpr int kWarps = MA_DECODE_NARROW_WARPS;
#else
  static constexpr int kWarps = decode_tc_warps(D, kFp8);  // the wide kernel's tile shape
#endif
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kTileKeys = 16 * kWarps;
  static constexpr int kStageBytes = 2 * kTileKeys * kRowBytes;
  static constexpr int kStagesFit = MA_DECODE_NARROW_RING_KB * 1024 / kStageBytes;
  static constexpr int kStages = kStagesFit < 2 ? 2 : (kStagesFit > 8 ? 8 : kStagesFit);
  static constexpr int kElemsPerChunk = 16 / kElem;
  static constexpr int kChunkGroups = kChunks / 4;           // 4 lanes cover one group
  static constexpr int kStepsPerChunk = kElemsPerChunk / 4;  // k16 MMA steps per chunk
  static constexpr int kDRun = D / 8;                        // contiguous d of one lane's O^T rows
  static constexpr int kMTiles = D / 16;                     // M tiles of O^T
  static constexpr int kVBytes = kDRun * kElem;              // per lane per V row
  static constexpr int kCombineBytes = kWarps * kPairs * D * 4;  // every warp's O, fp32
  static constexpr int kRingBytes = kStages * kStageBytes > kCombineBytes ? kStages * kStageBytes : kCombineBytes;
  static constexpr int kSmemBytes = kRingBytes;
  // Warp w reads keys 16 w .. of each tile and nothing else: it copies them itself (kWarpLocal).
  using Ring = KvRing<kRowBytes, kThreads, kTileKeys, kStages, 1, kChunks <= 32>;
};

// One CTA per (split, kv head, decode row) of a launch whose rows hold at most 8 (query, head)
// pairs of a kv head (the plan's decode_max_q x group <= 8; launch_decode checks it).
template <int D, typename QT, bool kFp8>
__global__ void MA_DECODE_NARROW_BOUNDS(NarrowTraits<D, kFp8>::kThreads)
    decode_split_narrow_kernel(const DecodeParams p, const DecodeConsts c) {
  using Tr = NarrowTraits<D, kFp8>;
  using MT = std::conditional_t<kFp8, ma_half, QT>;  // MMA operand type
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ float part_m[Tr::kWarps][Tr::kPairs];
  __shared__ float part_l[Tr::kWarps][Tr::kPairs];
  const AttentionCommon& a = p.attn;
  pdl_allow_dependents();  // the merge may launch now; it waits for this grid before reading
  SplitView sv;
  if (!load_split_view(a, blockIdx.x, blockIdx.z, sv)) return;
  const int kv_head = blockIdx.y / c.row_blocks;
  const int pair0 = (blockIdx.y % c.row_blocks) * kDecodeBlockRows;
  const int rows = min(kDecodeBlockRows, sv.q_len * c.group - pair0);  // pairs of this CTA
  if (rows <= 0) return;
  if (rows > Tr::kPairs) __trap();  // unreachable: launch_decode refuses such plans
  // Pair r: query (pair0 + r) / group, head kv_head * group + (pair0 + r) % group.
  auto pair_query = [&](int r) { return (pair0 + r) / c.group; };
  auto pair_head = [&](int r) { return kv_head * c.group + (pair0 + r) % c.group; };

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane >> 2, t4 = lane & 3;
  // Keys each of this lane's two pairs (2 t4, 2 t4 + 1) sees: [pair_begin, pair_end).
  int pair_begin[2], pair_end[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int qi = min(pair_query(2 * t4 + i), sv.q_len - 1);  // padding pairs: the last query's
    pair_begin[i] = query_visible_begin(sv, a.window_left, qi);
    pair_end[i] = query_key_end(sv, qi);
  }
  // Keys every pair sees: 16-key groups inside [all_begin, all_end) need no mask.
  const int all_begin = query_visible_begin(sv, a.window_left, pair_query(rows - 1));
  const int all_end = query_key_end(sv, pair_query(0));

  typename Tr::Ring ring(a, kv_head, Tr::kElem, smem);
  const int num_tiles = ring.start(sv, c, a);

  // Q^T as the B operand of S^T = K Q^T: qf[cg][s] = pair g's words of k step s of chunk group
  // cg (b0, b1), in the d order of the K reads.
  uint32_t qf[Tr::kChunkGroups][Tr::kStepsPerChunk][2];
  {
    const bool valid = g < rows;
    const QT* qrow = static_cast<const QT*>(a.q) + int64_t(sv.token + pair_query(valid ? g : 0)) * a.q_stride_token +
                     int64_t(pair_head(valid ? g : 0)) * a.q_stride_head;
#pragma unroll
    for (int cg = 0; cg < Tr::kChunkGroups; ++cg)
      q_chunk_words<QT, MT, kFp8, Tr::kElemsPerChunk>(qrow, valid, (cg * 4 + t4) * Tr::kElemsPerChunk, qf[cg]);
  }

  // o[mt]: O^T rows (slots g, g + 8 of M tile mt) x columns (pairs 2 t4, 2 t4 + 1):
  // o[mt][e] = O[pair 2 t4 + (e & 1)][d = g * kDRun + 2 mt + (e >> 1)].
  float o[Tr::kMTiles][4];
#pragma unroll
  for (int mt = 0; mt < Tr::kMTiles; ++mt) o[mt][0] = o[mt][1] = o[mt][2] = o[mt][3] = 0.0f;
  float m_run[2] = {-INFINITY, -INFINITY};  // per pair (log2 units)
  float l_run[2] = {0.0f, 0.0f};            // this lane's share of each pair's sum

  ring.run(sv, c, a, num_tiles, smem, [&](int tile, const unsigned char* kbuf, const unsigned char* vbuf) {
    const int warp_row0 = 16 * warp;
    const int tile_key0 = sv.key_begin + tile * Tr::kTileKeys + warp_row0;
    if (tile_key0 >= sv.key_end) return;  // past the split

    // S^T = K Q^T for the warp's 16 keys: this lane's K rows are keys g and g + 8.
    float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const unsigned char* krow0 = kbuf + (warp_row0 + g) * Tr::kRowBytes;
    const unsigned char* krow1 = krow0 + 8 * Tr::kRowBytes;
    const int ksw0 = swizzle<Tr::kChunks>(warp_row0 + g), ksw1 = swizzle<Tr::kChunks>(warp_row0 + 8 + g);
#pragma unroll
    for (int cg = 0; cg < Tr::kChunkGroups; ++cg) {
      union {
        uint4 v;
        uint32_t w[4];
      } k0, k1;
      k0.v = *reinterpret_cast<const uint4*>(krow0 + (((cg * 4 + t4) ^ ksw0) << 4));
      k1.v = *reinterpret_cast<const uint4*>(krow1 + (((cg * 4 + t4) ^ ksw1) << 4));
#pragma unroll
      for (int st = 0; st < Tr::kStepsPerChunk; ++st) {
        if constexpr (kFp8) {
          mma_16816<MT>(s, e4m3x2_to_half2(k0.w[st]), e4m3x2_to_half2(k1.w[st]), e4m3x2_to_half2(k0.w[st] >> 16),
                        e4m3x2_to_half2(k1.w[st] >> 16), qf[cg][st][0], qf[cg][st][1]);
        } else {
          mma_16816<MT>(s, k0.w[2 * st], k1.w[2 * st], k0.w[2 * st + 1], k1.w[2 * st + 1], qf[cg][st][0],
                        qf[cg][st][1]);
        }
      }
    }

    // Scores in log2 units, masked outside each pair's [pair_begin, pair_end); reordered to
    // the transposed accumulator layout (element i * 2 + c: pair 2 t4 + i, key g + 8 c).
    const bool need_mask = tile_key0 < all_begin || tile_key0 + 16 > all_end;
    float sp[1][4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = e & 1, kc = e >> 1;
      float x = capped_score(s[e], c);
      if (need_mask) {
        const int key = tile_key0 + g + 8 * kc;
        if (key < pair_begin[i] || key >= pair_end[i]) x = -INFINITY;
      }
      sp[0][2 * i + kc] = x;
    }
    float alpha[2];
    online_softmax_step<extend_detail::AccLayoutMma16816T>(sp, m_run, l_run, alpha, 1.0f);
#pragma unroll
    for (int mt = 0; mt < Tr::kMTiles; ++mt) {
      o[mt][0] *= alpha[0];
      o[mt][1] *= alpha[1];
      o[mt][2] *= alpha[0];
      o[mt][3] *= alpha[1];
    }
    // P^T (keys g, g + 8 x pairs 2 t4, 2 t4 + 1) as two 8x8 b16 matrices, transposed into the
    // B operand of O^T = V^T P^T: b0 = keys 2 t4, 2 t4 + 1 of pair g, b1 = keys 2 t4 + 8, + 9.
    const uint32_t b0 = movmatrix_trans(MmaType<MT>::pack(sp[0][0], sp[0][2]));
    const uint32_t b1 = movmatrix_trans(MmaType<MT>::pack(sp[0][1], sp[0][3]));

    // O^T += V^T P^T. This lane's V rows are keys 2 t4, 2 t4 + 1, 2 t4 + 8, 2 t4 + 9 of the
    // warp's 16 (the A operand's k), its d run g * kDRun .. (the A operand's rows).
    const VRows<Tr::kRowBytes> vrows(vbuf, warp_row0, t4);
    if constexpr (Tr::kVBytes >= 16) {
#pragma unroll
      for (int h = 0; h < Tr::kVBytes / 16; ++h) {
        const int chunk = g * (Tr::kVBytes / 16) + h;
        Words16 x[4];
        vrows.load(chunk, x);
#pragma unroll
        for (int w = 0; w < 4; ++w) {
          if constexpr (kFp8) {
            // Word w holds run elements 16 h + 4 w .. + 3: M tiles 8 h + 2 w and 8 h + 2 w + 1.
            const int mt = 8 * h + 2 * w;
            const auto [lo01, lo23, hi01, hi23] = fp8_key_pairs(x, w);
            mma_16816<MT>(o[mt], e4m3x2_to_half2(lo01), e4m3x2_to_half2(lo01 >> 16), e4m3x2_to_half2(lo23),
                          e4m3x2_to_half2(lo23 >> 16), b0, b1);
            mma_16816<MT>(o[mt + 1], e4m3x2_to_half2(hi01), e4m3x2_to_half2(hi01 >> 16), e4m3x2_to_half2(hi23),
                          e4m3x2_to_half2(hi23 >> 16), b0, b1);
          } else {
            // Word w holds run elements 8 h + 2 w, + 1: M tile 4 h + w.
            mma_16816<MT>(o[4 * h + w], __byte_perm(x[0].w[w], x[1].w[w], 0x5410),
                          __byte_perm(x[0].w[w], x[1].w[w], 0x7632), __byte_perm(x[2].w[w], x[3].w[w], 0x5410),
                          __byte_perm(x[2].w[w], x[3].w[w], 0x7632), b0, b1);
          }
        }
      }
    } else {
      // 8 bytes per V row (D=64 fp8): run elements 4 w .. + 3 of word w, M tiles 2 w, 2 w + 1.
      static_assert(Tr::kVBytes == 8 && kFp8, "unexpected V run");
      Words8 x[4];
      vrows.load_half(g, x);
#pragma unroll
      for (int w = 0; w < 2; ++w) {
        const auto [lo01, lo23, hi01, hi23] = fp8_key_pairs(x, w);
        mma_16816<MT>(o[2 * w], e4m3x2_to_half2(lo01), e4m3x2_to_half2(lo01 >> 16), e4m3x2_to_half2(lo23),
                      e4m3x2_to_half2(lo23 >> 16), b0, b1);
        mma_16816<MT>(o[2 * w + 1], e4m3x2_to_half2(hi01), e4m3x2_to_half2(hi01 >> 16), e4m3x2_to_half2(hi23),
                      e4m3x2_to_half2(hi23 >> 16), b0, b1);
      }
    }
  });

  // ---- combine the warps (the ring is free: it holds every warp's O) ---------------
  float* frag = reinterpret_cast<float*>(smem);  // [warp][pair][d]
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float l = l_run[i];
    l += __shfl_xor_sync(0xffffffffu, l, 4);
    l += __shfl_xor_sync(0xffffffffu, l, 8);
    l += __shfl_xor_sync(0xffffffffu, l, 16);
    if (g == 0) {
      part_m[warp][2 * t4 + i] = m_run[i];
      part_l[warp][2 * t4 + i] = l;
    }
    float* wf = frag + (warp * Tr::kPairs + 2 * t4 + i) * D + g * Tr::kDRun;
#pragma unroll
    for (int mt = 0; mt < Tr::kMTiles; ++mt)
      *reinterpret_cast<float2*>(wf + 2 * mt) = make_float2(o[mt][i], o[mt][2 + i]);
  }
  __syncthreads();

  // Each item: one pair, 4 consecutive d.
  const bool final_out = sv.num_splits == 1;
  const float v_scale = a.kv_dtype == DType::kFloat8E4M3 ? a.v_scale : 1.0f;
  for (int item = tid; item < rows * (D / 4); item += Tr::kThreads) {
    const int r = item / (D / 4);
    const int d0 = (item % (D / 4)) * 4;
    const int hq = pair_head(r);
    const int64_t token = sv.token + pair_query(r);
    const int64_t slot = sv.slot + pair_query(r);
    const float sink = final_out && a.maybe_sinks ? a.maybe_sinks[hq] * kLog2e : -INFINITY;
    float f[Tr::kWarps];
    float lse;
    combine_parts<Tr::kWarps>(&part_m[0][r], &part_l[0][r], Tr::kPairs, final_out, sink, v_scale, f, lse);
    float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int w = 0; w < Tr::kWarps; ++w) {
      const float4 x = *reinterpret_cast<const float4*>(frag + (w * Tr::kPairs + r) * D + d0);
      v[0] += f[w] * x.x;
      v[1] += f[w] * x.y;
      v[2] += f[w] * x.z;
      v[3] += f[w] * x.w;
    }
    if (final_out) {
      QT* dst = static_cast<QT*>(a.out) + token * a.out_stride_token + int64_t(hq) * a.out_stride_head + d0;
      store_out4<QT>(dst, v);
      if (a.maybe_lse != nullptr && d0 == 0) a.maybe_lse[token * a.lse_stride_token + hq] = lse;
    } else {
      float* dst = p.partial_out + (slot * a.num_qo_heads + hq) * D + d0;
      *reinterpret_cast<float4*>(dst) = make_float4(v[0], v[1], v[2], v[3]);
      if (d0 == 0) p.partial_lse[slot * a.num_qo_heads + hq] = lse;
    }
  }
}

}  // namespace mixed_attn::gpu::decode
#endif  // MA_CUDA
