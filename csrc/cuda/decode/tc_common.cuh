// Pieces of the two tensor-core stage-1 kernels (stage1_tensor_core.cuh: queries on the MMA's
// M side; stage1_narrow.cuh: keys there): the query words in the K reads' d order, and the
// K/V tile ring. Tiles of kTileKeys keys of one kv head stream through a kStages-deep
// cp.async ring in shared memory, K rows then V rows in each stage, 16-byte copies, rows
// XOR-swizzled in 16-byte units (swizzle()). Page ids are fetched one tile ahead, so page
// size 1 costs no extra round trip. Keys outside the split's visible range are zero-filled
// without a global read (a masked value can then never inject NaN into P.V).
#pragma once
#include "cuda/decode/common.cuh"

#if defined(MA_CUDA)
#include "cuda/arch/sm80.cuh"

namespace mixed_attn::gpu::decode {

// 16-byte-unit XOR swizzle of row r. Conditions (tools/decode_swizzle_check.py reads these
// expressions and enumerates every 8-lane phase; tests/test_decode_swizzle.py runs it): the QK reads (rows 2p, 2p+1, or rows g and g + 8; chunks 4c + 0..3 per
// phase), the narrow kernel's and fp8's PV reads (VRows: rows 2t + e, t = 0..3; the chunks of
// two adjacent output slots) and the 16-bit PV reads by ldmatrix.trans (rows 0..7 of a 16-key
// group at one chunk) all touch 8 distinct bank groups per phase.
template <int kChunks>
__device__ __forceinline__ int swizzle(int r) {
  if constexpr (kChunks == 8) return ((r >> 2) & 1) | (((r >> 1) & 1) << 1) | ((((r >> 2) ^ r) & 1) << 2);
  else if constexpr (kChunks == 16) return ((r >> 1) & 1) | (((r >> 2) & 1) << 1) | ((((r >> 2) ^ r) & 1) << 2);
  else if constexpr (kChunks == 32) return ((r >> 1) & 3) | ((r & 1) << 2);
  else return 0;  // 64-byte rows (D=64 fp8): two rows share a bank line, no swizzle
}

// The b16 words of one (query, head) row's query for the chunk group read from chunk d0 / 8
// on (its kElemsPerChunk elements, in the order the K reads pair them: Q.K sums over d, so d
// may be permuted as long as Q and K agree): words[s][0] = elements 4s, 4s + 1, words[s][1] =
// elements 4s + 2, 4s + 3. Zeros for a padding row. fp8 caches multiply in fp16: the query is
// clamped to fp16's range.
template <typename QT, typename MT, bool kFp8, int kElemsPerChunk>
__device__ __forceinline__ void q_chunk_words(const QT* qrow, bool valid, int d0,
                                              uint32_t (&words)[kElemsPerChunk / 4][2]) {
  float x[kElemsPerChunk];
#pragma unroll
  for (int v8 = 0; v8 < kElemsPerChunk / 8; ++v8) {
    union {
      uint4 u;
      QT h[8];
    } ld;
    ld.u = valid ? *reinterpret_cast<const uint4*>(qrow + d0 + 8 * v8) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      float f = to_float<QT>(ld.h[e]);
      if constexpr (kFp8) f = fminf(fmaxf(f, -65504.0f), 65504.0f);  // fp16 MMA operand
      x[8 * v8 + e] = f;
    }
  }
#pragma unroll
  for (int s = 0; s < kElemsPerChunk / 4; ++s) {
    words[s][0] = MmaType<MT>::pack(x[4 * s + 0], x[4 * s + 1]);
    words[s][1] = MmaType<MT>::pack(x[4 * s + 2], x[4 * s + 3]);
  }
}

// A 16-byte and an 8-byte run of cache bytes as 32-bit words.
union Words16 {
  uint4 v;
  uint32_t w[4];
};
union Words8 {
  uint2 v;
  uint32_t w[2];
};

