// The consumer warpgroups' main loop of the sm_90a extend kernel (warpgroups 1.., 64 query
// rows each): per pass, S = Q K^T as wgmma with Q and K in shared memory; logit cap, causal /
// window masks (only on diagonal and window-edge tiles) and the online softmax in registers, in
// base 2; O += P V as wgmma with P from registers. With two consumer warpgroups the S GEMM of
// tile t is issued together with the P V GEMM of tile t-1, and the exponentials of tile t run
// while that P V is still on the tensor cores (intra-warpgroup overlap); three have no registers
// for that (160 each) but share every K/V tile among 192 rows; the consumer warpgroups
// interleave on their own. Slots are taken and handed back through the ring's mbarriers
// (sync.cuh). consume() is the consumers' role for one item of the CTA (kernel.cuh runs it for
// each, in the schedule's order): per pass this main loop, leaving the
// thread's unnormalised O, row max and row sum in registers, then under a KV split the hand-over
// / merge of the cluster's partials (kv_split_merge.cuh), then the epilogue (epilogue.cuh).
#pragma once
#include <cstdint>

#include "cuda/arch/sm80.cuh"
#include "cuda/common/math.cuh"
#include "cuda/common/softmax.cuh"
#include "cuda/extend/args.cuh"
#include "cuda/extend/portable/frag_layout.h"  // AccLayoutMma16816: the wgmma accumulators per warp
#include "cuda/extend/sm90/cut_merge.cuh"
#include "cuda/extend/sm90/epilogue.cuh"
#include "cuda/extend/sm90/kv_split_merge.cuh"
#include "cuda/extend/sm90/sync.cuh"
#include "cuda/extend/sm90/traits.cuh"
#include "cuda/extend/sm90/wgmma.cuh"

