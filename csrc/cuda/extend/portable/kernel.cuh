// The extend kernel: FlashAttention-2-style attention of query tiles over the
// paged KV cache, on tensor cores, with a multi-stage cp.async pipeline for
// the K/V tiles: mma.sync m16n8k16 + ldmatrix (sm_80+). On H100/H200 builds
// with sm_90a, launch_extend uses the warp-specialised kernel in
// extend/sm90/kernel.cuh instead for bf16/fp16 caches; this kernel serves fp8 caches
// and other GPUs.
//
// Work: one CTA per (extend tile, group of q heads). A tile is
// plan.extend_tiles[i] = (row, q_start); the planner sorts them costliest first.
// GQA packing: the CTA's kBlockM query rows are (query, head) pairs of `pack`
// q heads that share one kv head (row r = query r / pack, head r % pack), so
// every K/V tile loaded into shared memory serves pack heads at once and short
// extends (decode rows in fold mode) still fill the tile.
//
// Per CTA: Q fragments live in registers (or are re-read from shared memory,
// per head dim); K/V tiles of kBlockN keys stream through kStages
// shared-memory slots (XOR-swizzled so that ldmatrix is conflict-free). Online
// softmax in base 2. Only tiles that straddle the causal diagonal or the
// window's left edge are masked; tiles outside [first visible key, last
// visible key] are never loaded, and key slots outside that range are
// zero-filled, so unwritten cache memory never reaches P.V. The logit cap,
// the online-softmax step and the fp8 widening are the shared ones
// (common/math.cuh, common/softmax.cuh, common/fp8.cuh).
// fp8 e4m3 cache: tiles land as bytes and are widened exactly to bf16/fp16 in
// shared memory; k_scale is folded into the score scale, v_scale into the
// final normalisation.
//
// AMD CDNA2/CDNA3 (HIP, 64-lane wavefronts): the same kernel with the two
// products on MFMA 16x16x16 (extend/portable/mma.cuh), computed transposed, S^T = K Q^T
// and O^T = V^T P^T, so that a lane's accumulators all belong to one query row
// (AccLayoutMfma16 in extend/portable/frag_layout.h); V is staged transposed in LDS;
// loads are synchronous; fp8 tiles are widened in LDS as above. Only the two
// products, the fragment loads and the V staging differ per vendor: masks,
// softmax and epilogue are written once against the accumulator layout. The
// HIP path is compiled in CI (gfx90a, gfx940) and its fragment bookkeeping is
// emulated on the CPU (tests/test_extend_frag_layout.py); it has not run on
// AMD hardware yet, and its tile shapes are untuned.
#pragma once
#include <cstdint>
#include <type_traits>

#include "cuda/common/fp8.cuh"
#include "cuda/common/math.cuh"
#include "cuda/common/pdl.cuh"
#include "cuda/common/smem_optin.h"
#include "cuda/common/softmax.cuh"
#include "cuda/extend/args.cuh"
#include "cuda/extend/portable/mma.cuh"
#include "mixed_attn/compat.h"
#include "mixed_attn/launch_policy.h"
#include "cuda/common/plan_counts.cuh"
#include "mixed_attn/params.h"

