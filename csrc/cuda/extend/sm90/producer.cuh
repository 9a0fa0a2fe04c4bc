// The producer warpgroup of the sm_90a extend kernel (warpgroup 0, 128 threads that only copy):
// per pass, the Q tile (rows past the tile's queries zero-filled), then the CTA's K/V tiles into
// the rings of K and V slots (Sm90RingShape), each slot behind a full and an empty mbarrier.
//
// Paged K/V: the page ids of a K/V tile go into a shared table of row offsets (one key per
// thread, read a tile ahead so that their latency hides behind the copies). Tiles wholly inside
// the attended range, with a page size that is a multiple of 16, are copied by TMA: one 4-D
// tensor copy per (16 keys of one page, 64 columns), into the 128-byte-swizzled layout,
// completing on the slot's mbarrier by bytes. Edge tiles (they must zero the rows outside the
// range: a stale NaN in a masked V row would survive P = 0) and other page sizes take 16-byte
// cp.async copies that signal the same mbarrier (cp.async.mbarrier.arrive.noinc).
#pragma once
#include <cstdint>

#include <type_traits>

#include "cuda/arch/sm80.cuh"
#include "cuda/common/fp8.cuh"
#include "cuda/extend/args.cuh"
#include "cuda/extend/sm90/kv_split_merge.cuh"  // kv_split_meet
#include "cuda/extend/sm90/sync.cuh"
#include "cuda/extend/sm90/tma_maps.h"
#include "cuda/extend/sm90/traits.cuh"
#include "cuda/extend/sm90/wgmma.cuh"  // MA_EXTEND_HAS_WGMMA

namespace mixed_attn::gpu::extend_detail {

#if MA_EXTEND_HAS_WGMMA
// TMA: box at coordinates (c0, c1, c2, c3) (innermost first) of `map` into shared memory;
// completes `bytes` of the barrier's transaction count when it lands.
__device__ __forceinline__ void tma_load_4d(void* dst, const TmaMap* map, int c0, int c1, int c2, int c3,
                                            uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
      "[%6];\n" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_addr(bar))
      : "memory");
}
// TMA: box at coordinates (c0, c1, c2) of `map` (q's: column, head, token) into shared memory.
__device__ __forceinline__ void tma_load_3d(void* dst, const TmaMap* map, int c0, int c1, int c2, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n" ::
          "r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(smem_addr(bar))
      : "memory");
}
// Waits until every cp.async this thread has issued has landed, in a commit group or not:
// cp.async.wait_all is commit_group + wait_group 0 (wait_group alone skips uncommitted copies,
// and this kernel commits none: its copies complete through cp.async.mbarrier.arrive.noinc).
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