namespace mixed_attn::gpu::extend_detail {

#if MA_EXTEND_HAS_WGMMA
// Descriptor of a 128-byte-swizzled operand (layout type 1 in bits 62-63).
__device__ __forceinline__ uint64_t wgmma_desc_sw128(const void* smem, uint32_t lbo, uint32_t sbo) {
  return wgmma_desc(smem, lbo, sbo) | (uint64_t(1) << 62);
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// The consumers' role for one item of the CTA: every pass of its tile. tid / warp / lane: the
// CTA's thread, warp (4..) and lane; ring: the ring and Q-slot positions over the CTA's items so
// far; Ring: the instantiation's K and V slot counts (Sm90RingShape).
template <int kHeadDim, int kWGs, typename T, bool kSwizzle, typename Ring>
__device__ __forceinline__ void consume(const ExtendArgs& args, const Sm90Smem<T>& sm, const Sm90Work& w, int tid,
                                        int warp, int lane, Sm90Ring& ring) {
  using Tr = Sm90Traits<kHeadDim, kWGs>;
  constexpr int D = kHeadDim;
  constexpr int BM = Tr::kBlockM;
  constexpr int BN = Tr::kBlockN;
  constexpr int kNTilesS = BN / 8;
  constexpr int kNTilesO = D / 8;
  constexpr int kTileElems = BN * D;
  constexpr int kConsumerThreads = 128 * Tr::kConsumerWGs;
  const AttentionCommon& a = args.a;
  const int pack = w.pack, prefix = w.prefix, window = w.window;
  const int kv_splits = w.kv_splits, split_rank = w.split_rank;
  const int cwarp = warp - 4;        // 0 .. kConsumerWarps - 1
  const int wg = cwarp / 4;          // which 64 rows
  const int g = lane / 4, t4 = lane % 4;
  const int warp_row0 = cwarp * 16;  // = wg * 64 + (cwarp % 4) * 16
  T* out_ptr = static_cast<T*>(a.out);
  const float scale_log2 = args.score_scale * kLog2e;
  const float cap = a.logit_cap;
  const float cap_inv_scaled = cap > 0.f ? args.score_scale / cap : 0.f;
  const float cap_log2 = cap * kLog2e;
  // Scores enter the softmax as x * score_mult in base-2 units.
  const float score_mult = cap > 0.f ? 1.f : scale_log2;
  const unsigned char* q_tile = reinterpret_cast<const unsigned char*>(sm.q);

  int& it = ring.kv;
  for (int pass_q0 = w.tile_q0; pass_q0 < w.tile_end; pass_q0 += args.tile_capacity) {
    const int nq = min(args.tile_capacity, w.tile_end - pass_q0);
    const int rows_valid = nq * pack;
    const int min_pos = prefix + pass_q0;
    const int max_pos = prefix + pass_q0 + nq - 1;
    const int kv_lo = window >= 0 ? max(0, min_pos - window) : 0;
    const int first_tile_key = kv_lo / BN * BN;
    const int num_kv_tiles = (max_pos + 1 - first_tile_key + BN - 1) / BN;
    const int split_tiles = (num_kv_tiles + kv_splits - 1) / kv_splits;
    const int tile_begin = min(num_kv_tiles, split_rank * split_tiles);
    const int my_tiles = min(num_kv_tiles, tile_begin + split_tiles) - tile_begin;  // may be 0 (rank > 0)

    int pos[2];  // absolute positions of this thread's rows g and g + 8
#pragma unroll
    for (int i = 0; i < 2; ++i) pos[i] = prefix + pass_q0 + min((warp_row0 + g + 8 * i) / pack, nq - 1);

    float o_acc[kNTilesO][4];
#pragma unroll
    for (int n = 0; n < kNTilesO; ++n) o_acc[n][0] = o_acc[n][1] = o_acc[n][2] = o_acc[n][3] = 0.f;
    float row_max[2] = {-INFINITY, -INFINITY};  // base-2 scaled units
    float row_sum[2] = {0.f, 0.f};              // this thread's partial sums
    float s_acc[kNTilesS][4];
    uint32_t p_frag[BN / 16][4];

    auto release = [&](uint64_t* bar) {
      __syncwarp();
      if (lane == 0) mbar_arrive(bar);
    };
    // S = Q K^T for the K tile in ring position i (issued, not waited).
    auto issue_s = [&](int i) {
      const unsigned char* k_s = reinterpret_cast<const unsigned char*>(sm.k + Ring::k_slot(i) * kTileElems);
#pragma unroll
      for (int n = 0; n < kNTilesS; ++n) s_acc[n][0] = s_acc[n][1] = s_acc[n][2] = s_acc[n][3] = 0.f;
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk)
        if constexpr (kSwizzle) {
          // K-major, swizzled: k-step kk is 32 bytes into 128-byte piece kk / 4; rows 1024 B per 8.
          WgmmaSS<BN, T>::run(
              s_acc, wgmma_desc_sw128(q_tile + (kk / 4) * (BM * 128) + wg * 64 * 128 + (kk % 4) * 32, 16, 1024),
              wgmma_desc_sw128(k_s + (kk / 4) * (BN * 128) + (kk % 4) * 32, 16, 1024));
        } else {
          // K-major core matrices: LBO = next 8 d (128 B), SBO = next 8 rows (16 * D B).
          WgmmaSS<BN, T>::run(s_acc, wgmma_desc(q_tile + wg * 64 * D * 2 + kk * 256, 128, 16 * D),
                              wgmma_desc(k_s + kk * 256, 128, 16 * D));
        }
      wgmma_commit();
    };
    // O += P V for the V tile in ring position i (issued, not waited).
    auto issue_pv = [&](int i) {
      const unsigned char* v_s = reinterpret_cast<const unsigned char*>(sm.v + Ring::v_slot(i) * kTileElems);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk)
        if constexpr (kSwizzle)
          // MN-major (V read transposed), swizzled: LBO = next 64 d (a BN x 128 B piece block),
          // SBO = next 8 keys (1024 B); key-step kk = 16 rows of 128 B.
          Wgmma<D, T, true>::run(o_acc, p_frag[kk], wgmma_desc_sw128(v_s + kk * 16 * 128, BN * 128, 1024));
        else
          // MN-major core matrices: LBO = next 8 keys (16 * D B), SBO = next 8 d (128 B).
          Wgmma<D, T, true>::run(o_acc, p_frag[kk], wgmma_desc(v_s + kk * 32 * D, 16 * D, 128));
      wgmma_commit();
    };
    // Cap, mask and exponentiate s_acc in place (tile index `tile` of this
    // pass); returns the factors the old O and row sums must be scaled by.
    auto softmax = [&](int tile, float (&alpha)[2]) {
      const int n0 = first_tile_key + tile * BN;
      if (cap > 0.f) {
#pragma unroll
        for (int n = 0; n < kNTilesS; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) s_acc[n][e] = logit_cap_log2(s_acc[n][e], cap_inv_scaled, cap_log2);
      }
      const bool needs_mask = (n0 + BN - 1 > min_pos) || (window >= 0 && n0 < max_pos - window);
      if (needs_mask) {
#pragma unroll
        for (int n = 0; n < kNTilesS; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int j = n0 + n * 8 + 2 * t4 + (e & 1);
            const int p = pos[e / 2];
            if (j > p || (window >= 0 && j < p - window)) s_acc[n][e] = -INFINITY;
          }
      }
      online_softmax_step<AccLayoutMma16816>(s_acc, row_max, row_sum, alpha, score_mult);
    };
    auto rescale_o = [&](const float (&alpha)[2]) {
#pragma unroll
      for (int n = 0; n < kNTilesO; ++n) {
        o_acc[n][0] *= alpha[0];
        o_acc[n][1] *= alpha[0];
        o_acc[n][2] *= alpha[1];
        o_acc[n][3] *= alpha[1];
      }
    };
    auto pack_p = [&]() {
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) {
        p_frag[kk][0] = MmaType<T>::pack(s_acc[2 * kk][0], s_acc[2 * kk][1]);
        p_frag[kk][1] = MmaType<T>::pack(s_acc[2 * kk][2], s_acc[2 * kk][3]);
        p_frag[kk][2] = MmaType<T>::pack(s_acc[2 * kk + 1][0], s_acc[2 * kk + 1][1]);
        p_frag[kk][3] = MmaType<T>::pack(s_acc[2 * kk + 1][2], s_acc[2 * kk + 1][3]);
      }
    };
    // The cp.async writes are generic-proxy writes; wgmma reads through the async proxy.
    auto wait_k = [&](int i) {
      mbar_wait(&sm.k_full[Ring::k_slot(i)], Ring::k_phase(i));
      fence_proxy_async();
    };
    auto wait_v = [&](int i) {
      mbar_wait(&sm.v_full[Ring::v_slot(i)], Ring::v_phase(i));
      fence_proxy_async();
    };