namespace mixed_attn::gpu::extend_detail {

// Tile shapes per head dim: kWarps warps of kMTiles m16 fragments each (16 *
// kMTiles query rows per warp), kBlockN keys per K/V tile, kStages pipeline
// slots. kQInRegs: Q fragments stay in registers for the whole K/V loop;
// otherwise they are re-read from shared memory each k-step (cheap: one A
// fragment serves kBlockN / 8 mmas). Q (when in registers), O (kMTiles * D / 2)
// and S (kMTiles * kBlockN / 2) must fit in 255 registers without spilling
// (check with -Xptxas -v). Each field can be overridden at build time (e.g.
// -DMA_EXTEND_D128_W=4 -DMA_EXTEND_D128_MT=2 ...) to compare shapes in one
// benchmark run (benchmarks/sweep_extend.py). The defaults are the fastest
// shapes that passed the tests on an H200 (benchmarks/RESULTS.md): head dim
// 64: 4 warps x 32 rows, 2 CTAs per SM; 128: 8 warps x 16 rows with Q in
// registers; 256: 8 x 16 rows, BN 32, Q re-read from shared memory.
//
// HIP: CDNA has 64 KB of LDS per workgroup (the shapes above need up to
// 128 KB), and with synchronous loads a third slot buys nothing, so smaller
// defaults, chosen to fit (not measured; no AMD GPU was available): 4 wavefronts
// of 64 lanes, Q in registers (the MFMA B operand is 2 VGPRs per k-step),
// 2 slots; head dim 64: 128 rows x 64 keys (48 KB), 128: 64 x 32 (48 KB),
// 256: 64 x 16 (64 KB).
template <int W, int MT, int BN, int ST, bool QR>
struct ExtendShape {
  static constexpr int kWarps = W, kMTiles = MT, kBlockN = BN, kStages = ST;
  static constexpr bool kQInRegs = QR;
};
#if defined(MA_HIP)
#ifndef MA_EXTEND_D64_W
#define MA_EXTEND_D64_W 4
#endif
#ifndef MA_EXTEND_D64_MT
#define MA_EXTEND_D64_MT 2
#endif
#ifndef MA_EXTEND_D64_ST
#define MA_EXTEND_D64_ST 2
#endif
#ifndef MA_EXTEND_D64_QR
#define MA_EXTEND_D64_QR 1
#endif
#ifndef MA_EXTEND_D128_W
#define MA_EXTEND_D128_W 4
#endif
#ifndef MA_EXTEND_D128_BN
#define MA_EXTEND_D128_BN 32
#endif
#ifndef MA_EXTEND_D128_ST
#define MA_EXTEND_D128_ST 2
#endif
#ifndef MA_EXTEND_D256_W
#define MA_EXTEND_D256_W 4
#endif
#ifndef MA_EXTEND_D256_BN
#define MA_EXTEND_D256_BN 16
#endif
#ifndef MA_EXTEND_D256_QR
#define MA_EXTEND_D256_QR 1
#endif
#endif  // MA_HIP
#ifndef MA_EXTEND_D64_W
#define MA_EXTEND_D64_W 4
#endif
#ifndef MA_EXTEND_D64_MT
#define MA_EXTEND_D64_MT 2
#endif
#ifndef MA_EXTEND_D64_BN
#define MA_EXTEND_D64_BN 64
#endif
#ifndef MA_EXTEND_D64_ST
#define MA_EXTEND_D64_ST 3
#endif
#ifndef MA_EXTEND_D64_QR
#define MA_EXTEND_D64_QR 0
#endif
#ifndef MA_EXTEND_D128_W
#define MA_EXTEND_D128_W 8
#endif
#ifndef MA_EXTEND_D128_MT
#define MA_EXTEND_D128_MT 1
#endif
#ifndef MA_EXTEND_D128_BN
#define MA_EXTEND_D128_BN 64
#endif
#ifndef MA_EXTEND_D128_ST
#define MA_EXTEND_D128_ST 3
#endif
#ifndef MA_EXTEND_D128_QR
#define MA_EXTEND_D128_QR 1
#endif
#ifndef MA_EXTEND_D256_W
#define MA_EXTEND_D256_W 8
#endif
#ifndef MA_EXTEND_D256_MT
#define MA_EXTEND_D256_MT 1
#endif
#ifndef MA_EXTEND_D256_BN
#define MA_EXTEND_D256_BN 32
#endif
#ifndef MA_EXTEND_D256_ST
#define MA_EXTEND_D256_ST 2
#endif
#ifndef MA_EXTEND_D256_QR
#define MA_EXTEND_D256_QR 0
#endif

template <int kHeadDim> struct ExtendTraits;
#define MA_EXTEND_SHAPE(d)                                                                       \
  ExtendShape<MA_EXTEND_D##d##_W, MA_EXTEND_D##d##_MT, MA_EXTEND_D##d##_BN, MA_EXTEND_D##d##_ST, \
              MA_EXTEND_D##d##_QR != 0>
template <> struct ExtendTraits<64> : MA_EXTEND_SHAPE(64) {};
template <> struct ExtendTraits<128> : MA_EXTEND_SHAPE(128) {};
template <> struct ExtendTraits<256> : MA_EXTEND_SHAPE(256) {};
#undef MA_EXTEND_SHAPE

template <int kHeadDim> __host__ __device__ constexpr int block_m() {
  return 16 * ExtendTraits<kHeadDim>::kMTiles * ExtendTraits<kHeadDim>::kWarps;
}

// Shared-memory bytes of one CTA.
template <int kHeadDim, bool kFp8>
constexpr int extend_smem_bytes() {
  using Tr = ExtendTraits<kHeadDim>;
  constexpr int q = block_m<kHeadDim>() * kHeadDim * 2;
  constexpr int kv_tile = Tr::kBlockN * kHeadDim * (kFp8 ? 1 : 2);
  constexpr int staged = Tr::kStages * 2 * kv_tile;
  constexpr int widened = kFp8 ? 2 * Tr::kBlockN * kHeadDim * 2 : 0;
  return q + staged + widened;
}

// Element offset of 16-byte chunk `chunk` of row `row` in a swizzled tile
// whose rows hold kChunks chunks of 8 b16 elements: the chunk index is XORed
// with the row's low 3 bits, so the 8 rows an ldmatrix reads fall in 8
// different bank groups.
template <int kChunks>
__device__ __forceinline__ int swz(int row, int chunk) {
  static_assert(kChunks >= 8, "swizzle needs at least 8 chunks per row (head_dim >= 64)");
  return row * kChunks * 8 + ((chunk ^ (row & 7)) << 3);
}

// Element offset of element `col` of row `row` in a swizzled tile (the MFMA
// path's 4-element fragment reads never cross a 16-byte chunk).
template <int kChunks>
__device__ __forceinline__ int swz_elem(int row, int col) {
  return swz<kChunks>(row, col / 8) + col % 8;
}

// The accumulator layout the masks, softmax and epilogue are written against.
#if defined(MA_HIP)
using AccLayout = AccLayoutMfma16;
#else
using AccLayout = AccLayoutMma16816;
#endif
static_assert(AccLayout::kLanes == kWarpSize, "accumulator layout and warp width disagree");

#if MA_EXTEND_HAS_MMA
#if defined(MA_HIP)
// 8 b16 values of key `key`, head-dim columns 8 * chunk .. 8 * chunk + 7, into
// the transposed V tile (vt_off): eight 2-byte LDS stores, paid once per CTA,
// where every wavefront's reads of the tile then take one 8-byte load per MFMA
// operand.
template <int BN, typename T>
__device__ __forceinline__ void put_v_transposed(T* v_tile, int key, int chunk, uint4 v) {
  uint16_t* dst = reinterpret_cast<uint16_t*>(v_tile);
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int e = 0; e < 8; ++e) dst[vt_off<BN>(chunk * 8 + e, key)] = uint16_t(w[e / 2] >> (16 * (e % 2)));
}
#endif  // MA_CUDA