// The producer's role for one item of the CTA: every pass of its tile. tid / warp / lane: the
// thread within the producer warpgroup (0..127, 0..3, lane); ring: the ring and Q-slot positions
// over the CTA's items so far. kTma: interior K/V tiles by TMA (maps), swizzled tiles; else
// cp.async only. kFp8: an fp8 e4m3 cache, each K/V tile copied as bytes into a staging tile and
// widened (exactly) to T into the ring slot. After the last item: produce_drain.
template <int kHeadDim, int kWGs, typename T, bool kTma, bool kFp8>
__device__ __forceinline__ void produce(const ExtendArgs& args, const Sm90TmaMaps& maps, const Sm90Smem<T>& sm,
                                        const Sm90Work& w, int tid, int warp, int lane, Sm90Ring& ring) {
  using Tr = Sm90Traits<kHeadDim, kWGs>;
  constexpr int D = kHeadDim;
  constexpr int BM = Tr::kBlockM;
  constexpr int BN = Tr::kBlockN;
  using Ring = Sm90RingShape<kHeadDim, kWGs, kFp8>;
  constexpr int kChunks = D / 8;          // 16-byte chunks per row
  constexpr int kQuads = kChunks / 4;     // a warp instruction writes 4 chunks of 8 rows
  constexpr bool kSwizzle = kTma || MA_SM90_SWIZZLE != 0;
  // Swizzled Q copies: a warp instruction covers kRowsPerCopy whole rows (up to 32 chunks).
  constexpr int kChunkLanes = kChunks < 32 ? kChunks : 32;
  constexpr int kRowsPerCopy = 32 / kChunkLanes;
  static_assert(kChunks <= 32, "head_dim <= 256");
  constexpr int kTileElems = BN * D;
  // fp8 byte tiles (copy_bytes, widen): thread tid takes 16-byte chunk tid % kChunks8 of rows
  // tid / kChunks8 + i * kRowStep8, i < kRows8, in batches of kBatch8 (loads first, then their
  // use). kRowStep8 is a multiple of 8, so every row a thread widens has the same swizzle.
  constexpr int kChunks8 = D / 16;
  constexpr int kRowStep8 = 128 / kChunks8;
  constexpr int kRows8 = BN / kRowStep8;
  constexpr int kBatch8 = kRows8 < 4 ? kRows8 : 4;
  static_assert(kRowStep8 % 8 == 0 && kRows8 % kBatch8 == 0, "whole batches of equally swizzled rows");

  const AttentionCommon& a = args.a;
  const PlanView& plan = a.plan;
  const int pack = w.pack, q_head0 = w.q_head0, kv_head = w.kv_head, window = w.window;
  const int kv_splits = w.kv_splits, split_rank = w.split_rank;
  using CT = std::conditional_t<kFp8, uint8_t, T>;  // the cache's element (strides count these)
  const T* q_ptr = static_cast<const T*>(a.q);
  const CT* k_cache = static_cast<const CT*>(a.k_cache) + int64_t(kv_head) * a.k_stride_head;
  const CT* v_cache = static_cast<const CT*>(a.v_cache) + int64_t(kv_head) * a.v_stride_head;
  const int page_size = a.page_size;
  const int page_base = plan.kv_indptr[w.row];
  const int row_in_group = lane % 8;  // this lane's row within an 8-row group
  constexpr int box_keys = kTmaBoxKeys;
  const int chunk_in_quad = lane / 8;
  int& it = ring.kv;  // K/V tiles issued so far (over all passes and items): ring position
  for (int pass_q0 = w.tile_q0; pass_q0 < w.tile_end; pass_q0 += args.tile_capacity) {
    const int nq = min(args.tile_capacity, w.tile_end - pass_q0);
    const int rows_valid = nq * pack;
    const int min_pos = w.prefix + pass_q0;
    const int kv_hi = w.prefix + pass_q0 + nq;
    const int kv_lo = window >= 0 ? max(0, min_pos - window) : 0;
    const int first_tile_key = kv_lo / BN * BN;
    const int num_kv_tiles = (kv_hi - first_tile_key + BN - 1) / BN;
    const int split_tiles = (num_kv_tiles + kv_splits - 1) / kv_splits;
    const int tile_begin = min(num_kv_tiles, split_rank * split_tiles);
    const int tile_end_ = min(num_kv_tiles, tile_begin + split_tiles);

    // Q: rows past the tile's queries are zero. The consumers free the Q slot after the previous
    // pass's last S GEMM, so this copy lands while they finish that pass (its last P V, the
    // epilogue).
    const int q_round = ring.q++;
    if (q_round > 0) mbar_wait(sm.q_empty, (q_round - 1) & 1);
    if (kSwizzle && plan.extend_q_tma != 0 && rows_valid == BM) {
      // Every row a query: by TMA (maps.q, boxes of pack heads x tile_capacity tokens, launch.cuh),
      // one thread issuing D / 64 tensor copies where the 16-byte copies below take about 0.2 us
      // a warp instruction to issue (benchmarks/RESULTS.md, session 22). Thread 0 sets the bytes
      // before its copies, so the other 127 arrivals cannot complete the phase early.
      if (tid == 0) {
        mbar_arrive_expect_tx(sm.q_full, uint32_t(BM * D * sizeof(T)));
#pragma unroll
        for (int piece = 0; piece < D / 64; ++piece)
          tma_load_3d(reinterpret_cast<unsigned char*>(sm.q) + piece * (BM * 128), &maps.q, piece * 64, q_head0,
                      w.token0 + pass_q0, sm.q_full);
      } else {
        mbar_arrive(sm.q_full);
      }
    } else {
      for (int u = warp; u < BM * kChunks / 32; u += 4) {
        int r, c;
        if constexpr (kSwizzle) {
          r = u / (kChunks / kChunkLanes) * kRowsPerCopy + lane / kChunkLanes;
          c = u % (kChunks / kChunkLanes) * kChunkLanes + lane % kChunkLanes;
        } else {
          r = (u / kQuads) * 8 + row_in_group;
          c = (u % kQuads) * 4 + chunk_in_quad;
        }
        const bool valid = r < rows_valid;
        const int qi = valid ? r / pack : 0;
        const int h = q_head0 + (valid ? r % pack : 0);
        const T* src =
            q_ptr + int64_t(w.token0 + pass_q0 + qi) * a.q_stride_token + int64_t(h) * a.q_stride_head + c * 8;
        cp_async_16(reinterpret_cast<unsigned char*>(sm.q) + tile_byte_off<kChunks, BM, kSwizzle>(r, c), src, valid);
      }
      mbar_arrive_on_cp_async(sm.q_full);
    }
    MA_TL_STAMP(ring, kTlProducerQ, pass_q0 == w.tile_q0);

    // Page id of key (first_tile_key + tile * BN + tid), or -1 outside [kv_lo, kv_hi).
    auto read_page = [&](int tile) {
      const int j = first_tile_key + tile * BN + tid;
      if (tid >= BN || tile >= tile_end_ || j < kv_lo || j >= kv_hi) return -1;
      return a.kv_indices[page_base + j / page_size];
    };
    // Alternate by ring position, not by tile: a new pass must not reuse the last one's table.
    auto table_at = [&](int ring_pos) { return sm.row_table + (ring_pos & 1) * BN; };
    // The row offsets (and TMA box pages) of `tile`, at ring position ring_pos, from its page ids.
    auto fill_table = [&](int tile, int ring_pos, int page) {
      if (tid < BN) {
        const int j = first_tile_key + tile * BN + tid;
        const int slot_in_page = j % page_size;
        longlong2 offs = make_longlong2(-1, -1);
        if (page >= 0) {
          offs.x = int64_t(page) * a.k_stride_page + int64_t(slot_in_page) * a.k_stride_slot;
          offs.y = int64_t(page) * a.v_stride_page + int64_t(slot_in_page) * a.v_stride_slot;
        }
        table_at(ring_pos)[tid] = offs;
        if (kTma && tid % box_keys == 0) sm.box_pages[(ring_pos & 1) * BN + tid / box_keys] = page;
      }
    };
    // fp8: copy_bytes(K or V) copies a tile's rows as bytes into staging tile sb (row r at r * D
    // bytes; keys outside the range zero-filled), one commit group per call.
    auto copy_bytes = [&](const CT* cache, const longlong2* table, int sb, bool is_v) {
      // A batch's row offsets are read before its copies are issued, so the table's shared-memory
      // latency is paid once a batch, not once a copy.
      const int c = tid % kChunks8, r0 = tid / kChunks8;
      const int64_t* offsets = reinterpret_cast<const int64_t*>(table + r0) + (is_v ? 1 : 0);
      unsigned char* stage = sm.stage8 + sb * kTileElems + r0 * D + c * 16;
#pragma unroll
      for (int i0 = 0; i0 < kRows8; i0 += kBatch8) {
        int64_t off[kBatch8];
#pragma unroll
        for (int b = 0; b < kBatch8; ++b) off[b] = offsets[2 * (i0 + b) * kRowStep8];
#pragma unroll
        for (int b = 0; b < kBatch8; ++b)
          cp_async_16(stage + (i0 + b) * kRowStep8 * D, cache + max(off[b], int64_t(0)) + c * 16, off[b] >= 0);
      }
      cp_async_commit();
    };
    // fp8: widen(sb, slot tile) converts staging tile sb to T (exactly) into the swizzled layout
    // the consumers read; a thread's addresses differ by immediates (one swizzle for all its rows).
    // The loads of a batch are issued before any of its stores: the compiler cannot
    // move a staging load above a ring store (it cannot tell the two apart), so one load at a time
    // would expose a shared-memory latency per chunk, which the consumers' wgmma traffic makes long.
    auto widen = [&](int sb, T* dst_tile) {
      const int c = tid % kChunks8, r0 = tid / kChunks8;
      const unsigned char* src = sm.stage8 + sb * kTileElems + r0 * D + c * 16;
      // Bytes 0..7 of a chunk become b16 chunk 2c of the row, bytes 8..15 chunk 2c + 1 (low byte first).
      unsigned char* dst_lo = reinterpret_cast<unsigned char*>(dst_tile) + tile_byte_off<kChunks, BN, true>(r0, 2 * c);
      unsigned char* dst_hi =
          reinterpret_cast<unsigned char*>(dst_tile) + tile_byte_off<kChunks, BN, true>(r0, 2 * c + 1);
#pragma unroll
      for (int i0 = 0; i0 < kRows8; i0 += kBatch8) {
        uint4 in[kBatch8];
#pragma unroll
        for (int b = 0; b < kBatch8; ++b) in[b] = *reinterpret_cast<const uint4*>(src + (i0 + b) * kRowStep8 * D);
#pragma unroll
        for (int b = 0; b < kBatch8; ++b) {
          const int row_off = (i0 + b) * kRowStep8 * 128;  // tile_byte_off's row term
          const uint4 x = in[b];
          *reinterpret_cast<uint4*>(dst_lo + row_off) =
              make_uint4(e4m3x2_to_b16<T>(x.x & 0xffffu), e4m3x2_to_b16<T>(x.x >> 16), e4m3x2_to_b16<T>(x.y & 0xffffu),
                         e4m3x2_to_b16<T>(x.y >> 16));
          *reinterpret_cast<uint4*>(dst_hi + row_off) =
              make_uint4(e4m3x2_to_b16<T>(x.z & 0xffffu), e4m3x2_to_b16<T>(x.z >> 16), e4m3x2_to_b16<T>(x.w & 0xffffu),
                         e4m3x2_to_b16<T>(x.w >> 16));
        }
      }
    };

    int next_page = read_page(tile_begin);
    if constexpr (kFp8) {
      // fp8: the bytes of tile t + 1 are issued as soon as a staging tile is free (K(t + 1) once
      // K(t) is widened, V(t + 1) once V(t) is), so a tile's copy runs while the one before it is
      // widened. Commit groups in flight at the top of each tile: K(t), V(t) (every step commits
      // one group, empty past the pass's last tile, so the count stays the same).
      if (tile_begin < tile_end_) {
        fill_table(tile_begin, it, next_page);
        next_page = read_page(tile_begin + 1);
        producer_sync();
        copy_bytes(k_cache, table_at(it), 0, false);
        copy_bytes(v_cache, table_at(it), 1, true);
      }
      for (int tile = tile_begin; tile < tile_end_; ++tile, ++it) {
        const bool has_next = tile + 1 < tile_end_;
        static_assert(Ring::kKSlots == Ring::kVSlots, "fp8: one slot index for K and V");
        const int slot = Ring::k_slot(it);
        const int parity = Ring::k_phase(it) ^ 1;
        for (int half = 0; half < 2; ++half) {
          const bool is_v = half == 1;
          cp_async_wait<1>();  // this tensor's bytes (and, on the first tile, the Q copies before them)
          producer_sync();     // every thread's bytes have landed; every thread is past its last copy issue
          // The next tile's table goes to the ring position tile t - 1 used, whose copies every
          // thread has issued (the barrier above); the barrier after the widening publishes it.
          if (!is_v && has_next) {
            fill_table(tile + 1, it + 1, next_page);
            next_page = read_page(tile + 2);  // lands while this tile is widened
          }
          mbar_wait(is_v ? &sm.v_empty[slot] : &sm.k_empty[slot], parity);
          widen(half, (is_v ? sm.v : sm.k) + slot * kTileElems);
          fence_proxy_async();  // these generic-proxy stores are read by the consumers' wgmma
          producer_sync();      // every thread done with the staging tile and its stores
          mbar_arrive(is_v ? &sm.v_full[slot] : &sm.k_full[slot]);
          if (!is_v) MA_TL_STAMP(ring, kTlProducerFirstKv, pass_q0 == w.tile_q0 && tile == tile_begin);
          if (has_next) copy_bytes(is_v ? v_cache : k_cache, table_at(it + 1), half, is_v);
          else cp_async_commit();
        }
      }
    } else {
      for (int tile = tile_begin; tile < tile_end_; ++tile, ++it) {
        const longlong2* table = table_at(it);
        fill_table(tile, it, next_page);
        next_page = read_page(tile + 1);  // lands while this tile's copies are issued
        producer_sync();
        // Slot and the parity of its empty phase to wait for, in the K and in the V ring.
        const int k_slot = Ring::k_slot(it), k_parity = Ring::k_phase(it) ^ 1;
        const int v_slot = Ring::v_slot(it), v_parity = Ring::v_phase(it) ^ 1;
        // TMA only for tiles whose every key is attended: the cp.async path zero-fills the others
        // (a stale NaN in a masked V row would survive P = 0 as 0 * NaN).
        const int tile_key0 = first_tile_key + tile * BN;
        const bool tma_tile = kTma && tile_key0 >= kv_lo && tile_key0 + BN <= kv_hi;
        // Every producer thread arrives once per slot and phase (count 128) on either path.
        auto copy_tma = [&](const TmaMap* map, T* dst_tile, uint64_t* full) {
          if (tid == 0) mbar_arrive_expect_tx(full, uint32_t(kTileElems * sizeof(T)));
          producer_sync();  // the expected bytes are set before any copy can land
        // Box b: keys [b * box_keys, (b + 1) * box_keys) of the tile, one page.
          if (tid < BN / box_keys) {
            const int page = sm.box_pages[(it & 1) * BN + tid];
            const int slot0 = (tile_key0 + box_keys * tid) % page_size;
            unsigned char* dst = reinterpret_cast<unsigned char*>(dst_tile) + tid * box_keys * 128;
#pragma unroll
            for (int piece = 0; piece < D / 64; ++piece)
              tma_load_4d(dst + piece * (BN * 128), map, piece * 64, kv_head, slot0, page, full);
          }
          if (tid != 0) mbar_arrive(full);
        };
        // copy_rows(K or V): the tile's rows from the cache into a ring slot.
        auto copy_rows = [&](const CT* cache, T* dst_tile, bool is_v) {
          unsigned char* dst = reinterpret_cast<unsigned char*>(dst_tile);
          if constexpr (kSwizzle) {
            // Lane = (row rr of an 8-row group, chunk quad cq): the thread copies chunks cq, cq + 4,
            // ... of its row, reading the row's offset once. Chunk c = cq + 4j of row r lands in
            // 128-byte piece j / 2, slot (c % 8) ^ (r % 8) = (cq ^ rr) ^ 4 (j & 1): two base
            // addresses, the rest immediates. Each warp instruction writes 8 rows x 4 slots, every
            // 16-byte slot position four times: 4 wavefronts, the minimum for 512 bytes.
            static_assert(kChunks % 4 == 0, "whole chunk quads per row");
            const int rr = lane % 8, cq = lane / 8;
            const int slot_even = (cq ^ rr) << 4, slot_odd = slot_even ^ 64;
#pragma unroll
            for (int rg = warp; rg < BN / 8; rg += 4) {
              const int r = rg * 8 + rr;
              const longlong2 offs = table[r];
              const int64_t off = is_v ? offs.y : offs.x;
              const CT* src = cache + max(off, int64_t(0)) + cq * 8;
              unsigned char* d_even = dst + r * 128 + slot_even;
              unsigned char* d_odd = dst + r * 128 + slot_odd;
#pragma unroll
              for (int j = 0; j < kChunks / 4; ++j)
                cp_async_16((j & 1 ? d_odd : d_even) + (j / 2) * (BN * 128), src + j * 32, off >= 0);
            }
          } else {
            // Each thread copies whole rows (all chunk quads of row r, the same lane chunk in each),
            // so the row's offset is read once and the copies differ by immediates; each warp
            // instruction covers 8 rows x 4 chunks = 512 contiguous bytes of shared memory.
#pragma unroll
            for (int rg = warp; rg < BN / 8; rg += 4) {
              const int r = rg * 8 + row_in_group;
              const longlong2 offs = table[r];
              const int64_t off = is_v ? offs.y : offs.x;
              const CT* src = cache + max(off, int64_t(0)) + chunk_in_quad * 8;
              unsigned char* d = dst + tile_byte_off<kChunks, BN, false>(r, chunk_in_quad);
#pragma unroll
              for (int quad = 0; quad < kQuads; ++quad) cp_async_16(d + quad * 4 * 128, src + quad * 32, off >= 0);
            }
          }
        };
        // One K or V tile into its slot once the consumers have released it.
        auto copy_tile = [&](bool is_v) {
          const int slot = is_v ? v_slot : k_slot;
          mbar_wait(is_v ? &sm.v_empty[slot] : &sm.k_empty[slot], is_v ? v_parity : k_parity);
          uint64_t* full = is_v ? &sm.v_full[slot] : &sm.k_full[slot];
          T* dst = (is_v ? sm.v : sm.k) + slot * kTileElems;
          if (tma_tile) {
            copy_tma(is_v ? &maps.v : &maps.k, dst, full);
          } else {
            copy_rows(is_v ? v_cache : k_cache, dst, is_v);
            mbar_arrive_on_cp_async(full);
          }
        };
        copy_tile(false);
        MA_TL_STAMP(ring, kTlProducerFirstKv, pass_q0 == w.tile_q0 && tile == tile_begin);
        copy_tile(true);
#if MA_SM90_LAB_STREAM
        if constexpr (lab_stream_on<kHeadDim, kFp8>())
          if (tid == 0)
            for (int c = 0; c < args.lab_stream_copies; ++c) {
              if (!lab_stream_copy(a.k_cache, args.lab_stream_chunk_mask, sm.lab_stream, sm.lab_stream_full,
                                   ring.lab_stream, args.lab_stream_nonblocking != 0))
                break;  // its slot is busy: the tile's remaining copies are dropped
              ++ring.lab_stream;
            }
#endif
      }
    }
  }
}

// The producer's end, after its last item: this thread's copies drained (they complete through
// the full barriers; nothing is committed, so cp.async.wait_group 0 would wait for none of them).
// KV split: rank 1 writes its partial over rank 0's Q + ring, the region these copies targeted,
// after the cluster barrier that every thread of both CTAs reaches (kv_split_merge.cuh), so every
// copy there has completed by the issuing thread's own wait before rank 1 may write
// (docs/racecheck_sm90_kv_split.md).
__device__ __forceinline__ void produce_drain(int kv_splits) {
  cp_async_wait_all();
  if (kv_splits > 1) kv_split_meet();
}
#endif  // MA_EXTEND_HAS_WGMMA

}  // namespace mixed_attn::gpu::extend_detail