    mbar_wait(sm.q_full, ring.q++ & 1);
    fence_proxy_async();
    MA_TL_STAMP(ring, kTlConsumerQ, pass_q0 == w.tile_q0);
    float alpha[2];
    if (my_tiles == 0) {
      release(sm.q_empty);  // an empty share: O = 0, max = -inf, sum = 0
    } else {
      // First tile: S, softmax, P (O is zero: no rescale).
      wait_k(it);
      issue_s(it);
      wgmma_wait<0>();
      fence_regs(s_acc);
      MA_TL_STAMP(ring, kTlConsumerFirstS, pass_q0 == w.tile_q0);
      release(&sm.k_empty[Ring::k_slot(it)]);
      softmax(tile_begin, alpha);
      pack_p();
      for (int tile = tile_begin + 1; tile < tile_begin + my_tiles; ++tile) {
        const int cur = it + (tile - tile_begin), prev = cur - 1;
        if constexpr (Tr::kOverlap) {
          wait_k(cur);
          issue_s(cur);
          wait_v(prev);
          issue_pv(prev);
          wgmma_wait<1>();  // S(cur) done; PV(prev) may still run
          fence_regs(s_acc);
          release(&sm.k_empty[Ring::k_slot(cur)]);
          softmax(tile, alpha);
          wgmma_wait<0>();
          fence_regs(o_acc);
          fence_regs(p_frag);
          release(&sm.v_empty[Ring::v_slot(prev)]);
          rescale_o(alpha);
          pack_p();
        } else {
          wait_v(prev);
          issue_pv(prev);
          wgmma_wait<0>();
          fence_regs(o_acc);
          fence_regs(p_frag);
          release(&sm.v_empty[Ring::v_slot(prev)]);
          wait_k(cur);
          issue_s(cur);
          wgmma_wait<0>();
          fence_regs(s_acc);
          release(&sm.k_empty[Ring::k_slot(cur)]);
          softmax(tile, alpha);
          rescale_o(alpha);
          pack_p();
        }
      }
      // Every S GEMM of this pass has completed: Q may be overwritten by the next pass (the
      // producer loads it while this last P V and the epilogue run).
      release(sm.q_empty);
      {
        const int last = it + my_tiles - 1;
        wait_v(last);
        issue_pv(last);
        wgmma_wait<0>();
        fence_regs(o_acc);
        fence_regs(p_frag);
        release(&sm.v_empty[Ring::v_slot(last)]);
      }
      MA_TL_STAMP(ring, kTlConsumerMainloop, pass_q0 + args.tile_capacity >= w.tile_end);
      it += my_tiles;
    }