// Stages one 16-byte chunk (key `key`, head dims 8 * chunk ..) of a b16 V tile:
// row-major (swizzled) through cp.async on NVIDIA, transposed on HIP.
template <int kChunks, int BN, typename T>
__device__ __forceinline__ void stage_v_16(T* v_tile, int key, int chunk, const T* src, bool valid) {
#if defined(MA_HIP)
  uint4 v = make_uint4(0u, 0u, 0u, 0u);
  if (valid) v = *reinterpret_cast<const uint4*>(src);
  put_v_transposed<BN>(v_tile, key, chunk, v);
#else
  cp_async_16(v_tile + swz<kChunks>(key, chunk), src, valid);
#endif
}

#endif  // MA_EXTEND_HAS_MMA

template <int kHeadDim, typename T, bool kFp8>
__global__ void __launch_bounds__((ExtendTraits<kHeadDim>::kWarps * kWarpSize), 1)
    extend_kernel(const ExtendArgs args) {
#if MA_EXTEND_HAS_MMA
  pdl_allow_dependents();  // a decode stage 1 launched after it may take the SMs its last CTAs leave
  using Tr = ExtendTraits<kHeadDim>;
  constexpr int D = kHeadDim;
  constexpr int kWarps = Tr::kWarps;
  constexpr int kThreads = kWarps * kWarpSize;
  constexpr int BM = block_m<kHeadDim>();
  constexpr int BN = Tr::kBlockN;
  constexpr int kStages = Tr::kStages;
  constexpr int kChunks = D / 8;                  // 16-byte chunks per b16 row
  constexpr int kKSteps = D / 16;                 // k-steps of Q.K^T
  constexpr int kNTilesS = BN / AccLayout::kNTile;  // accumulator tiles of S (S^T on HIP)
  constexpr int kNTilesO = D / AccLayout::kNTile;   // accumulator tiles of O (O^T on HIP)
  constexpr int kRows = AccLayout::kRowsPerLane;    // query rows a lane holds per m-tile
  constexpr int kCols = AccLayout::kCols;           // consecutive columns per row and tile
  constexpr int kKvTileElems = BN * D;
  static_assert(kStages >= 2, "pipeline needs two slots");
  static_assert(BN % 16 == 0 && D % 16 == 0, "tile shapes");

  const AttentionCommon& a = args.a;
  const PlanView& plan = a.plan;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* smem_q = reinterpret_cast<T*>(smem_raw);
  unsigned char* smem_kv = smem_raw + BM * D * 2;  // kStages x (K tile, V tile)
  constexpr int kStagedTileBytes = kKvTileElems * (kFp8 ? 1 : 2);
  T* smem_wide = reinterpret_cast<T*>(smem_kv + kStages * 2 * kStagedTileBytes);  // fp8 only

  const int tid = threadIdx.x;
  const int warp = tid / kWarpSize;
  const int lane = tid % kWarpSize;

  const int tile_index = blockIdx.x / args.head_groups;
  const int head_group = blockIdx.x % args.head_groups;
  // Graph-safe launches cover the bucket: CTAs past this step's tiles have no work.
  if (tile_index >= plan_count(plan, kCountExtendTiles, plan.num_extend_tiles)) return;
  const int pack = args.pack;
  const int q_head0 = head_group * pack;
  const int kv_head = q_head0 / (a.num_qo_heads / a.num_kv_heads);

  const int row = plan.extend_tiles[2 * tile_index];
  const int tile_q0 = plan.extend_tiles[2 * tile_index + 1];
  const int token0 = plan.qo_indptr[row];
  const int extend_len = plan.qo_indptr[row + 1] - token0;
  const int seq_len = plan.seq_lens[row];
  const int prefix = seq_len - extend_len;
  const int tile_end = min(tile_q0 + plan.extend_tile_tokens, extend_len);
  const int page_base = plan.kv_indptr[row];
  const int page_size = a.page_size;
  const int window = a.window_left;

  const T* q_ptr = static_cast<const T*>(a.q);
  T* out_ptr = static_cast<T*>(a.out);
  using KvT = typename std::conditional<kFp8, uint8_t, T>::type;
  const KvT* k_cache = static_cast<const KvT*>(a.k_cache) + int64_t(kv_head) * a.k_stride_head;
  const KvT* v_cache = static_cast<const KvT*>(a.v_cache) + int64_t(kv_head) * a.v_stride_head;

  const float scale_log2 = args.score_scale * kLog2e;
  const float cap = a.logit_cap;
  const float cap_inv_scaled = cap > 0.f ? args.score_scale / cap : 0.f;
  const float cap_log2 = cap * kLog2e;

  // A CTA covers at most tile_capacity queries per pass; a plan with larger
  // tiles (e.g. one made for another backend) takes several passes.
  for (int pass_q0 = tile_q0; pass_q0 < tile_end; pass_q0 += args.tile_capacity) {
    const int nq = min(args.tile_capacity, tile_end - pass_q0);
    const int rows_valid = nq * pack;
    const int min_pos = prefix + pass_q0;
    const int max_pos = prefix + pass_q0 + nq - 1;
    const int kv_hi = max_pos + 1;  // exclusive
    const int kv_lo = window >= 0 ? max(0, min_pos - window) : 0;
    const int first_tile_key = kv_lo / BN * BN;
    const int num_kv_tiles = (kv_hi - first_tile_key + BN - 1) / BN;

    // ---- Q tile -> shared (rows beyond the tile's queries are zero) ----
    for (int idx = tid; idx < BM * kChunks; idx += kThreads) {
      const int r = idx / kChunks, c = idx % kChunks;
      const bool valid = r < rows_valid;
      const int qi = valid ? r / pack : 0;
      const int h = q_head0 + (valid ? r % pack : 0);
      const T* src = q_ptr + int64_t(token0 + pass_q0 + qi) * a.q_stride_token + int64_t(h) * a.q_stride_head + c * 8;
      cp_async_16(smem_q + swz<kChunks>(r, c), src, valid);
    }
    cp_async_commit();

    // ---- K/V tile loader. Each thread reads the page ids of the rows it loads one
    // K/V tile ahead (plain loads whose latency hides behind a tile of math) instead
    // of right before issuing the tile's cp.async, where every warp would wait on
    // those dependent loads after each barrier (benchmarks/RESULTS.md). ----
    constexpr int kChunksRowP = kFp8 ? D / 16 : D / 8;
    constexpr int kRowsPerThread = BN / (kThreads / kChunksRowP);
    static_assert(kThreads % kChunksRowP == 0 && BN % (kThreads / kChunksRowP) == 0, "loader layout");
    int next_page[kRowsPerThread];  // -1: key outside [kv_lo, kv_hi) (zero-filled)
    int next_slot[kRowsPerThread];
    auto fetch_pages = [&](int tile) {
      const int n0 = first_tile_key + tile * BN;
#pragma unroll
      for (int i = 0; i < kRowsPerThread; ++i) {
        const int r = tid / kChunksRowP + i * (kThreads / kChunksRowP);
        const int j = n0 + r;
        const bool valid = tile < num_kv_tiles && j >= kv_lo && j < kv_hi;
        const int page_pos = j / page_size;
        next_page[i] = valid ? a.kv_indices[page_base + page_pos] : -1;
        next_slot[i] = j - page_pos * page_size;
      }
    };
    auto load_kv_fetched = [&](int slot) {
      unsigned char* k_dst = smem_kv + slot * 2 * kStagedTileBytes;
      unsigned char* v_dst = k_dst + kStagedTileBytes;
      const int c = tid % kChunksRowP;
#pragma unroll
      for (int i = 0; i < kRowsPerThread; ++i) {
        const int r = tid / kChunksRowP + i * (kThreads / kChunksRowP);
        const bool valid = next_page[i] >= 0;
        const int64_t k_off =
            valid ? int64_t(next_page[i]) * a.k_stride_page + int64_t(next_slot[i]) * a.k_stride_slot : 0;
        const int64_t v_off =
            valid ? int64_t(next_page[i]) * a.v_stride_page + int64_t(next_slot[i]) * a.v_stride_slot : 0;
        if constexpr (kFp8) {
          cp_async_16(k_dst + r * D + c * 16, k_cache + k_off + c * 16, valid);
          cp_async_16(v_dst + r * D + c * 16, v_cache + v_off + c * 16, valid);
        } else {
          cp_async_16(reinterpret_cast<T*>(k_dst) + swz<kChunks>(r, c), k_cache + k_off + c * 8, valid);
          stage_v_16<kChunks, BN>(reinterpret_cast<T*>(v_dst), r, c, v_cache + v_off + c * 8, valid);
        }
      }
    };

#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      fetch_pages(s);
      if (s < num_kv_tiles) load_kv_fetched(s);
      cp_async_commit();
    }
    fetch_pages(kStages - 1);

    // ---- Q fragments (this warp's rows, all of D) ----
    cp_async_wait<kStages - 1>();
    __syncthreads();
    constexpr int kMT = Tr::kMTiles;
    const int warp_row0 = warp * 16 * kMT;
    constexpr bool kQRegs = Tr::kQInRegs;
    constexpr int kQRegSteps = kQRegs ? kKSteps : 1;
#if defined(MA_HIP)
    // Q^T is the B operand of S^T = K Q^T: lane l holds query b_col(l) of the
    // m-tile, head dims b_k(l, 0..3) of the k-step (one 8-byte read).
    auto load_q_frag = [&](int mt, int kk) {
      return lds_load_operand(
          smem_q + swz_elem<kChunks>(warp_row0 + mt * 16 + Mfma16::b_col(lane), kk * 16 + Mfma16::b_k(lane, 0)));
    };
    MfmaOperand q_frag[kMT][kQRegSteps];
    if constexpr (kQRegs) {
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int kk = 0; kk < kKSteps; ++kk) q_frag[mt][kk] = load_q_frag(mt, kk);
    }