// The V rows a lane reads for P.V in both kernels: keys 2 t4, 2 t4 + 1, 2 t4 + 8 and 2 t4 + 9 of
// the warp's 16 (the MMA's k, as P's fragment holds them), each at its row's swizzle.
template <int kRowBytes>
struct VRows {
  static constexpr int kChunks = kRowBytes / 16;
  const unsigned char* row[4];
  int sw[4];
  __device__ __forceinline__ VRows(const unsigned char* vbuf, int warp_row0, int t4) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = warp_row0 + 2 * t4 + (i & 1) + 8 * (i >> 1);
      row[i] = vbuf + r * kRowBytes;
      sw[i] = swizzle<kChunks>(r);
    }
  }
  // 16-byte chunk c of each of the four rows.
  __device__ __forceinline__ void load(int c, Words16 (&x)[4]) const {
#pragma unroll
    for (int i = 0; i < 4; ++i) x[i].v = *reinterpret_cast<const uint4*>(row[i] + ((c ^ sw[i]) << 4));
  }
  // The 8 bytes of output slot g of each row (64-byte rows: D=64 fp8).
  __device__ __forceinline__ void load_half(int g, Words8 (&x)[4]) const {
#pragma unroll
    for (int i = 0; i < 4; ++i)
      x[i].v = *reinterpret_cast<const uint2*>(row[i] + (((g >> 1) ^ sw[i]) << 4) + (g & 1) * 8);
  }
};

// fp8 V: word w of the four rows with the keys interleaved byte by byte, so that each 16-bit
// half is one element of a key pair: lo01 = elements 0, 1 of rows 0 and 1 as (r0.e0, r1.e0,
// r0.e1, r1.e1), hi01 = elements 2, 3; lo23 and hi23 the same for rows 2 and 3.
struct Fp8KeyPairs { uint32_t lo01, lo23, hi01, hi23; };
template <class Words>
__device__ __forceinline__ Fp8KeyPairs fp8_key_pairs(const Words (&x)[4], int w) {
  return Fp8KeyPairs{__byte_perm(x[0].w[w], x[1].w[w], 0x5140), __byte_perm(x[2].w[w], x[3].w[w], 0x5140),
                     __byte_perm(x[0].w[w], x[1].w[w], 0x7362), __byte_perm(x[2].w[w], x[3].w[w], 0x7362)};
}

// kKvPack kv heads per row: a row is the keys' rows of kv heads kv_slot * kKvPack + 0.. side by
// side (kRowBytes / kKvPack bytes each), so a thread's chunk belongs to one of them.
// kWarpLocal: warp w copies the 16 keys it reads itself (rows 16 w .. 16 w + 15 of each tile;
// for a body where every warp reads only its own 16 keys of a tile), so a tile is handed over
// by cp.async.wait_group and __syncwarp, with no block barrier in the loop: the warps of a CTA
// run apart and wait for their own copies only (a tile's __syncthreads held 20% of the stall
// samples, benchmarks/RESULTS.md session 29). Otherwise the CTA's threads copy the tile
// together and a __syncthreads hands it over.
template <int kRowBytes_, int kThreads, int kTileKeys, int kStages, int kKvPack = 1, bool kWarpLocal = false>
struct KvRing {
  static constexpr int kRowBytes = kRowBytes_;
  static constexpr int kChunks = kRowBytes / 16;              // 16-byte chunks per row
  static constexpr int kHeadChunks = kChunks / kKvPack;       // of one kv head
  static constexpr int kStageBytes = 2 * kTileKeys * kRowBytes;  // K rows then V rows
  static constexpr int kCopyThreads = kWarpLocal ? 32 : kThreads;  // threads sharing a set of rows
  static constexpr int kCopyRows = kWarpLocal ? 16 : kTileKeys;    // the rows they copy
  static constexpr int kRowStep = kCopyThreads / kChunks;          // rows between a thread's copies
  static constexpr int kRowsPerThread = kCopyRows / kRowStep;      // copies per thread per tensor
  static_assert(kChunks >= 4 && kCopyThreads % kChunks == 0, "unsupported head_dim / dtype");
  static_assert(kCopyRows % kRowStep == 0, "tile rows must split evenly across threads");
  static_assert(!kWarpLocal || kTileKeys == 16 * (kThreads / 32), "warp-local rings: 16 keys a warp");

