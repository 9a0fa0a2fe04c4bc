// Stage 1 of the split-KV decode on NVIDIA tensor cores (mma.sync m16n8k16).
//
// One CTA per (decode row, kv head, block of 16 (query, head) pairs, split): the
// M side of the MMA packs the row's queries x the GQA group (p = query * group +
// head), so every KV byte of the split is read once per 16 pairs. Query i of a
// row of q_len tokens (speculative verify) is causal among the row's own tokens. KV tiles of
// kTileKeys keys stream through a kStages-deep cp.async ring in shared memory
// (16-byte copies, page ids fetched one tile ahead so page size 1 costs no
// extra round trip). Each warp owns 16 keys of every tile:
//   S[16 heads x 16 keys] = Q K^T   (query heads on the MMA's M; padded to 16)
//   online softmax per head in fp32 (log2 units)
//   O[16 heads x D]      += P V     (P reused from the S accumulators, FA2 style)
// and the warps' states are combined through shared memory at the end.
//
// Layout tricks (all exact):
// - Q.K sums over d, so d may be permuted as long as Q and K agree: each thread
//   reads one contiguous 16-byte run of a K row and Q is loaded in the same
//   order. That gives fp8 the same 16-byte loads as bf16.
// - 16-bit V reaches the MMA by ldmatrix.trans (B fragments straight from the key
//   rows; output tile j holds d = 8 j ..). fp8 V, converted in registers, permutes
//   P.V's output columns instead: MMA column slot n of tile j holds d = n * D/8 + j,
//   so a thread reads one contiguous run of each V row.
// - Rows are XOR-swizzled in 16-byte units so both access patterns are free of
//   bank conflicts (see swizzle()).
// fp8 e4m3 tiles are converted to fp16 in registers (exact) and multiplied in
// fp16; k_scale is folded into the score scale and v_scale into the output.
#pragma once
#include "cuda/decode/tc_common.cuh"

#if defined(MA_CUDA)
#include "cuda/arch/sm80.cuh"
#include "cuda/common/fp8.cuh"
#include "cuda/extend/portable/frag_layout.h"

// Tuning knobs (benchmarks/bench_decode.py; numbers in benchmarks/RESULTS.md).
#ifndef MA_DECODE_WARPS
#define MA_DECODE_WARPS 4
#endif
#ifndef MA_DECODE_RING_KB
#define MA_DECODE_RING_KB 96
#endif
// Lab knob (issue 14's co-residency experiment, tools/pending/coresident.sh): a register cap
// through the minimum CTAs per SM, so a decode CTA fits beside an extend CTA. Unset, the bounds
// are the thread count alone (the default build's code is unchanged).
#if defined(MA_DECODE_MIN_CTAS_PER_SM)
#define MA_DECODE_TC_BOUNDS(...) __launch_bounds__((__VA_ARGS__), MA_DECODE_MIN_CTAS_PER_SM)
#else
#define MA_DECODE_TC_BOUNDS(...) __launch_bounds__(__VA_ARGS__)
#endif