#else
    // A-fragment matrices: (rows 0-7, d 0-7), (rows 8-15, d 0-7), (rows 0-7, d 8-15), (rows 8-15, d 8-15)
    const int a_row = warp_row0 + (lane % 8) + ((lane / 8) % 2) * 8;
    uint32_t q_frag[kMT][kQRegSteps][4];
    if constexpr (kQRegs) {
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int kk = 0; kk < kKSteps; ++kk)
          ldmatrix_x4(q_frag[mt][kk], smem_q + swz<kChunks>(a_row + mt * 16, kk * 2 + lane / 16));
    }
#endif

    // This thread's query rows (AccLayout::row: g and g + 8 of each of the
    // warp's m-tiles on NVIDIA, lane % 16 on AMD), as absolute positions; rows
    // past the tile reuse the last query's position (finite, never stored).
    int pos[kMT][kRows];
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int i = 0; i < kRows; ++i) {
        const int r = warp_row0 + mt * 16 + AccLayout::row(lane, i);
        pos[mt][i] = prefix + pass_q0 + min(r / pack, nq - 1);
      }

    float o_acc[kMT][kNTilesO][4];
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int n = 0; n < kNTilesO; ++n) o_acc[mt][n][0] = o_acc[mt][n][1] = o_acc[mt][n][2] = o_acc[mt][n][3] = 0.f;
    float row_max[kMT][kRows];  // running max, base-2 scaled units
    float row_sum[kMT][kRows];  // this thread's partial row sums
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int i = 0; i < kRows; ++i) {
        row_max[mt][i] = -INFINITY;
        row_sum[mt][i] = 0.f;
      }
    // Scores enter the softmax as x * score_mult in base-2 units: the raw q.k
    // times the scale, or (logit cap) already transformed, multiplier 1.
    const float score_mult = cap > 0.f ? 1.f : scale_log2;

    for (int tile = 0; tile < num_kv_tiles; ++tile) {
      cp_async_wait<kStages - 2>();
      __syncthreads();
      {
        const int next = tile + kStages - 1;
        // Page ids of `next` were read an iteration ago; read those of the tile after.
        if (next < num_kv_tiles) load_kv_fetched(next % kStages);
        fetch_pages(next + 1);
        cp_async_commit();
      }
      const int slot = tile % kStages;
      const T* k_s;
      const T* v_s;
      if constexpr (kFp8) {
        // Widen the staged e4m3 tiles into the b16 (swizzled) tiles.
        const uint8_t* k8 = smem_kv + slot * 2 * kStagedTileBytes;
        const uint8_t* v8 = k8 + kStagedTileBytes;
        constexpr int kChunks8 = D / 16;
        for (int idx = tid; idx < 2 * BN * kChunks8; idx += kThreads) {
          const bool is_v = idx >= BN * kChunks8;
          const int e = is_v ? idx - BN * kChunks8 : idx;
          const int r = e / kChunks8, c = e % kChunks8;
          const uint4 raw = *reinterpret_cast<const uint4*>((is_v ? v8 : k8) + r * D + c * 16);
          uint4 lo, hi;
          lo.x = e4m3x2_to_b16<T>(raw.x & 0xFFFFu);
          lo.y = e4m3x2_to_b16<T>(raw.x >> 16);
          lo.z = e4m3x2_to_b16<T>(raw.y & 0xFFFFu);
          lo.w = e4m3x2_to_b16<T>(raw.y >> 16);
          hi.x = e4m3x2_to_b16<T>(raw.z & 0xFFFFu);
          hi.y = e4m3x2_to_b16<T>(raw.z >> 16);
          hi.z = e4m3x2_to_b16<T>(raw.w & 0xFFFFu);
          hi.w = e4m3x2_to_b16<T>(raw.w >> 16);
          T* dst = smem_wide + (is_v ? kKvTileElems : 0);
#if defined(MA_HIP)
          if (is_v) {  // V is read transposed on AMD (vt_off)
            put_v_transposed<BN>(dst, r, 2 * c, lo);
            put_v_transposed<BN>(dst, r, 2 * c + 1, hi);
            continue;
          }
#endif
          *reinterpret_cast<uint4*>(dst + swz<kChunks>(r, 2 * c)) = lo;
          *reinterpret_cast<uint4*>(dst + swz<kChunks>(r, 2 * c + 1)) = hi;
        }
        __syncthreads();
        k_s = smem_wide;
        v_s = smem_wide + kKvTileElems;
      } else {
        k_s = reinterpret_cast<const T*>(smem_kv + slot * 2 * kStagedTileBytes);
        v_s = k_s + kKvTileElems;
      }

      // ---- S = Q K^T (raw dot products, fp32) ----
      float s_acc[kMT][kNTilesS][4];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int n = 0; n < kNTilesS; ++n) s_acc[mt][n][0] = s_acc[mt][n][1] = s_acc[mt][n][2] = s_acc[mt][n][3] = 0.f;
      {
#if defined(MA_HIP)
        // S^T = K Q^T: the A operand is the K tile (lane l: key a_row(l) of the
        // n-tile, head dims a_k(l, 0..3) of the k-step), B is Q^T (q_frag).
        constexpr int kSUnroll = kQRegs ? kKSteps : 2;
#pragma unroll kSUnroll
        for (int kk = 0; kk < kKSteps; ++kk) {
          MfmaOperand q_smem[kMT];
          if constexpr (!kQRegs) {
#pragma unroll
            for (int mt = 0; mt < kMT; ++mt) q_smem[mt] = load_q_frag(mt, kk);
          }
#pragma unroll
          for (int n = 0; n < kNTilesS; ++n) {
            const MfmaOperand k_frag =
                lds_load_operand(k_s + swz_elem<kChunks>(n * 16 + Mfma16::a_row(lane), kk * 16 + Mfma16::a_k(lane, 0)));
#pragma unroll
            for (int mt = 0; mt < kMT; ++mt)
              mfma_16x16x16<T>(s_acc[mt][n], k_frag, kQRegs ? q_frag[mt][kQRegs ? kk : 0] : q_smem[mt]);
          }
        }
#else
        // With Q in shared memory a full unroll lets the scheduler hoist every
        // fragment load of the loop at once and spill; two steps at a time is enough.
#pragma unroll(kQRegs ? kKSteps : 2)
        for (int kk = 0; kk < kKSteps; ++kk) {
          uint32_t a_smem[kMT][4];
          if constexpr (!kQRegs) {
#pragma unroll
            for (int mt = 0; mt < kMT; ++mt)
              ldmatrix_x4(a_smem[mt], smem_q + swz<kChunks>(a_row + mt * 16, kk * 2 + lane / 16));
          }
#pragma unroll
          for (int nn = 0; nn < kNTilesS / 2; ++nn) {
            // matrices: (keys 0-7, d 0-7), (keys 0-7, d 8-15), (keys 8-15, d 0-7), (keys 8-15, d 8-15)
            uint32_t b[4];
            const int key = nn * 16 + (lane % 8) + (lane / 16) * 8;
            ldmatrix_x4(b, k_s + swz<kChunks>(key, kk * 2 + (lane / 8) % 2));
#pragma unroll
            for (int mt = 0; mt < kMT; ++mt) {
              const uint32_t (&a_frag)[4] = kQRegs ? q_frag[mt][kQRegs ? kk : 0] : a_smem[mt];
              mma_16816<T>(s_acc[mt][2 * nn], a_frag, b[0], b[1]);
              mma_16816<T>(s_acc[mt][2 * nn + 1], a_frag, b[2], b[3]);
            }
          }
        }
#endif
      }

      // ---- masks, online softmax (base 2) ----
      const int n0 = first_tile_key + tile * BN;
      const bool needs_mask = (n0 + BN - 1 > min_pos) || (window >= 0 && n0 < max_pos - window);
      // Uniform branches around whole loops (not per element) so that the
      // common case (no cap, interior tile) runs straight-line code.
      if (cap > 0.f) {
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
          for (int n = 0; n < kNTilesS; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) s_acc[mt][n][e] = logit_cap_log2(s_acc[mt][n][e], cap_inv_scaled, cap_log2);
      }
      if (needs_mask) {
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
          for (int n = 0; n < kNTilesS; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int j = n0 + n * AccLayout::kNTile + AccLayout::col(lane, e % kCols);
              const int p = pos[mt][e / kCols];
              if (j > p || (window >= 0 && j < p - window)) s_acc[mt][n][e] = -INFINITY;
            }
      }
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        float alpha[kRows];
        online_softmax_step<AccLayout>(s_acc[mt], row_max[mt], row_sum[mt], alpha, score_mult);