  const char* k_base;
  const char* v_base;
  uint32_t smem_base;
  int copy_chunk, copy_row0;
  uint32_t page_ids[kRowsPerThread];

  __device__ __forceinline__ KvRing(const AttentionCommon& a, int kv_slot, int elem_bytes, unsigned char* smem) {
    const int tid = threadIdx.x, t = kWarpLocal ? tid % 32 : tid;
    copy_chunk = t % kChunks;
    copy_row0 = (kWarpLocal ? 16 * (tid / 32) : 0) + t / kChunks;
    const int64_t kv_head = int64_t(kv_slot) * kKvPack + copy_chunk / kHeadChunks;
    const int col = (copy_chunk % kHeadChunks) * 16;
    k_base = static_cast<const char*>(a.k_cache) + kv_head * a.k_stride_head * elem_bytes + col;
    v_base = static_cast<const char*>(a.v_cache) + kv_head * a.v_stride_head * elem_bytes + col;
    smem_base = smem_addr(smem);
  }

  // A thread's rows are copy_row0 + i * kRowStep of every tile. Its copies are most of the
  // kernel's instructions (benchmarks/RESULTS.md, session 29: with 2 warps a scheduler the
  // instructions a byte cap the rate an SM streams, which is what the decode beside an extend
  // has), so the address math is kept to unsigned 32 x 64-bit multiply-adds by the byte strides
  // (DecodeConsts, uniform registers), the page size's power-of-two case has its own loop, and a
  // key outside the split keeps page 0: its address stays inside the cache, so the zero-filling
  // copy needs no second pointer.
  // kWhole: every key of the tile inside the split's visible range [visible_begin, key_end) (all
  // but a split's first and last tiles, usually): no per-row range test and no zero-filling copy.
  __device__ __forceinline__ bool whole_tile(const SplitView& sv, int tile) const {
    const int first = sv.key_begin + tile * kTileKeys;
    return first >= sv.visible_begin && first + kTileKeys <= sv.key_end;
  }
  template <bool kPow2, bool kWhole>
  __device__ __forceinline__ void fetch_rows(const SplitView& sv, const DecodeConsts& c, int page_size, int key0) {
#pragma unroll
    for (int i = 0; i < kRowsPerThread; ++i) {
      const int key = key0 + i * kRowStep;
      const uint32_t index = kPow2 ? uint32_t(key) >> c.page_shift : uint32_t(key) / uint32_t(page_size);
      const bool valid = kWhole || (key < sv.key_end && key >= sv.visible_begin);
      page_ids[i] = valid ? uint32_t(sv.pages[index]) : 0u;
    }
  }
  __device__ __forceinline__ void fetch_pages(const SplitView& sv, const DecodeConsts& c, int page_size, int tile) {
    const int key0 = sv.key_begin + tile * kTileKeys + copy_row0;
    if (c.page_shift >= 0 && whole_tile(sv, tile)) fetch_rows<true, true>(sv, c, page_size, key0);
    else if (c.page_shift >= 0) fetch_rows<true, false>(sv, c, page_size, key0);
    else fetch_rows<false, false>(sv, c, page_size, key0);
  }