namespace mixed_attn::gpu::decode {

// D is the width of a ring row: the head dim, or kKvPack heads side by side (a CTA over kKvPack
// adjacent kv heads, launch_policy.h's decode_step_kv_pack).
template <int D, bool kFp8, int kBlocks = 1, int kKvPack = 1>
struct TcTraits {
  static constexpr int kElem = kFp8 ? 1 : 2;              // bytes per cache element
  static constexpr int kRowBytes = D * kElem;             // one key of one kv head
  static constexpr int kChunks = kRowBytes / 16;          // 16-byte chunks per row
  // 4 warps x 16 keys per tile and a ~96 KB ring (3 stages at D=128 bf16, 2
  // CTAs/SM) measured best on the H200 (benchmarks/RESULTS.md). D=256 bf16 uses
  // 2 warps so that a 3-stage ring still fits 2 CTAs per SM.
  static constexpr int kWarps = kChunks >= 32 ? 2 : MA_DECODE_WARPS;
  static_assert(MA_DECODE_WARPS != 4 || kWarps == decode_tc_warps(D, kFp8), "the planner's warp count");
  static constexpr int kThreads = kWarps * 32;
  // kBlocks MMA blocks of 16 (query, head) pairs per CTA; kBlockWarps warps share each block's
  // keys (kBlocks = 1: every warp owns 16 keys of each tile, as the plain decode).
  static_assert(kBlocks == 1 || kBlocks == 2 || kBlocks == 4, "1, 2 or 4 blocks per CTA");
  static_assert(kBlocks <= kWarps, "at most one block per warp");
  static constexpr int kBlockWarps = kWarps / kBlocks;
  static constexpr int kTileKeys = 16 * kWarps;
  static constexpr int kStageBytes = 2 * kTileKeys * kRowBytes;  // K rows then V rows
  // D=256 keeps the Q fragments in shared memory (registers hold O instead).
  static constexpr bool kQInSmem = D >= 256;
  static constexpr int kQFragBytes = (D / 16) * 4 * 4 * 32;  // k-steps x 4 words x 32 lanes
  static constexpr int kQSmemBytes = kQInSmem ? kBlocks * kQFragBytes : 0;  // one set per block
  static constexpr int kStagesFit = (MA_DECODE_RING_KB * 1024 - kQSmemBytes) / kStageBytes;
  static constexpr int kStages = kStagesFit < 3 ? 3 : (kStagesFit > 8 ? 8 : kStagesFit);
  static constexpr int kElemsPerChunk = 16 / kElem;
  static constexpr int kChunkGroups = kChunks / 4;                // 4 lanes cover one group
  static constexpr int kStepsPerChunk = kElemsPerChunk / 4;       // k16 MMA steps per chunk
  static constexpr int kDRun = D / 8;                             // contiguous d per output slot
  static constexpr int kVBytes = kDRun * kElem;                   // per thread per V row
  // 16-bit V is read by ldmatrix.trans (output tile j: d = 8 j + 2 t + e); fp8 V by VRows and
  // converted in registers (output slot n of tile j: d = n * kDRun + j).
  static constexpr bool kVByLdmatrix = !kFp8;
  static constexpr int kCombineFloats = kWarps * 2 * 8 * D;       // per-warp O fragments
  static constexpr int kRingBytes =
      (kStages * kStageBytes > kCombineFloats * 4) ? kStages * kStageBytes : kCombineFloats * 4;
  static constexpr int kSmemBytes = kRingBytes + kQSmemBytes;
  // One block: warp w reads keys 16 w .. of each tile and nothing else, so it copies them itself
  // (KvRing's kWarpLocal). Several blocks share every key (each warp reads kBlocks groups).
  static constexpr bool kWarpLocalRing = kBlocks == 1 && kChunks <= 32;
  using Ring = KvRing<kRowBytes, kThreads, kTileKeys, kStages, kKvPack, kWarpLocalRing>;
};

// The work of one CTA over `rows` (query, head) pairs from pair0 on, with kBlocks MMA blocks.
// The kernel below picks kBlocks per CTA from its own rows (never from the rest of the launch),
// so a CTA whose row needs fewer blocks than the launch's bound keeps every warp on its keys.
// With kKvPack = 2 the CTA reads kv heads 2 kv_slot and 2 kv_slot + 1 as one row of D = 2 x the
// head dim: a pair's query is zero outside its own head's half of the row (so Q.K over the row is
// its head's score), and of P.V's D output columns a pair keeps its head's half.
template <int D, typename QT, bool kFp8, bool kTwoHalves, int kBlocks, int kKvPack>
__device__ __forceinline__ void decode_tc_cta(const DecodeParams& p, const DecodeConsts& c, const SplitView& sv,
                                              const int kv_slot, const int pair0, const int rows, unsigned char* smem,
                                              float (*part_m)[16], float (*part_l)[16]) {
  using Tr = TcTraits<D, kFp8, kBlocks, kKvPack>;
  constexpr int kHeadD = D / kKvPack;  // the head dim
  using MT = std::conditional_t<kFp8, ma_half, QT>;  // MMA operand type
  constexpr int kHalves = kTwoHalves ? 2 : 1;        // 8-row halves of the 16-row MMA in use
  static_assert(kBlocks == 1 || kTwoHalves, "several blocks per CTA fill both halves");
  const AttentionCommon& a = p.attn;
  // CTA row r is pair pair0 + r: query (pair0 + r) / group, head kv_slot * group + (pair0 + r) % group.
  auto pair_query = [&](int r) { return (pair0 + r) / c.group; };
  auto pair_head = [&](int r) { return kv_slot * c.group + (pair0 + r) % c.group; };
  // Which of the CTA's kv heads pair r's head belongs to (its half of the row).
  auto pair_sub = [&](int r) { return kKvPack == 1 ? 0 : (pair0 + r) % c.group / (c.group / kKvPack); };

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane >> 2, t4 = lane & 3;
  // This warp's block (CTA rows 16 * block ..) and its share of each tile's keys: 16-key groups
  // key_group, key_group + kBlockWarps, ...
  const int block = warp / Tr::kBlockWarps, key_group = warp % Tr::kBlockWarps;
  const int block_row0 = 16 * block;
  const int block_rows = min(16, rows - block_row0);  // <= 0: a padding block, no work
  // Keys each of this lane's two rows (g, g + 8) sees: [row_begin, row_end) (causal, window).
  int row_begin[2], row_end[2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int qi = min(pair_query(block_row0 + g + 8 * half), sv.q_len - 1);  // padded rows: the last query's
    row_begin[half] = query_visible_begin(sv, a.window_left, qi);
    row_end[half] = query_key_end(sv, qi);
  }
  // Keys every row of the block sees: tiles inside [all_begin, all_end) need no mask.
  const int all_begin = query_visible_begin(sv, a.window_left, pair_query(block_row0 + max(block_rows, 1) - 1));
  const int all_end = query_key_end(sv, pair_query(block_row0));

  // ---- the K/V ring: its first tiles fly while the queries load --------------------
  typename Tr::Ring ring(a, kv_slot, Tr::kElem, smem);
  const int num_tiles = ring.start(sv, c, a);

  // ---- Q fragments (same d order as the K reads) -----------------------------
  // qf[cg][s][0] = rows g, k slots 2t..2t+1; [1] = k slots 2t+8..; [2],[3] rows g+8.
  uint32_t qf[Tr::kChunkGroups][Tr::kStepsPerChunk][4];
  {
#pragma unroll
    for (int half = 0; half < kHalves; ++half) {
      const int r = block_row0 + g + 8 * half;
      const bool valid = r < rows;
      const QT* qrow = static_cast<const QT*>(a.q) + int64_t(sv.token + pair_query(valid ? r : 0)) * a.q_stride_token +
                       int64_t(pair_head(valid ? r : 0)) * a.q_stride_head;
      const int sub = pair_sub(valid ? r : 0);
#pragma unroll
      for (int cg = 0; cg < Tr::kChunkGroups; ++cg) {
        uint32_t w[Tr::kStepsPerChunk][2];
        const int d0 = cg * 4 * Tr::kElemsPerChunk + t4 * Tr::kElemsPerChunk;  // in the row
        q_chunk_words<QT, MT, kFp8, Tr::kElemsPerChunk>(qrow, valid && d0 / kHeadD == sub, d0 % kHeadD, w);
#pragma unroll
        for (int s = 0; s < Tr::kStepsPerChunk; ++s) {
          qf[cg][s][2 * half + 0] = w[s][0];
          qf[cg][s][2 * half + 1] = w[s][1];
        }
      }
    }
    if constexpr (!kTwoHalves) {
#pragma unroll
      for (int cg = 0; cg < Tr::kChunkGroups; ++cg)
#pragma unroll
        for (int s = 0; s < Tr::kStepsPerChunk; ++s) qf[cg][s][2] = qf[cg][s][3] = 0u;
    }
  }

  // [block][cg][step][lane]: each block's fragments, written by the block's first warp.
  uint4* q_smem = reinterpret_cast<uint4*>(smem + Tr::kRingBytes) + block * (Tr::kQFragBytes / 16);
  if constexpr (Tr::kQInSmem) {
    if (key_group == 0) {
#pragma unroll
      for (int cg = 0; cg < Tr::kChunkGroups; ++cg)
#pragma unroll
        for (int st = 0; st < Tr::kStepsPerChunk; ++st)
          q_smem[(cg * Tr::kStepsPerChunk + st) * 32 + lane] =
              make_uint4(qf[cg][st][0], qf[cg][st][1], qf[cg][st][2], qf[cg][st][3]);
    }
    // Published to the block's other warps here: a warp-local ring's loop has no block barrier.
    __syncthreads();
  }

  // ---- main loop ---------------------------------------------------------------
  float o[Tr::kDRun][4];
#pragma unroll
  for (int j = 0; j < Tr::kDRun; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
  float m_run[2] = {-INFINITY, -INFINITY};  // running max per half (log2 units)
  float l_run[2] = {0.0f, 0.0f};            // this lane's share of the running sum

  ring.run(sv, c, a, num_tiles, smem, [&](int tile, const unsigned char* kbuf, const unsigned char* vbuf) {
  // This warp's 16-key groups of the tile (kBlocks of them: the tile's 16 * kWarps keys
  // are shared among the kBlockWarps warps of each block).
#pragma unroll
    for (int jg = 0; jg < kBlocks; ++jg) {
      const int warp_row0 = 16 * (key_group + jg * Tr::kBlockWarps);
      const int tile_key0 = sv.key_begin + tile * Tr::kTileKeys + warp_row0;
      if (block_rows <= 0 || tile_key0 >= sv.key_end) continue;  // a padding block, or past the split

      // S = Q K^T for the warp's 16 keys (two n8 tiles of 8 keys).
      float s[2][4];
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
      const unsigned char* krow[2] = {kbuf + (warp_row0 + g) * Tr::kRowBytes,
                                      kbuf + (warp_row0 + 8 + g) * Tr::kRowBytes};
      const int ksw[2] = {swizzle<Tr::kChunks>(warp_row0 + g), swizzle<Tr::kChunks>(warp_row0 + 8 + g)};
#pragma unroll
      for (int cg = 0; cg < Tr::kChunkGroups; ++cg) {
        uint32_t qa[Tr::kStepsPerChunk][4];
#pragma unroll
        for (int st = 0; st < Tr::kStepsPerChunk; ++st) {
          if constexpr (Tr::kQInSmem) {
            const uint4 v = q_smem[(cg * Tr::kStepsPerChunk + st) * 32 + lane];
            qa[st][0] = v.x;
            qa[st][1] = v.y;
            qa[st][2] = v.z;
            qa[st][3] = v.w;
          } else {
            qa[st][0] = qf[cg][st][0];
            qa[st][1] = qf[cg][st][1];
            qa[st][2] = qf[cg][st][2];
            qa[st][3] = qf[cg][st][3];
          }
          if constexpr (!kTwoHalves) qa[st][2] = qa[st][3] = 0u;
        }
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
          union {
            uint4 v;
            uint32_t w[4];
          } kw;
          kw.v = *reinterpret_cast<const uint4*>(krow[nt] + (((cg * 4 + t4) ^ ksw[nt]) << 4));
#pragma unroll
          for (int st = 0; st < Tr::kStepsPerChunk; ++st) {
            uint32_t b0, b1;
            if constexpr (kFp8) {
              b0 = e4m3x2_to_half2(kw.w[st]);
              b1 = e4m3x2_to_half2(kw.w[st] >> 16);
            } else {
              b0 = kw.w[2 * st];
              b1 = kw.w[2 * st + 1];
            }
            mma_16816<MT>(s[nt], qa[st][0], qa[st][2], qa[st][1], qa[st][3], b0, b1);
          }
        }
      }

      // Scores in log2 units, masked outside each row's [row_begin, row_end).
      const bool need_mask = tile_key0 < all_begin || tile_key0 + 16 > all_end;
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float x = capped_score(s[nt][e], c);
          if (need_mask) {
            const int key = tile_key0 + nt * 8 + 2 * t4 + (e & 1);
            if (key < row_begin[e >> 1] || key >= row_end[e >> 1]) x = -INFINITY;
          }
          s[nt][e] = x;
        }

      // Online softmax per half (rows g and g + 8; the S accumulators are in the mma.sync C
      // layout). Scores are already in log2 units: multiplier 1.
      float alpha[2];
      online_softmax_step<extend_detail::AccLayoutMma16816, kHalves>(s, m_run, l_run, alpha, 1.0f);
      // O's rescale only where a row's max moved in this warp: past the first tiles of a long
      // split it rarely does, and multiplying by exactly 1 changes no bit, so skipping it keeps
      // every result (and the deterministic plans' batch invariance) as it was.
      if (__any_sync(0xffffffffu, alpha[0] != 1.0f || (kTwoHalves && alpha[1] != 1.0f))) {
#pragma unroll
        for (int j = 0; j < Tr::kDRun; ++j) {
          o[j][0] *= alpha[0];
          o[j][1] *= alpha[0];
          if constexpr (kTwoHalves) {
            o[j][2] *= alpha[1];
            o[j][3] *= alpha[1];
          }
        }
      }
      const uint32_t pa0 = MmaType<MT>::pack(s[0][0], s[0][1]);
      const uint32_t pa2 = MmaType<MT>::pack(s[1][0], s[1][1]);
      const uint32_t pa1 = kTwoHalves ? MmaType<MT>::pack(s[0][2], s[0][3]) : 0u;
      const uint32_t pa3 = kTwoHalves ? MmaType<MT>::pack(s[1][2], s[1][3]) : 0u;

      // O += P V.
      if constexpr (Tr::kVByLdmatrix) {
        // 16-bit V: ldmatrix.trans hands each lane its B fragments straight from the key rows
        // (lane l addresses key (l & 7) + 8 ((l >> 3) & 1) of the warp's 16 at chunk 2 m + (l >> 4)):
        // output tile j holds d = 8 j + 2 t + e, the MMA's own column order.
        const int key_row = warp_row0 + (lane & 7) + 8 * ((lane >> 3) & 1);
        const unsigned char* vrow = vbuf + key_row * Tr::kRowBytes;
        const int vsw = swizzle<Tr::kChunks>(key_row);
#pragma unroll
        for (int m = 0; m < Tr::kChunks / 2; ++m) {
          uint32_t b[4];
          ldmatrix_x4_trans(b, vrow + (((2 * m + (lane >> 4)) ^ vsw) << 4));
          mma_16816<MT>(o[2 * m], pa0, pa1, pa2, pa3, b[0], b[1]);
          mma_16816<MT>(o[2 * m + 1], pa0, pa1, pa2, pa3, b[2], b[3]);
        }
      } else if constexpr (Tr::kVBytes >= 16) {
        // fp8 V (converted in registers): this lane's V rows are keys 2t, 2t+1, 2t+8, 2t+9 of
        // the warp's 16; its columns are d = g * D/8 + j of output tile j.
        const VRows<Tr::kRowBytes> vrows(vbuf, warp_row0, t4);
#pragma unroll
        for (int h = 0; h < Tr::kVBytes / 16; ++h) {
          const int chunk = g * (Tr::kVBytes / 16) + h;
          Words16 x[4];
          vrows.load(chunk, x);
#pragma unroll
          for (int w = 0; w < 4; ++w) {
            const int j = 16 * h + 4 * w;
            const auto [lo01, lo23, hi01, hi23] = fp8_key_pairs(x, w);
            mma_16816<MT>(o[j + 0], pa0, pa1, pa2, pa3, e4m3x2_to_half2(lo01), e4m3x2_to_half2(lo23));
            mma_16816<MT>(o[j + 1], pa0, pa1, pa2, pa3, e4m3x2_to_half2(lo01 >> 16), e4m3x2_to_half2(lo23 >> 16));
            mma_16816<MT>(o[j + 2], pa0, pa1, pa2, pa3, e4m3x2_to_half2(hi01), e4m3x2_to_half2(hi23));
            mma_16816<MT>(o[j + 3], pa0, pa1, pa2, pa3, e4m3x2_to_half2(hi01 >> 16), e4m3x2_to_half2(hi23 >> 16));
          }
        }
      } else {
        // 8 bytes per V row (D=64 fp8): d run of 8 elements.
        static_assert(Tr::kVBytes == 8 && kFp8, "unexpected V run");
        const VRows<Tr::kRowBytes> vrows(vbuf, warp_row0, t4);
        Words8 x[4];
        vrows.load_half(g, x);
#pragma unroll
        for (int w = 0; w < 2; ++w) {
          const int j = 4 * w;
          const auto [lo01, lo23, hi01, hi23] = fp8_key_pairs(x, w);
          mma_16816<MT>(o[j + 0], pa0, pa1, pa2, pa3, e4m3x2_to_half2(lo01), e4m3x2_to_half2(lo23));
          mma_16816<MT>(o[j + 1], pa0, pa1, pa2, pa3, e4m3x2_to_half2(lo01 >> 16), e4m3x2_to_half2(lo23 >> 16));
          mma_16816<MT>(o[j + 2], pa0, pa1, pa2, pa3, e4m3x2_to_half2(hi01), e4m3x2_to_half2(hi23));
          mma_16816<MT>(o[j + 3], pa0, pa1, pa2, pa3, e4m3x2_to_half2(hi01 >> 16), e4m3x2_to_half2(hi23 >> 16));
        }
      }
    }  // this warp's key groups
  });

