// Hopper (sm_90a) extend kernel: warp-specialised, FlashAttention-3 style.
//
// Same work list, tile semantics and numerics as extend/portable/kernel.cuh (work items of
// (extend tile, group of q heads); GQA heads packed into the 128/192 query rows;
// online softmax in base 2; masks only on diagonal / window-edge tiles). A CTA serves one item,
// or, when the plan makes the launch persistent (extend_ctas: about one CTA per SM), a share of
// the items dealt out by Sm90Schedule (traits.cuh), one after the other without a new CTA's
// start-up, the next item's first loads overlapping the last one's end. The CTA is split by
// role, one header each:
//   warpgroup 0, the producer (producer.cuh): 128 threads that only copy Q and the paged
//     K/V tiles, by TMA or cp.async, into rings of K and V slots (Sm90RingShape).
//   warpgroups 1.., the consumers (three at head dims 64/128, two at 256; 64 query rows
//     each): the wgmma main loop, S = Q K^T, masks, online softmax, O += P V
//     (mainloop.cuh); under a KV split the merge of the cluster's two partials through
//     distributed shared memory (kv_split_merge.cuh), and for a cut item's part the merge of its
//     item's parts through the arena (cut_merge.cuh); the normalisation and the output /
//     LSE stores (epilogue.cuh).
// The producer gives registers back (setmaxnreg) so that the consumers hold
// S, P and O without spilling. No __syncthreads in the main loop: full/empty
// mbarriers per K and V slot (sync.cuh). Tile shapes, the shared-memory layout and
// the structs the roles are handed: traits.cuh; the TMA descriptors: tma_maps.h; the
// host launcher (KV split cluster, TMA or cp.async instantiation): launch.cuh.
//
// Shared-memory tiles (tile_byte_off): the wgmma 128-byte-swizzle layout (the one TMA
// writes), in both instantiations; each producer warp instruction of a cp.async copy writes
// 8 rows x 4 chunks with every 16-byte slot position hit four times (MA_SM90_SWIZZLE=0 gives
// the cp.async-only instantiation the no-swizzle canonical layout instead).
//
// Scope: bf16 / fp16 q with a cache of the same type or an fp8 e4m3 cache (kFp8: the producer
// copies its bytes into two staging tiles and widens them into the ring; no TMA), head dims
// 64/128/256. Other GPUs use extend/portable/kernel.cuh (the plan chooses, launch_extend follows).
// The kernel is bound by the K/V copies from L2: three consumer warpgroups, the
// KV split and the TMA copies each exist to cut or hide copy time (the rates of
// each step against the bf16 matmul: benchmarks/RESULTS.md).
#pragma once
#include <cstdint>

#include "cuda/common/pdl.cuh"
#include "cuda/common/plan_counts.cuh"
#include "cuda/extend/args.cuh"
#include "cuda/extend/sm90/epilogue.cuh"
#include "cuda/extend/sm90/kv_split_merge.cuh"
#include "cuda/extend/sm90/mainloop.cuh"
#include "cuda/extend/sm90/producer.cuh"
#include "cuda/extend/sm90/sync.cuh"
#include "cuda/extend/sm90/tma_maps.h"
#include "cuda/extend/sm90/traits.cuh"
#include "cuda/extend/sm90/wgmma.cuh"  // MA_EXTEND_HAS_WGMMA
#include "mixed_attn/params.h"