  template <bool kPow2, bool kWhole>
  __device__ __forceinline__ void issue_rows(const SplitView& sv, const DecodeConsts& c, int page_size, uint32_t stage,
                                             int tile) {
    const int key0 = sv.key_begin + tile * kTileKeys + copy_row0;
#pragma unroll
    for (int i = 0; i < kRowsPerThread; ++i) {
      const int r = copy_row0 + i * kRowStep;
      const int key = key0 + i * kRowStep;
      const bool valid = kWhole || (key < sv.key_end && key >= sv.visible_begin);
      const uint32_t slot = kPow2 ? uint32_t(key) & uint32_t(c.page_mask) : uint32_t(key) % uint32_t(page_size);
      const uint64_t page = page_ids[i];
      const uint32_t dst = stage + r * kRowBytes + ((copy_chunk ^ swizzle<kChunks>(r)) << 4);
      const char* ks = k_base + (page * c.k_page_bytes + uint64_t(slot) * c.k_slot_bytes);
      const char* vs = v_base + (page * c.v_page_bytes + uint64_t(slot) * c.v_slot_bytes);
      cp_async_16(dst, ks, valid);
      cp_async_16(dst + kTileKeys * kRowBytes, vs, valid);
    }
  }
  // Issues the copies of `tile` (its page ids fetched by fetch_pages) into its stage.
  __device__ __forceinline__ void issue(const SplitView& sv, const DecodeConsts& c, const AttentionCommon& a,
                                        int tile) {
    const uint32_t stage = smem_base + (tile % kStages) * kStageBytes;
    if (c.page_shift >= 0 && whole_tile(sv, tile)) issue_rows<true, true>(sv, c, a.page_size, stage, tile);
    else if (c.page_shift >= 0) issue_rows<true, false>(sv, c, a.page_size, stage, tile);
    else issue_rows<false, false>(sv, c, a.page_size, stage, tile);
  }

  // The stream of a split, in two calls so that the caller can load its queries while the
  // first copies fly. start: kStages - 1 tiles in flight, the next one's page ids fetched;
  // returns the split's tile count.
  __device__ __forceinline__ int start(const SplitView& sv, const DecodeConsts& c, const AttentionCommon& a) {
    const int num_tiles = (sv.key_end - sv.key_begin + kTileKeys - 1) / kTileKeys;
#pragma unroll
    for (int t = 0; t < kStages - 1; ++t) {
      if (t < num_tiles) {
        fetch_pages(sv, c, a.page_size, t);
        issue(sv, c, a, t);
      }
      cp_async_commit();
    }
    if (kStages - 1 < num_tiles) fetch_pages(sv, c, a.page_size, kStages - 1);
    return num_tiles;
  }
  // run: body(tile, k_rows, v_rows) once per tile, with the tile's stage visible to every
  // thread (kWarpLocal: the warp's own rows of it to the warp), while kStages - 1 tiles are in
  // flight ahead of it. Returns with every copy landed and every thread past the last tile (the
  // ring's memory is free for other uses).
  template <class Body>
  __device__ __forceinline__ void run(const SplitView& sv, const DecodeConsts& c, const AttentionCommon& a,
                                      int num_tiles, const unsigned char* smem, Body&& body) {
    for (int tile = 0; tile < num_tiles; ++tile) {
      cp_async_wait<kStages - 2>();
      // The tile is visible to its readers; the buffer of tile - 1 is free (its readers are
      // past it: the whole CTA, or with kWarpLocal the warp, which alone reads its rows).
      if constexpr (kWarpLocal) __syncwarp();
      else __syncthreads();
      if (tile + kStages - 1 < num_tiles) {
        issue(sv, c, a, tile + kStages - 1);
        if (tile + kStages < num_tiles) fetch_pages(sv, c, a.page_size, tile + kStages);
      }
      cp_async_commit();
      const unsigned char* kbuf = smem + (tile % kStages) * kStageBytes;
      body(tile, kbuf, kbuf + kTileKeys * kRowBytes);
    }
    cp_async_wait<0>();
    __syncthreads();
  }
};

}  // namespace mixed_attn::gpu::decode
#endif  // MA_CUDA