#pragma unroll
        for (int n = 0; n < kNTilesO; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) o_acc[mt][n][e] *= alpha[e / kCols];
      }

#if defined(MA_HIP)
      // ---- O^T += V^T P^T: the S^T accumulators of key-step kk are, element
      // for element, the B operand P^T (AccLayoutMfma16); A is the transposed V
      // tile (lane l: head-dim column a_row(l) of the n-tile, keys a_k(l, 0..3)).
      MfmaOperand p_frag[kMT][BN / 16];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int kk = 0; kk < BN / 16; ++kk)
          p_frag[mt][kk] = MfmaOperand{{MmaType<T>::pack(s_acc[mt][kk][0], s_acc[mt][kk][1]),
                                        MmaType<T>::pack(s_acc[mt][kk][2], s_acc[mt][kk][3])}};
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk)
#pragma unroll
        for (int dn = 0; dn < kNTilesO; ++dn) {
          const MfmaOperand v_frag =
              lds_load_operand(v_s + vt_off<BN>(dn * 16 + Mfma16::a_row(lane), kk * 16 + Mfma16::a_k(lane, 0)));
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt) mfma_16x16x16<T>(o_acc[mt][dn], v_frag, p_frag[mt][kk]);
        }
#else
      // ---- O += P V (P from the S accumulators, re-packed as A fragments) ----
      // Packed to 16 bits right away: half the registers of the fp32 scores.
      uint32_t p_frag[kMT][BN / 16][4];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int kk = 0; kk < BN / 16; ++kk) {
          p_frag[mt][kk][0] = MmaType<T>::pack(s_acc[mt][2 * kk][0], s_acc[mt][2 * kk][1]);
          p_frag[mt][kk][1] = MmaType<T>::pack(s_acc[mt][2 * kk][2], s_acc[mt][2 * kk][3]);
          p_frag[mt][kk][2] = MmaType<T>::pack(s_acc[mt][2 * kk + 1][0], s_acc[mt][2 * kk + 1][1]);
          p_frag[mt][kk][3] = MmaType<T>::pack(s_acc[mt][2 * kk + 1][2], s_acc[mt][2 * kk + 1][3]);
        }
      {
#pragma unroll
        for (int kk = 0; kk < BN / 16; ++kk) {
          const int key = kk * 16 + (lane % 8) + ((lane / 8) % 2) * 8;
#pragma unroll
          for (int dn = 0; dn < kNTilesO / 2; ++dn) {
            // matrices: (keys 0-7, d 0-7), (keys 8-15, d 0-7), (keys 0-7, d 8-15), (keys 8-15, d 8-15)
            uint32_t b[4];
            ldmatrix_x4_trans(b, v_s + swz<kChunks>(key, dn * 2 + lane / 16));
#pragma unroll
            for (int mt = 0; mt < kMT; ++mt) {
              mma_16816<T>(o_acc[mt][2 * dn], p_frag[mt][kk], b[0], b[1]);
              mma_16816<T>(o_acc[mt][2 * dn + 1], p_frag[mt][kk], b[2], b[3]);
            }
          }
        }
      }