    // KV split (kv_split_merge.cuh): rank 0 takes the other ranks' partials and merges them; they
    // are done once theirs is handed over. The merge arithmetic stays here, next to the state it
    // updates: moved into a function of its own (force-inlined or a lambda) it changes the order
    // of the PHI copies of that state, and with it the register assignment in the SASS.
    // A cut item's part (cut_merge.cuh): the same merge, over the parts parked in the arena, by
    // whichever part finishes last, starting from part 0's state.
    if (kv_splits > 1) {
      const int ctid = tid - 128;
      const bool cut = w.cut >= 0;
      if (cut) {
        if (!cut_part_done<kHeadDim, kWGs>(args, sm, w, tid, o_acc, row_max, row_sum)) return;  // another part merges
        if (split_rank != 0) {
          const float4* src = cut_part_f4<kHeadDim, kWGs>(args, w, 0, ctid);
          const float4 ml = __ldcg(src + kNTilesO * kConsumerThreads);
          row_max[0] = ml.x, row_max[1] = ml.y, row_sum[0] = ml.z, row_sum[1] = ml.w;
#pragma unroll
          for (int n = 0; n < kNTilesO; ++n) {
            const float4 o = __ldcg(src + n * kConsumerThreads);
            o_acc[n][0] = o.x, o_acc[n][1] = o.y, o_acc[n][2] = o.z, o_acc[n][3] = o.w;
          }
        }
      } else if (split_rank == 0) {
        kv_split_gather(sm);
      } else {
        kv_split_hand_over<kHeadDim, kWGs, T>(sm, w, tid, o_acc, row_max, row_sum);
        return;  // the partial is rank 0's now
      }
      {
        const float4* parked = reinterpret_cast<const float4*>(sm.q);
        for (int r = 1; r < kv_splits; ++r) {
          const float4* src = cut ? cut_part_f4<kHeadDim, kWGs>(args, w, r, ctid)
                                  : parked + (r - 1) * kv_split_partial_f4<kHeadDim, kWGs>() + ctid;
          const float4 ml = cut ? __ldcg(src + kNTilesO * kConsumerThreads) : src[kNTilesO * kConsumerThreads];
          const float other_max[2] = {ml.x, ml.y}, other_sum[2] = {ml.z, ml.w};
          float mine_mul[2], other_mul[2];
#pragma unroll
          for (int i = 0; i < 2; ++i) {
            // The merge of common/softmax.cuh (O and sums stay unnormalised: the epilogue
            // adds the sink and normalises).
            const float m = fmaxf(row_max[i], other_max[i]);
            mine_mul[i] = state_weight(row_max[i], m);
            other_mul[i] = state_weight(other_max[i], m);
            row_sum[i] = row_sum[i] * mine_mul[i] + other_sum[i] * other_mul[i];
            row_max[i] = m;
          }
#pragma unroll
          for (int n = 0; n < kNTilesO; ++n) {
            const float4 o = cut ? __ldcg(src + n * kConsumerThreads) : src[n * kConsumerThreads];
            o_acc[n][0] = o_acc[n][0] * mine_mul[0] + o.x * other_mul[0];
            o_acc[n][1] = o_acc[n][1] * mine_mul[0] + o.y * other_mul[0];
            o_acc[n][2] = o_acc[n][2] * mine_mul[1] + o.z * other_mul[1];
            o_acc[n][3] = o_acc[n][3] * mine_mul[1] + o.w * other_mul[1];
          }
        }
      }
    }
    write_output<kHeadDim, T>(args, w, out_ptr, warp_row0 + g, t4, pass_q0, rows_valid, o_acc, row_max, row_sum);
  }
}
#endif  // MA_EXTEND_HAS_WGMMA

}  // namespace mixed_attn::gpu::extend_detail