  // ---- combine the warps (the ring is free: it holds the fragments) ----------------
  float* frag = reinterpret_cast<float*>(smem);
#pragma unroll
  for (int half = 0; half < kHalves; ++half) {
    float l = l_run[half];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    if (t4 == 0) {
      part_m[warp][g + 8 * half] = m_run[half];
      part_l[warp][g + 8 * half] = l;
    }
    float* wf = frag + (warp * 2 + half) * 8 * D;
#pragma unroll
    for (int j = 0; j < Tr::kDRun; ++j)
      *reinterpret_cast<float2*>(wf + (j * 32 + lane) * 2) = make_float2(o[j][2 * half], o[j][2 * half + 1]);
  }
  __syncthreads();

  // Each item: one head, 4 consecutive d of its row (D / 4 items a row). Where lane and tile hold
  // d (o[j][2 half + e] of lane 4 g + t): 16-bit V (ldmatrix) d = 8 j + 2 t + e; fp8 V
  // d = (2 t + e) * kDRun + j, so 4 consecutive d are 4 consecutive j of one (t, e).
  const bool final_out = sv.num_splits == 1;
  const float v_scale = a.kv_dtype == DType::kFloat8E4M3 ? a.v_scale : 1.0f;
  for (int item = tid; item < rows * (D / 4); item += Tr::kThreads) {
    const int r = item / (D / 4);
    const int row_col = (item % (D / 4)) * 4;
    if (row_col / kHeadD != pair_sub(r)) continue;  // the other head's half (kKvPack = 2)
    const int dcol = row_col % kHeadD;
    const int hq = pair_head(r);
    const int64_t token = sv.token + pair_query(r);
    const int64_t slot = sv.slot + pair_query(r);
    const float sink = final_out && a.maybe_sinks ? a.maybe_sinks[hq] * kLog2e : -INFINITY;
    // The states of row r are those of the kBlockWarps warps of its block.
    const int w0 = (r / 16) * Tr::kBlockWarps, rr = r % 16;
    float f[Tr::kBlockWarps];
    float lse;
    combine_parts<Tr::kBlockWarps>(&part_m[w0][rr], &part_l[w0][rr], 16, final_out, sink, v_scale, f, lse);
    float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    // The float index of d = row_col + i in a warp's fragments (frag: [j][lane][e]).
    auto frag_index = [&](int i) {
      const int d = row_col + i;
      if constexpr (Tr::kVByLdmatrix) return ((d >> 3) * 32 + 4 * (rr & 7) + ((d & 7) >> 1)) * 2 + (d & 1);
      else return ((d % Tr::kDRun) * 32 + 4 * (rr & 7) + (d / Tr::kDRun >> 1)) * 2 + (d / Tr::kDRun & 1);
    };
#pragma unroll
    for (int w = 0; w < Tr::kBlockWarps; ++w) {
      const float* wf = frag + ((w0 + w) * 2 + (rr >> 3)) * 8 * D;
#pragma unroll
      for (int i = 0; i < 4; ++i) v[i] += f[w] * wf[frag_index(i)];
    }
    if (final_out) {
      QT* dst = static_cast<QT*>(a.out) + token * a.out_stride_token + int64_t(hq) * a.out_stride_head + dcol;
      store_out4<QT>(dst, v);
      if (a.maybe_lse != nullptr && dcol == 0) a.maybe_lse[token * a.lse_stride_token + hq] = lse;
    } else {
      float* dst = p.partial_out + (slot * a.num_qo_heads + hq) * kHeadD + dcol;
      *reinterpret_cast<float4*>(dst) = make_float4(v[0], v[1], v[2], v[3]);
      if (dcol == 0) p.partial_lse[slot * a.num_qo_heads + hq] = lse;
    }
  }
}