#endif  // MA_HIP
    }

    // ---- epilogue: sink, normalise, store out (and lse) ----
    const float* sinks = a.maybe_sinks;
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
      for (int i = 0; i < kRows; ++i) {
        float l = row_sum[mt][i];
#pragma unroll
        for (int step = 1; step < AccLayout::kLanesPerRow; step *= 2)
          l += MA_SHFL_XOR(l, step << AccLayout::kRowLaneShift);
        const int r = warp_row0 + mt * 16 + AccLayout::row(lane, i);
        const bool valid = r < rows_valid;
        const int h = q_head0 + (valid ? r % pack : 0);
        const RowFinish fin = finish_row(l, row_max[mt][i], sinks, h, args.out_scale);
        if (valid) {
          const int token = token0 + pass_q0 + r / pack;
          T* dst = out_ptr + int64_t(token) * a.out_stride_token + int64_t(h) * a.out_stride_head;
          // This lane's kCols consecutive columns of the row, in pairs (4-byte stores).
#pragma unroll
          for (int n = 0; n < kNTilesO; ++n)
#pragma unroll
            for (int c = 0; c < kCols; c += 2)
              MmaType<T>::store2(dst + n * AccLayout::kNTile + AccLayout::col(lane, c),
                                 o_acc[mt][n][i * kCols + c] * fin.inv_l, o_acc[mt][n][i * kCols + c + 1] * fin.inv_l);
          // One lane per row writes the LSE.
          if (a.maybe_lse != nullptr && AccLayout::col(lane, 0) == 0)
            a.maybe_lse[int64_t(token) * a.lse_stride_token + h] = fin.lse;
        }
      }
    }

    // The next pass reloads Q and the K/V slots: drain and fence first.
    cp_async_wait<0>();
    __syncthreads();
  }