namespace mixed_attn::gpu::extend_detail {

// Unit `unit` of the step as the roles see it, for KV-split rank `split_rank` of `kv_splits`. A
// unit is an item (tile item / head_groups of the plan's costliest-first list, head group
// item % head_groups), or, in a plan that cuts its k costliest items into `parts` parts
// (cut_merge.cuh), one part: the units are the whole items k.. in order, then items 0..k-1's
// parts, item by item (the planner's estimate deals them in this order, step_cost.h).
__device__ __forceinline__ Sm90Work sm90_work(const ExtendArgs& args, int unit, int kv_splits, int split_rank) {
  const AttentionCommon& a = args.a;
  const PlanView& plan = a.plan;
  Sm90Work w;
  w.kv_splits = kv_splits;
  w.split_rank = split_rank;
  w.cut = -1;
  int item = unit;
  const int cut_items = plan.extend_cut_items;
  if (cut_items > 0) {
    const int whole = plan.num_extend_tiles * args.head_groups - cut_items;
    if (unit < whole) {
      item = cut_items + unit;
    } else {
      const int parts = plan.extend_item_parts, j = unit - whole;
      item = w.cut = j / parts;
      w.split_rank = j % parts;
      w.kv_splits = parts;
    }
  }
  const int tile_index = item / args.head_groups;
  const int head_group = item % args.head_groups;
  w.pack = args.pack;
  w.q_head0 = head_group * w.pack;
  w.kv_head = w.q_head0 / (a.num_qo_heads / a.num_kv_heads);
  w.row = plan.extend_tiles[2 * tile_index];
  w.tile_q0 = plan.extend_tiles[2 * tile_index + 1];
  w.token0 = plan.qo_indptr[w.row];
  const int extend_len = plan.qo_indptr[w.row + 1] - w.token0;
  w.prefix = plan.seq_lens[w.row] - extend_len;
  w.tile_end = min(w.tile_q0 + plan.extend_tile_tokens, extend_len);
  w.window = a.window_left;
  return w;
}

// kTma: interior K/V tiles by TMA (maps), swizzled tiles; else cp.async only. kFp8: an fp8 e4m3
// cache (cp.async only), its tiles widened to T by the producer (producer.cuh).
template <int kHeadDim, int kWGs, typename T, bool kTma, bool kFp8>
__global__ void MA_SM90_KERNEL_BOUNDS(kHeadDim, kWGs)
    extend_sm90_kernel(const ExtendArgs args, const int kv_splits, const MA_GRID_CONSTANT Sm90TmaMaps maps) {
#if MA_EXTEND_HAS_WGMMA
  // A decode stage 1 launched after it (PlanView::pdl) may take the SMs its last CTAs leave idle.
  pdl_allow_dependents();
  using Tr = Sm90Traits<kHeadDim, kWGs>;
  constexpr int D = kHeadDim;
  constexpr int BM = Tr::kBlockM;
  constexpr int kConsumerWarps = 4 * Tr::kConsumerWGs;
  constexpr int BN = Tr::kBlockN;
  using Ring = Sm90RingShape<kHeadDim, kWGs, kFp8>;
  constexpr bool kSwizzle = kTma || MA_SM90_SWIZZLE != 0;
  constexpr int kTileElems = BN * D;
  static_assert(BN % 64 == 0 && BN <= 128 && D % 32 == 0, "sm90 tile shape");
  static_assert(sm90_fits<kHeadDim, kWGs, kFp8>(), "Q, the K/V ring (and fp8 staging tiles) must fit");
  static_assert(!kFp8 || (!kTma && kSwizzle),
                "fp8 caches: cp.async into staging tiles, widened into the swizzled ring");

  const AttentionCommon& a = args.a;
  const PlanView& plan = a.plan;
  // ---- shared memory (sizes: sm90_smem_bytes) ----
  extern __shared__ __align__(kSm90SmemDeclaredAlign) unsigned char smem_raw[];
  Sm90Smem<T> sm;
  // 1024-byte aligned tiles (the swizzle pattern repeats every 1024 bytes of address).
  sm.q = reinterpret_cast<T*>(smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023));
  sm.k = sm.q + BM * D;
  sm.v = sm.k + Ring::kKSlots * kTileElems;
  sm.stage8 = reinterpret_cast<unsigned char*>(sm.v + Ring::kVSlots * kTileElems);
  sm.row_table = reinterpret_cast<longlong2*>(sm.stage8 + (kFp8 ? 2 * kTileElems : 0));
  sm.box_pages = reinterpret_cast<int*>(sm.row_table + 2 * BN);
  uint64_t* bars = reinterpret_cast<uint64_t*>(sm.box_pages + (kFp8 ? 0 : 2 * BN));  // fp8: no TMA boxes
  sm.k_full = bars;
  sm.k_empty = sm.k_full + Ring::kKSlots;
  sm.v_full = sm.k_empty + Ring::kKSlots;
  sm.v_empty = sm.v_full + Ring::kVSlots;
  sm.q_full = sm.v_empty + Ring::kVSlots;
  sm.q_empty = sm.q_full + 1;
  sm.merge_arrived = sm.q_full + 2;
  sm.cut_merge = reinterpret_cast<int*>(sm.q_full + 3);
#if MA_SM90_LAB_STREAM
  sm.lab_stream_full = sm.q_full + 4;
  sm.lab_stream = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(sm.lab_stream_full + kLabStreamSlots) + 127) & ~uintptr_t(127));