// One CTA per (split, (kv-head slot, block of 16 * kBlocks pairs), decode row); kBlocks is the
// plan's bound (decode_cta_blocks), kKvPack its kv heads a slot (decode_kv_pack). A CTA with fewer
// pairs runs the body of the blocks it needs (and one 8-row half when its pairs fit), so one-token
// rows in a launch sized for verify rows (graph-safe and deterministic plans fix the bound) use
// every warp (head dim 256: see below). The choice depends on the CTA's own row alone: a row's
// bits do not depend on its batch.
template <int D, typename QT, bool kFp8, bool kTwoHalves, int kBlocks, int kKvPack>
__global__ void MA_DECODE_TC_BOUNDS(TcTraits<D, kFp8, kBlocks, kKvPack>::kThreads)
    decode_split_tc_kernel(const DecodeParams p, const DecodeConsts c) {
  using Tr = TcTraits<D, kFp8, kBlocks, kKvPack>;
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ float part_m[Tr::kWarps][16];
  __shared__ float part_l[Tr::kWarps][16];
  pdl_allow_dependents();  // the merge may launch now; it waits for this grid before reading
  SplitView sv;
  if (!load_split_view(p.attn, blockIdx.x, blockIdx.z, sv)) return;
  const int kv_slot = blockIdx.y / c.row_blocks;
  const int pair0 = (blockIdx.y % c.row_blocks) * (16 * kBlocks);  // first (query, head) pair of this CTA
  const int rows = min(16 * kBlocks, sv.q_len * c.group - pair0);  // pairs of this CTA
  if (rows <= 0) return;                                            // a shorter row than the launch's longest
  // Head dim 256 keeps one body per kernel: a second one costs spills there (its O fragments
  // already take most registers); its policy bounds the launch at one 8-row half instead.
  constexpr bool kPickBody = D < 256;
  constexpr int P = kKvPack;
  if constexpr (kPickBody && kBlocks == 4) {
    if (rows > 32) return decode_tc_cta<D, QT, kFp8, true, 4, P>(p, c, sv, kv_slot, pair0, rows, smem, part_m, part_l);
  }
  if constexpr (kPickBody && kBlocks >= 2) {
    if (rows > 16) return decode_tc_cta<D, QT, kFp8, true, 2, P>(p, c, sv, kv_slot, pair0, rows, smem, part_m, part_l);
  }
  if constexpr (kPickBody && kTwoHalves) {
    if (rows > 8) return decode_tc_cta<D, QT, kFp8, true, 1, P>(p, c, sv, kv_slot, pair0, rows, smem, part_m, part_l);
  }
  if constexpr (kPickBody) {
    // The smaller bodies use this launch's shared memory: the same ring, no more Q fragments.
    static_assert(
        TcTraits<D, kFp8, 1, P>::kStages == Tr::kStages && TcTraits<D, kFp8, 1, P>::kSmemBytes <= Tr::kSmemBytes,
        "a smaller body must fit the launch's shared memory");
    decode_tc_cta<D, QT, kFp8, false, 1, P>(p, c, sv, kv_slot, pair0, rows, smem, part_m, part_l);
  } else {
    decode_tc_cta<D, QT, kFp8, kTwoHalves, kBlocks, P>(p, c, sv, kv_slot, pair0, rows, smem, part_m, part_l);
  }
}

}  // namespace mixed_attn::gpu::decode
#endif  // MA_CUDA