#endif  // MA_EXTEND_HAS_MMA
}

// Host side: launch one instantiation. Defined here, instantiated in
// extend/instantiate_hd{64,128,256}.cu so the builds run in parallel.
template <int kHeadDim, typename T, bool kFp8>
const char* launch_extend_impl(const ExtendParams& p, gpuStream_t stream) {
  const AttentionCommon& a = p.attn;
  constexpr int BM = block_m<kHeadDim>();
  // Tile-shape variants that change the rows must change launch_policy.h too.
  static_assert(BM == extend_mma_block_rows(kHeadDim, kIsHip), "launch_policy.h must know the kernel's rows");
  if (a.plan.extend_block_rows != BM) return "extend: the plan's tiles were cut for another kernel shape";
  constexpr int kThreads = ExtendTraits<kHeadDim>::kWarps * kWarpSize;
  constexpr int kSmem = extend_smem_bytes<kHeadDim, kFp8>();
#if defined(MA_HIP)
  static_assert(kSmem <= 65536, "CDNA workgroups have 64 KB of LDS: shrink the HIP tile shape");
#endif
  const ExtendArgs args = make_extend_args(a, BM, kFp8 ? a.k_scale : 1.f, kFp8 ? a.v_scale : 1.f);
  const int64_t blocks = extend_grid_blocks(args);
  if (blocks > 0x7fffffff) return "extend: too many (tile, head group) blocks for one launch";

  auto kernel = extend_kernel<kHeadDim, T, kFp8>;
  const char* smem_err = opt_in_dynamic_smem(reinterpret_cast<const void*>(kernel), kSmem);
  if (smem_err != nullptr) return smem_err;
  // After the decode's stage 1 (plan.decode_first): its programmatic dependent (cuda/common/pdl.cuh).
  const char* err = launch_maybe_programmatic(kernel, dim3(unsigned(blocks)), dim3(kThreads), kSmem, stream,
                                              p.follows_decode != 0 && a.plan.pdl != 0, args);
  if (err != nullptr) return err;
  MA_RETURN_LAUNCH_STATUS();
}

}  // namespace mixed_attn::gpu::extend_detail