#endif
  constexpr int kConsumerThreads = 128 * Tr::kConsumerWGs;

  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  // The CTA's items (Sm90Schedule): a persistent launch (the plan's extend_ctas CTAs) deals the
  // step's items out; otherwise one item per CTA (per cluster under a KV split). Graph-safe
  // launches cover the bucket: the CTAs past this step's items leave before touching a barrier
  // (every CTA of a cluster shares the item, so they leave together).
  const Sm90Schedule sched{kv_splits};
  // Units: the items, and a cut item's parts past its first (a graph-safe plan never cuts).
  auto total_items = [&]() {
    return plan_count(plan, kCountExtendTiles, plan.num_extend_tiles) * args.head_groups +
           plan.extend_cut_items * (plan.extend_item_parts - 1);
  };
  if (sched.item(0, total_items()) >= total_items()) return;

  if (tid == 0) {
    for (int s = 0; s < Ring::kKSlots; ++s) {
      mbar_init(&sm.k_full[s], 128);              // every producer thread arrives (cp.async)
      mbar_init(&sm.k_empty[s], kConsumerWarps);  // every consumer warp arrives
    }
    for (int s = 0; s < Ring::kVSlots; ++s) {
      mbar_init(&sm.v_full[s], 128);
      mbar_init(&sm.v_empty[s], kConsumerWarps);
    }
    mbar_init(sm.q_full, 128);
    mbar_init(sm.q_empty, kConsumerWarps);
    mbar_init(sm.merge_arrived, (kv_splits - 1) * kConsumerThreads);
#if MA_SM90_LAB_STREAM
    if constexpr (lab_stream_on<kHeadDim, kFp8>())
      for (int s = 0; s < kLabStreamSlots; ++s) mbar_init(&sm.lab_stream_full[s], 1);
#endif
    fence_mbarrier_init();
  }
  // KV split: the kv_splits CTAs of one cluster (consecutive blocks) share a query tile and
  // each covers a contiguous share of its K/V tiles; rank 0 merges (launcher: one pass only).
  if (kv_splits > 1) cluster_sync();
  else __syncthreads();
  const int split_rank = int(blockIdx.x) % kv_splits;  // = %cluster_ctarank for a 1-D cluster

  // ---- roles: each runs every item of the CTA in order; the K/V ring and the Q slot carry
  // over from one item to the next, so the producer fetches an item's first K/V tile and its Q
  // while the consumers finish the one before ----
  Sm90Ring ring;
  if (warp < 4) {
    regs_release<Tr::kProducerRegs>();
    for (int r = 0, item; (item = sched.item(r, total_items())) < total_items(); ++r) {
      MA_TL_BIND(ring, r, item, tid == 0);
      MA_TL_STAMP(ring, kTlProducerStart, true);
      produce<kHeadDim, kWGs, T, kTma, kFp8>(args, maps, sm, sm90_work(args, item, kv_splits, split_rank), tid, warp,
                                             lane, ring);
      MA_TL_STAMP(ring, kTlProducerEnd, true);
    }
#if MA_SM90_LAB_STREAM
    if constexpr (lab_stream_on<kHeadDim, kFp8>())
      if (tid == 0) lab_stream_drain(sm.lab_stream_full, ring.lab_stream);
#endif
    produce_drain(kv_splits);
    return;
  }
  regs_claim<Tr::kConsumerRegs>();
  for (int r = 0, item; (item = sched.item(r, total_items())) < total_items(); ++r) {
    MA_TL_BIND(ring, r, item, tid == 128);
    MA_TL_STAMP(ring, kTlConsumerStart, true);
    consume<kHeadDim, kWGs, T, kSwizzle, Ring>(args, sm, sm90_work(args, item, kv_splits, split_rank), tid, warp, lane,
                                               ring);
    MA_TL_STAMP(ring, kTlConsumerEnd, true);
  }
#endif  // MA_EXTEND_HAS_WGMMA
}

}  // namespace mixed_attn::gpu::extend_detail
