// Hopper (sm_90a) extend kernel: warp-specialised, FlashAttention-3 style.
//
// Same work list, tile semantics and numerics as extend/portable/kernel.cuh (one CTA per
// (extend tile, group of q heads); GQA heads packed into the 128/192 query rows;
// online softmax in base 2; masks only on diagonal / window-edge tiles), but
// the CTA is split by role:
//   warpgroup 0, the producer: 128 threads that only copy. They read the page
//     ids of a K/V tile into a shared table (one key per thread, loaded a tile
//     ahead so their latency hides behind the copies). Tiles wholly inside the
//     attended range, with a page size that is a multiple of 16, are copied by
//     TMA: one 4-D tensor copy per (16 keys of one page, 64 columns), into the
//     128-byte-swizzled layout, completing on the slot's mbarrier by bytes.
//     Edge tiles (they must zero the rows outside the range: a stale NaN in a
//     masked V row would survive P = 0) and other page sizes take 16-byte
//     cp.async copies that signal the same mbarrier
//     (cp.async.mbarrier.arrive.noinc). A ring of kStages K and V slots.
//   warpgroups 1.., the consumers (three at head dims 64/128, two at 256): 64
//     query rows each. S = Q K^T as wgmma
//     with Q and K in shared memory; softmax in registers; O += P V as wgmma
//     with P from registers. With two consumer warpgroups the S GEMM of tile t
//     is issued together with the P V GEMM of tile t-1, and the exponentials of
//     tile t run while that P V is still on the tensor cores (intra-warpgroup
//     overlap); three have no registers for that (160 each) but share every
//     K/V tile among 192 rows; the consumer warpgroups interleave on their own.
// The producer gives registers back (setmaxnreg) so that the consumers hold
// S, P and O without spilling.
// No __syncthreads in the main loop: full/empty mbarriers per K and V slot.
//
// KV split: when a launch would leave most of its last wave idle (few long
// query tiles, e.g. 1024 new tokens over a 16k prefix: 176 CTAs on 132 SMs),
// launch_extend_sm90_impl runs each tile as a cluster of two CTAs, each over
// half of the tile's K/V tiles; rank 1 writes its unnormalised O, row max and
// row sum into rank 0's shared memory (st.shared::cluster) and rank 0 merges
// them before the epilogue. No global scratch, no second launch, no planner
// change. Deterministic plans are never split by the policy.
//
// Shared-memory tiles (tile_byte_off): the TMA instantiation uses the wgmma
// 128-byte-swizzle layout (the one TMA writes); the cp.async-only one the
// no-swizzle canonical layout (8 rows x 16 bytes per 128-byte core matrix),
// each producer warp instruction writing 8 rows x 4 chunks = 512 contiguous
// bytes (MA_SM90_SWIZZLE=1 gives it the swizzled layout too).
//
// Scope: bf16 / fp16 q with a cache of the same type, head dims 64/128/256.
// The fp8 cache and other GPUs use extend/portable/kernel.cuh (launch_extend chooses).
// The kernel is bound by the K/V copies from L2: three consumer warpgroups, the
// KV split and the TMA copies each exist to cut or hide copy time (the rates of
// each step against the bf16 matmul: benchmarks/RESULTS.md).
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cuda/common/smem_optin.h"
#include "cuda/common/softmax.cuh"
#include "cuda/extend/portable/kernel.cuh"
#include "cuda/extend/sm90/wgmma.cuh"
#include "cuda/common/plan_counts.cuh"
#include "cuda/arch/tma_encoder.h"
#if defined(MA_CUDA)
#include <cuda.h>  // CUtensorMap and its encoder's types (the encoder is fetched at run time)
#endif

namespace mixed_attn::gpu::extend_detail {

// Tile shapes of the sm_90a kernel per head dim: kBlockN keys per K/V tile,
// kStages ring slots, registers per thread after setmaxnreg for producer and
// consumers (128 * producer + 256 * consumer <= 64K). Overridable for sweeps
// (-DMA_SM90_D128_BN=... etc., benchmarks/sweep_extend.py).
#ifndef MA_SM90_D64_BN
#define MA_SM90_D64_BN 128
#endif
#ifndef MA_SM90_D64_ST
#define MA_SM90_D64_ST 4
#endif
#ifndef MA_SM90_D128_BN
#define MA_SM90_D128_BN 128
#endif
#ifndef MA_SM90_D128_ST
#define MA_SM90_D128_ST 2
#endif
#ifndef MA_SM90_D256_BN
#define MA_SM90_D256_BN 64
#endif
#ifndef MA_SM90_D256_ST
#define MA_SM90_D256_ST 2
#endif
// Layout of the cp.async-only instantiation's tiles. 1: the 128-byte-swizzled wgmma
// layout (see tile_byte_off); 0: the no-swizzle canonical layout, faster on the H200
// (benchmarks/RESULTS.md): the swizzled copies cost one shared table read per 16-byte
// chunk instead of per row. The TMA instantiation always uses the swizzled layout.
#ifndef MA_SM90_SWIZZLE
#define MA_SM90_SWIZZLE 0
#endif
// 1: K/V tiles inside the attended range are copied by TMA into the 128-byte-
// swizzled layout, one 4-D tensor copy per (16 keys of one page, 64 columns), when
// the page size is a multiple of 16; edge tiles keep cp.async. Plans TMA cannot
// serve (other page sizes; head dim 64, see the launcher) run the cp.async-only
// instantiation. 0: cp.async only.
#ifndef MA_SM90_TMA
#define MA_SM90_TMA 1
#endif
// 1: issue S(t) with PV(t-1) and exponentiate while PV runs; 0: one GEMM at a time.
#ifndef MA_SM90_OVERLAP
#define MA_SM90_OVERLAP 1
#endif

// Consumer warpgroups (64 query rows each). Three share every K/V tile among
// 192 rows instead of 128, a third fewer copied bytes per FLOP, but then
// the consumers have 160 registers: no room for S(t) and P(t-1) at once, so
// the S/PV overlap is off there.
#ifndef MA_SM90_D64_WGS
#define MA_SM90_D64_WGS 3
#endif
#ifndef MA_SM90_D128_WGS
#define MA_SM90_D128_WGS 3
#endif
#ifndef MA_SM90_D256_WGS
#define MA_SM90_D256_WGS 2  // O alone takes 128 registers at head dim 256
#endif

template <int kBN, int kST, int kWGs, int kProducerRegsIf2, int kConsumerRegsIf2>
struct Sm90Shape {
  static_assert(kWGs == 2 || kWGs == 3, "two or three consumer warpgroups");
  static constexpr int kBlockN = kBN, kStages = kST, kConsumerWGs = kWGs;
  static constexpr int kBlockM = 64 * kWGs;
  static constexpr int kThreads = 128 * (kWGs + 1);
  // Registers per thread after setmaxnreg: 128 * producer + 128 * kWGs * consumer <= 64K.
  static constexpr int kProducerRegs = kWGs == 2 ? kProducerRegsIf2 : 32;
  static constexpr int kConsumerRegs = kWGs == 2 ? kConsumerRegsIf2 : 160;
  static constexpr bool kOverlap = MA_SM90_OVERLAP != 0 && kWGs == 2;
};
template <int kHeadDim> struct Sm90Traits;
template <> struct Sm90Traits<64> : Sm90Shape<MA_SM90_D64_BN, MA_SM90_D64_ST, MA_SM90_D64_WGS, 56, 224> {};
template <> struct Sm90Traits<128> : Sm90Shape<MA_SM90_D128_BN, MA_SM90_D128_ST, MA_SM90_D128_WGS, 56, 224> {};
template <> struct Sm90Traits<256> : Sm90Shape<MA_SM90_D256_BN, MA_SM90_D256_ST, MA_SM90_D256_WGS, 40, 232> {};

template <int kHeadDim>
constexpr int sm90_smem_bytes() {
  using Tr = Sm90Traits<kHeadDim>;
  return Tr::kBlockM * kHeadDim * 2                      // Q
         + Tr::kStages * 2 * Tr::kBlockN * kHeadDim * 2  // K and V slots
         + 2 * Tr::kBlockN * 16                          // row offset table, two tiles
         + 2 * Tr::kBlockN * 4                           // page of each TMA box, two tiles
         + (4 * Tr::kStages + 4) * 8                     // mbarriers
         + 1024;                                         // room to align the tiles to 1024 B
}

// KV splits (CTAs of one cluster sharing a query tile): at most 2. Ranks 1.. park
// their partial O, row max and row sum (fp32, one float4 per thread per 8 output
// columns, plus one) in rank 0's Q + ring region, which has room for one partial
// at every head dim. Three splits (room at head dim 64) measured slower than two
// (benchmarks/RESULTS.md).
template <int kHeadDim>
constexpr int sm90_max_kv_splits() {
  using Tr = Sm90Traits<kHeadDim>;
  constexpr int region = Tr::kBlockM * kHeadDim * 2 + Tr::kStages * 2 * Tr::kBlockN * kHeadDim * 2;
  constexpr int partial = (kHeadDim / 8 + 1) * 128 * Tr::kConsumerWGs * 16;
  static_assert(partial <= region, "rank 0 must have room for one partial");
  return 2;
}

// Byte offset of 16-byte chunk c of row r in a tile of kRows rows of kChunks chunks.
// Swizzled (wgmma "128B swizzle" canonical layout): the row is cut into 128-byte
// pieces of 8 chunks; piece h of every row forms one block of kRows * 128 bytes;
// within a piece the chunk index is XORed with the row's low 3 bits. The hardware
// applies that XOR to address bits 4-6 from bits 7-9, so tiles are 1024-byte
// aligned. A warp copying one row's 8 chunks per 8 lanes writes 8 distinct bank
// groups, and reads whole 128-256-byte rows from global memory.
// Not swizzled: the canonical no-swizzle layout, each 8-row x 16-byte core matrix
// 128 contiguous bytes, the chunks of an 8-row group 128 B apart, 8-row groups
// kChunks * 128 B apart.
// The TMA descriptors of the K and V caches (kernel parameters). On HIP a
// placeholder of the same size: the sm_90a kernel is never launched there.
#if defined(MA_CUDA)
using TmaMap = CUtensorMap;
#define MA_GRID_CONSTANT __grid_constant__
#else
struct alignas(64) TmaMap {
  unsigned long long opaque[16];
};
#define MA_GRID_CONSTANT
#endif
struct Sm90TmaMaps {
  TmaMap k, v;
};
// Keys per TMA box: 16 keys of one page (the launcher uses TMA only for page sizes
// that are multiples of 16).
constexpr int kTmaBoxKeys = 16;

template <int kChunks, int kRows, bool kSwizzle>
__device__ __forceinline__ int tile_byte_off(int r, int c) {
  if constexpr (kSwizzle)
    return (c / 8) * (kRows * 128) + r * 128 + (((c % 8) ^ (r % 8)) << 4);
  else
    return ((r & 7) * 8 + c * 64 + (r >> 3) * (kChunks * 64)) * 2;
}

#if MA_EXTEND_HAS_WGMMA
// ---- mbarrier and register-budget primitives (PTX ISA 8.0, sm_90) ----
__device__ __forceinline__ void mbar_init(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count));
}
// Blocks until the phase with parity `parity` of the barrier has completed.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, int parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n"
      "}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
}
// Descriptor of a 128-byte-swizzled operand (layout type 1 in bits 62-63).
__device__ __forceinline__ uint64_t wgmma_desc_sw128(const void* smem, uint32_t lbo, uint32_t sbo) {
  return wgmma_desc(smem, lbo, sbo) | (uint64_t(1) << 62);
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}
// Arrives on the barrier once every cp.async this thread has issued so far has
// landed. noinc: the arrival counts against the barrier's expected count.
__device__ __forceinline__ void mbar_arrive_on_cp_async(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
template <int kRegs>
__device__ __forceinline__ void regs_release() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void regs_claim() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
// Waits until every cp.async this thread has issued has landed, in a commit group or not:
// cp.async.wait_all is commit_group + wait_group 0 (wait_group alone skips uncommitted copies,
// and this kernel commits none: its copies complete through cp.async.mbarrier.arrive.noinc).
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }
// Barrier 1 among the producer warpgroup only (barrier 0 is __syncthreads).
__device__ __forceinline__ void producer_sync() { asm volatile("bar.sync 1, 128;\n" ::: "memory"); }
// Barrier 2, KV split rank 0: the producer and the consumer warpgroups together (kThreads, every
// thread of the CTA, each role from its own branch) before rank 1 may write over Q and the ring.
template <int kThreads>
__device__ __forceinline__ void merge_sync() {
  asm volatile("bar.sync 2, %0;\n" ::"n"(kThreads) : "memory");
}
// ---- thread-block cluster primitives (KV splits merged through distributed shared memory) ----
// Every thread of every CTA of the cluster; orders the mbarrier inits before any remote arrive.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// Address of the same shared-memory location in CTA `rank` of the cluster.
__device__ __forceinline__ uint32_t cluster_addr(const void* local, int rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(smem_addr(local)), "r"(rank));
  return remote;
}
__device__ __forceinline__ void mbar_arrive_remote(uint32_t remote_bar) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(remote_bar) : "memory");
}
// mbar_wait with cluster-scope acquire: sees the remote writes released by the arrivals.
__device__ __forceinline__ void mbar_wait_cluster(uint64_t* bar, int parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n"
      "}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
}
// One thread arrives and announces `bytes` of TMA traffic the phase must also wait for.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes)
               : "memory");
}
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
__device__ __forceinline__ void st_cluster_f32x4(uint32_t addr, float a, float b, float c, float d) {
  asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "f"(a), "f"(b), "f"(c),
               "f"(d)
               : "memory");
}
#endif  // MA_EXTEND_HAS_WGMMA

// kTma: interior K/V tiles by TMA (maps), swizzled tiles; else cp.async only.
template <int kHeadDim, typename T, bool kTma>
__global__ void __launch_bounds__(Sm90Traits<kHeadDim>::kThreads, 1) extend_sm90_kernel(const ExtendArgs args, const int kv_splits, const MA_GRID_CONSTANT Sm90TmaMaps maps) {
#if MA_EXTEND_HAS_WGMMA
  using Tr = Sm90Traits<kHeadDim>;
  constexpr int D = kHeadDim;
  constexpr int BM = Tr::kBlockM;
  constexpr int kConsumerWarps = 4 * Tr::kConsumerWGs;
  constexpr int BN = Tr::kBlockN;
  constexpr int kStages = Tr::kStages;
  constexpr int kChunks = D / 8;          // 16-byte chunks per row
  constexpr int kQuads = kChunks / 4;     // a warp instruction writes 4 chunks of 8 rows
  constexpr bool kSwizzle = kTma || MA_SM90_SWIZZLE != 0;
  // Swizzled copies: a warp instruction covers kRowsPerCopy whole rows (up to 32 chunks).
  constexpr int kChunkLanes = kChunks < 32 ? kChunks : 32;
  constexpr int kRowsPerCopy = 32 / kChunkLanes;
  static_assert(kChunks <= 32, "head_dim <= 256");
  constexpr int kNTilesS = BN / 8;
  constexpr int kNTilesO = D / 8;
  constexpr int kTileElems = BN * D;
  static_assert(BN % 64 == 0 && BN <= 128 && D % 32 == 0, "sm90 tile shape");
  static_assert(kStages >= 2, "ring needs two slots");

  const AttentionCommon& a = args.a;
  const PlanView& plan = a.plan;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  // 1024-byte aligned tiles (the swizzle pattern repeats every 1024 bytes of address).
  T* smem_q = reinterpret_cast<T*>(smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023));
  T* smem_kv = smem_q + BM * D;  // slot s: K at 2s * kTileElems, V at (2s + 1) * kTileElems
  // [2][BN] (K offset, V offset) in elements of each key's cache row; -1: zero-fill.
  longlong2* row_table = reinterpret_cast<longlong2*>(smem_kv + kStages * 2 * kTileElems);
  // [2][BN] page of each TMA box (TMA tiles; the first BN / box_keys entries).
  int* box_pages = reinterpret_cast<int*>(row_table + 2 * BN);
  uint64_t* bars = reinterpret_cast<uint64_t*>(box_pages + 2 * BN);
  uint64_t* k_full = bars;
  uint64_t* v_full = bars + kStages;
  uint64_t* k_empty = bars + 2 * kStages;
  uint64_t* v_empty = bars + 3 * kStages;
  uint64_t* q_full = bars + 4 * kStages;
  uint64_t* q_empty = q_full + 1;
  uint64_t* merge_go = q_full + 2;       // rank r > 0: rank 0 has freed its Q + ring region
  uint64_t* merge_arrived = q_full + 3;  // rank 0: every other rank's partials are in place
  constexpr int kConsumerThreads = 128 * Tr::kConsumerWGs;

  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  // Graph-safe launches cover the bucket: the CTAs past this step's tiles leave before
  // touching a barrier (every CTA of a cluster shares the tile, so they leave together).
  if (int(blockIdx.x / kv_splits) / args.head_groups >= plan_count(plan, kCountExtendTiles, plan.num_extend_tiles))
    return;

  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&k_full[s], 128);  // every producer thread arrives (cp.async)
      mbar_init(&v_full[s], 128);
      mbar_init(&k_empty[s], kConsumerWarps);  // every consumer warp arrives
      mbar_init(&v_empty[s], kConsumerWarps);
    }
    mbar_init(q_full, 128);
    mbar_init(q_empty, kConsumerWarps);
    mbar_init(merge_go, 1);
    mbar_init(merge_arrived, (kv_splits - 1) * kConsumerThreads);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  // KV split: the kv_splits CTAs of one cluster (consecutive blocks) share a query tile and
  // each covers a contiguous share of its K/V tiles; rank 0 merges (launcher: one pass only).
  if (kv_splits > 1)
    cluster_sync();
  else
    __syncthreads();
  const int split_rank = blockIdx.x % kv_splits;  // = %cluster_ctarank for a 1-D cluster of kv_splits
  const int work_index = blockIdx.x / kv_splits;
  const int tile_index = work_index / args.head_groups;
  const int head_group = work_index % args.head_groups;
  const int pack = args.pack;
  const int q_head0 = head_group * pack;
  const int kv_head = q_head0 / (a.num_qo_heads / a.num_kv_heads);
  const int row = plan.extend_tiles[2 * tile_index];
  const int tile_q0 = plan.extend_tiles[2 * tile_index + 1];
  const int token0 = plan.qo_indptr[row];
  const int extend_len = plan.qo_indptr[row + 1] - token0;
  const int prefix = plan.seq_lens[row] - extend_len;
  const int tile_end = min(tile_q0 + plan.extend_tile_tokens, extend_len);
  const int window = a.window_left;

  if (warp < 4) {
    // ======================= producer warpgroup =======================
    regs_release<Tr::kProducerRegs>();
    const T* q_ptr = static_cast<const T*>(a.q);
    const T* k_cache = static_cast<const T*>(a.k_cache) + int64_t(kv_head) * a.k_stride_head;
    const T* v_cache = static_cast<const T*>(a.v_cache) + int64_t(kv_head) * a.v_stride_head;
    const int page_size = a.page_size;
    const int page_base = plan.kv_indptr[row];
    const int row_in_group = lane % 8;  // this lane's row within an 8-row group
    constexpr int box_keys = kTmaBoxKeys;
    const int chunk_in_quad = lane / 8;
    int it = 0;  // K/V tiles issued so far (over all passes): ring position
    for (int pass = 0, pass_q0 = tile_q0; pass_q0 < tile_end; ++pass, pass_q0 += args.tile_capacity) {
      const int nq = min(args.tile_capacity, tile_end - pass_q0);
      const int rows_valid = nq * pack;
      const int min_pos = prefix + pass_q0;
      const int kv_hi = prefix + pass_q0 + nq;
      const int kv_lo = window >= 0 ? max(0, min_pos - window) : 0;
      const int first_tile_key = kv_lo / BN * BN;
      const int num_kv_tiles = (kv_hi - first_tile_key + BN - 1) / BN;
      const int split_tiles = (num_kv_tiles + kv_splits - 1) / kv_splits;
      const int tile_begin = min(num_kv_tiles, split_rank * split_tiles);
      const int tile_end_ = min(num_kv_tiles, tile_begin + split_tiles);

      // Q: rows past the tile's queries are zero.
      if (pass > 0) mbar_wait(q_empty, (pass - 1) & 1);
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
        const T* src = q_ptr + int64_t(token0 + pass_q0 + qi) * a.q_stride_token +
                       int64_t(h) * a.q_stride_head + c * 8;
        cp_async_16(reinterpret_cast<unsigned char*>(smem_q) + tile_byte_off<kChunks, BM, kSwizzle>(r, c),
                    src, valid);
      }
      mbar_arrive_on_cp_async(q_full);

      // Page id of key (first_tile_key + tile * BN + tid), or -1 outside [kv_lo, kv_hi).
      auto read_page = [&](int tile) {
        const int j = first_tile_key + tile * BN + tid;
        if (tid >= BN || tile >= tile_end_ || j < kv_lo || j >= kv_hi) return -1;
        return a.kv_indices[page_base + j / page_size];
      };
      int next_page = read_page(tile_begin);
      for (int tile = tile_begin; tile < tile_end_; ++tile, ++it) {
        // Alternate by ring position, not by tile: a new pass must not reuse the last one's table.
        longlong2* table = row_table + (it & 1) * BN;
        if (tid < BN) {
          const int j = first_tile_key + tile * BN + tid;
          const int slot_in_page = j % page_size;
          longlong2 offs = make_longlong2(-1, -1);
          if (next_page >= 0) {
            offs.x = int64_t(next_page) * a.k_stride_page + int64_t(slot_in_page) * a.k_stride_slot;
            offs.y = int64_t(next_page) * a.v_stride_page + int64_t(slot_in_page) * a.v_stride_slot;
          }
          table[tid] = offs;
          if (kTma && tid % box_keys == 0) box_pages[(it & 1) * BN + tid / box_keys] = next_page;
        }
        next_page = read_page(tile + 1);  // lands while this tile's copies are issued
        producer_sync();
        const int slot = it % kStages;
        const int parity = ((it / kStages) & 1) ^ 1;
        T* k_dst = smem_kv + 2 * slot * kTileElems;
        T* v_dst = k_dst + kTileElems;
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
            const int page = box_pages[(it & 1) * BN + tid];
            const int slot0 = (tile_key0 + box_keys * tid) % page_size;
            unsigned char* dst = reinterpret_cast<unsigned char*>(dst_tile) + tid * box_keys * 128;
#pragma unroll
            for (int piece = 0; piece < D / 64; ++piece)
              tma_load_4d(dst + piece * (BN * 128), map, piece * 64, kv_head, slot0, page, full);
          }
          if (tid != 0) mbar_arrive(full);
        };
        // Each thread copies whole rows (all chunk quads of row r, the same lane chunk in each),
        // so the row's offset is read once and the copies differ by immediates; each warp
        // instruction still covers 8 rows x 4 chunks = 512 contiguous bytes of shared memory.
        // copy_rows(K or V): the tile's rows from the cache into a ring slot.
        auto copy_rows = [&](const T* cache, T* dst_tile, bool is_v) {
          unsigned char* dst = reinterpret_cast<unsigned char*>(dst_tile);
          if constexpr (kSwizzle) {
            // Lanes: kRowsPerCopy rows x kChunkLanes consecutive chunks; one chunk per row per thread.
            const int c0 = lane % kChunkLanes;
            // Four rows in flight per thread: a full unroll hoists every row's address and spills.
#pragma unroll 4
            for (int i = 0; i < BN / (4 * kRowsPerCopy); ++i) {
              const int r = (i * 4 + warp) * kRowsPerCopy + lane / kChunkLanes;
              const longlong2 offs = table[r];
              const int64_t off = is_v ? offs.y : offs.x;
#pragma unroll
              for (int c = c0; c < kChunks; c += kChunkLanes)
                cp_async_16(dst + tile_byte_off<kChunks, BN, true>(r, c), cache + max(off, int64_t(0)) + c * 8,
                            off >= 0);
            }
          } else {
            // Each thread copies whole rows (all chunk quads of row r, the same lane chunk in each);
            // each warp instruction covers 8 rows x 4 chunks = 512 contiguous bytes.
#pragma unroll
            for (int rg = warp; rg < BN / 8; rg += 4) {
              const int r = rg * 8 + row_in_group;
              const longlong2 offs = table[r];
              const int64_t off = is_v ? offs.y : offs.x;
              const T* src = cache + max(off, int64_t(0)) + chunk_in_quad * 8;
              unsigned char* d = dst + tile_byte_off<kChunks, BN, false>(r, chunk_in_quad);
#pragma unroll
              for (int quad = 0; quad < kQuads; ++quad)
                cp_async_16(d + quad * 4 * 128, src + quad * 32, off >= 0);
            }
          }
        };
        // One K or V tile into its slot once the consumers have released it.
        auto copy_tile = [&](bool is_v) {
          mbar_wait(is_v ? &v_empty[slot] : &k_empty[slot], parity);
          uint64_t* full = is_v ? &v_full[slot] : &k_full[slot];
          T* dst = is_v ? v_dst : k_dst;
          if (tma_tile) {
            copy_tma(is_v ? &maps.v : &maps.k, dst, full);
          } else {
            copy_rows(is_v ? v_cache : k_cache, dst, is_v);
            mbar_arrive_on_cp_async(full);
          }
        };
        copy_tile(false);
        copy_tile(true);
      }
    }
    // Drain this thread's copies (they complete through the full barriers; nothing is committed,
    // so cp.async.wait_group 0 would wait for none of them). KV split, rank 0: rank 1 writes its
    // partial over this CTA's Q + ring, the region these copies targeted; meet the consumers at
    // the barrier that precedes the merge_go release, so that every copy there has completed by
    // the issuing thread's own wait before rank 1 may write (docs/racecheck_sm90_kv_split.md:
    // the full-barrier chain already orders them; this one is the form racecheck follows).
    cp_async_wait_all();
    if (kv_splits > 1 && split_rank == 0) merge_sync<Tr::kThreads>();
    return;
  }

  // ======================= consumer warpgroups =======================
  regs_claim<Tr::kConsumerRegs>();
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
  const unsigned char* q_tile = reinterpret_cast<const unsigned char*>(smem_q);

  int it = 0;
  for (int pass = 0, pass_q0 = tile_q0; pass_q0 < tile_end; ++pass, pass_q0 += args.tile_capacity) {
    const int nq = min(args.tile_capacity, tile_end - pass_q0);
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

    auto slot_of = [&](int i) { return i % kStages; };
    auto parity_of = [&](int i) { return (i / kStages) & 1; };
    auto release = [&](uint64_t* bar) {
      __syncwarp();
      if (lane == 0) mbar_arrive(bar);
    };
    // S = Q K^T for the K tile in ring position i (issued, not waited).
    auto issue_s = [&](int i) {
      const unsigned char* k_s = reinterpret_cast<const unsigned char*>(smem_kv + 2 * slot_of(i) * kTileElems);
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
      const unsigned char* v_s = reinterpret_cast<const unsigned char*>(smem_kv + (2 * slot_of(i) + 1) * kTileElems);
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
    auto wait_full = [&](uint64_t* bar, int i) {
      mbar_wait(&bar[slot_of(i)], parity_of(i));
      fence_proxy_async();
    };

    mbar_wait(q_full, pass & 1);
    fence_proxy_async();
    float alpha[2];
    if (my_tiles == 0) {
      release(q_empty);  // an empty share: O = 0, max = -inf, sum = 0
    } else {
      // First tile: S, softmax, P (O is zero: no rescale).
      wait_full(k_full, it);
      issue_s(it);
      wgmma_wait<0>();
      fence_regs(s_acc);
      release(&k_empty[slot_of(it)]);
      softmax(tile_begin, alpha);
      pack_p();
      for (int tile = tile_begin + 1; tile < tile_begin + my_tiles; ++tile) {
        const int cur = it + (tile - tile_begin), prev = cur - 1;
        if constexpr (Tr::kOverlap) {
          wait_full(k_full, cur);
          issue_s(cur);
          wait_full(v_full, prev);
          issue_pv(prev);
          wgmma_wait<1>();  // S(cur) done; PV(prev) may still run
          fence_regs(s_acc);
          release(&k_empty[slot_of(cur)]);
          softmax(tile, alpha);
          wgmma_wait<0>();
          fence_regs(o_acc);
          fence_regs(p_frag);
          release(&v_empty[slot_of(prev)]);
          rescale_o(alpha);
          pack_p();
        } else {
          wait_full(v_full, prev);
          issue_pv(prev);
          wgmma_wait<0>();
          fence_regs(o_acc);
          fence_regs(p_frag);
          release(&v_empty[slot_of(prev)]);
          wait_full(k_full, cur);
          issue_s(cur);
          wgmma_wait<0>();
          fence_regs(s_acc);
          release(&k_empty[slot_of(cur)]);
          softmax(tile, alpha);
          rescale_o(alpha);
          pack_p();
        }
      }
      {
        const int last = it + my_tiles - 1;
        wait_full(v_full, last);
        issue_pv(last);
        wgmma_wait<0>();
        fence_regs(o_acc);
        fence_regs(p_frag);
        release(&v_empty[slot_of(last)]);
      }
      it += my_tiles;
      // Every S GEMM of this pass has completed: Q may be overwritten by the next pass.
      release(q_empty);
    }

    if (kv_splits > 1) {
      // ---- KV-split merge through distributed shared memory (single pass) ----
      // Partial of rank r, thread c: float4 n (< kNTilesO) = o_acc[n], float4 kNTilesO = (max0,
      // max1, sum0, sum1), at float4 index (r - 1) * (kNTilesO + 1) * kConsumerThreads +
      // n * kConsumerThreads + c of rank 0's Q + ring region (conflict-free, 16 B per lane).
      const int ctid = tid - 128;
      constexpr int kPartialF4 = (kNTilesO + 1) * kConsumerThreads;
      float4* parked = reinterpret_cast<float4*>(smem_q);
      if (split_rank == 0) {
        // Every consumer warp has finished its GEMMs (all copies landed) and every producer
        // thread has drained its cp.async (it waits here too): Q and ring are free.
        merge_sync<Tr::kThreads>();
        if (ctid > 0 && ctid < kv_splits) mbar_arrive_remote(cluster_addr(merge_go, ctid));
        mbar_wait_cluster(merge_arrived, 0);
        for (int r = 1; r < kv_splits; ++r) {
          const float4* src = parked + (r - 1) * kPartialF4 + ctid;
          const float4 ml = src[kNTilesO * kConsumerThreads];
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
            const float4 o = src[n * kConsumerThreads];
            o_acc[n][0] = o_acc[n][0] * mine_mul[0] + o.x * other_mul[0];
            o_acc[n][1] = o_acc[n][1] * mine_mul[0] + o.y * other_mul[0];
            o_acc[n][2] = o_acc[n][2] * mine_mul[1] + o.z * other_mul[1];
            o_acc[n][3] = o_acc[n][3] * mine_mul[1] + o.w * other_mul[1];
          }
        }
      } else {
        mbar_wait_cluster(merge_go, 0);
        const uint32_t dst = cluster_addr(parked + (split_rank - 1) * kPartialF4 + ctid, 0);
#pragma unroll
        for (int n = 0; n < kNTilesO; ++n)
          st_cluster_f32x4(dst + n * kConsumerThreads * 16, o_acc[n][0], o_acc[n][1], o_acc[n][2], o_acc[n][3]);
        st_cluster_f32x4(dst + kNTilesO * kConsumerThreads * 16, row_max[0], row_max[1], row_sum[0], row_sum[1]);
        mbar_arrive_remote(cluster_addr(merge_arrived, 0));
        return;
      }
    }

    // ---- epilogue: sink, normalise, store out (and lse) ----
    const float* sinks = a.maybe_sinks;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      float l = row_sum[i];
      l += MA_SHFL_XOR(l, 1);
      l += MA_SHFL_XOR(l, 2);
      const int r = warp_row0 + g + i * 8;
      const bool valid = r < rows_valid;
      const int h = q_head0 + (valid ? r % pack : 0);
      const RowFinish fin = finish_row(l, row_max[i], sinks, h, args.out_scale);
      if (valid) {
        const int token = token0 + pass_q0 + r / pack;
        T* dst = out_ptr + int64_t(token) * a.out_stride_token + int64_t(h) * a.out_stride_head;
#pragma unroll
        for (int n = 0; n < kNTilesO; ++n)
          MmaType<T>::store2(dst + n * 8 + 2 * t4, o_acc[n][2 * i] * fin.inv_l, o_acc[n][2 * i + 1] * fin.inv_l);
        if (a.maybe_lse != nullptr && t4 == 0) a.maybe_lse[int64_t(token) * a.lse_stride_token + h] = fin.lse;
      }
    }
  }
#endif  // MA_EXTEND_HAS_WGMMA
}

#if defined(MA_CUDA)
// The cache [num_pages, page_size, Hkv, D] as a 4-D TMA tensor (innermost first: D, Hkv,
// slot, page) with boxes of (64 columns, 1 head, box_keys slots, 1 page) into the 128-byte
// swizzle (the swizzle follows the shared-memory address: a box of one key lands as row r).
// False when the driver or the strides (multiples of 16 bytes) do not allow it.
template <typename T>
bool encode_cache_map(CUtensorMap* map, const void* cache, int64_t stride_page, int64_t stride_slot,
                      int64_t stride_head, int box_keys, const AttentionCommon& a) {
  const TensorMapEncodeFn encode = tensor_map_encoder();
  if (encode == nullptr || a.num_pages < 1) return false;
  constexpr int64_t kElem = sizeof(T);
  const cuuint64_t dims[4] = {cuuint64_t(a.head_dim), cuuint64_t(a.num_kv_heads), cuuint64_t(a.page_size),
                              cuuint64_t(a.num_pages)};
  const cuuint64_t strides[3] = {cuuint64_t(stride_head * kElem), cuuint64_t(stride_slot * kElem),
                                 cuuint64_t(stride_page * kElem)};
  for (cuuint64_t st : strides)
    if (st % 16 != 0 || st >= (cuuint64_t(1) << 40)) return false;
  const cuuint32_t box[4] = {64, 1, cuuint32_t(box_keys), 1};
  const cuuint32_t elem_strides[4] = {1, 1, 1, 1};
  const CUtensorMapDataType type =
      std::is_same<T, ma_bf16>::value ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  return encode(map, type, 4, const_cast<void*>(cache), dims, strides, box, elem_strides,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}
#endif

// Host side: launch one instantiation (instantiated in extend/instantiate_hd{64,128,256}.cu) as
// the plan decided: its KV split per query tile and TMA or cp.async for K/V.
template <int kHeadDim, typename T>
const char* launch_extend_sm90_impl(const ExtendParams& p, gpuStream_t stream) {
  const AttentionCommon& a = p.attn;
  constexpr int kSmem = sm90_smem_bytes<kHeadDim>();
  constexpr int BM = Sm90Traits<kHeadDim>::kBlockM;
  static_assert(BM == extend_sm90_block_rows(kHeadDim), "launch_policy.h must know the kernel's rows");
  if (a.plan.extend_block_rows != BM) return "extend: the plan's tiles were cut for another kernel shape";
  const int group = a.num_qo_heads / a.num_kv_heads;
  ExtendArgs args;
  args.a = a;
  args.pack = pack_factor(group, BM);
  args.head_groups = a.num_qo_heads / args.pack;
  args.tile_capacity = BM / args.pack;
  args.score_scale = a.sm_scale;
  args.out_scale = 1.f;
  const int64_t tiles = a.plan.maybe_counts != nullptr ? a.plan.graph_max_tiles : a.plan.num_extend_tiles;
  const int64_t blocks = tiles * args.head_groups;
  const int kv_splits = a.plan.extend_kv_splits;
  if (kv_splits < 1 || kv_splits > sm90_max_kv_splits<kHeadDim>())
    return "extend: the plan's KV split count is outside what the sm_90a merge holds";
  // The merge runs once, after the last pass: a split plan must cover its tiles in one pass.
  if (kv_splits > 1 && a.plan.extend_tile_tokens > args.tile_capacity)
    return "extend: a KV-split plan needs tiles of at most one pass";
  if (blocks * kv_splits > 0x7fffffff) return "extend: too many (tile, head group) blocks for one launch";
  Sm90TmaMaps maps;
  std::memset(&maps, 0, sizeof(maps));
  const bool use_tma = a.plan.extend_tma != 0;
  if (use_tma) {
#if defined(MA_CUDA) && MA_SM90_TMA
    // The policy asks for TMA only at page sizes of a multiple of kTmaBoxKeys.
    if (a.page_size % kTmaBoxKeys != 0 ||
        !encode_cache_map<T>(&maps.k, a.k_cache, a.k_stride_page, a.k_stride_slot, a.k_stride_head, kTmaBoxKeys, a) ||
        !encode_cache_map<T>(&maps.v, a.v_cache, a.v_stride_page, a.v_stride_slot, a.v_stride_head, kTmaBoxKeys, a))
      return "extend: the plan asks for TMA but the cache's tensor map could not be encoded (plan with extend_tma=0)";
#else
    return "extend: the plan asks for TMA but this build has no TMA path (plan with extend_tma=0)";
#endif
  }
  auto kernel = use_tma ? extend_sm90_kernel<kHeadDim, T, true> : extend_sm90_kernel<kHeadDim, T, false>;
  const char* smem_err = opt_in_dynamic_smem(reinterpret_cast<const void*>(kernel), kSmem);
  if (smem_err != nullptr) return smem_err;
  if (kv_splits == 1) {
    kernel<<<dim3(unsigned(blocks)), dim3(Sm90Traits<kHeadDim>::kThreads), kSmem, stream>>>(args, 1, maps);
    MA_RETURN_LAUNCH_STATUS();
  }
#if defined(MA_CUDA)
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(unsigned(blocks * kv_splits));
  config.blockDim = dim3(Sm90Traits<kHeadDim>::kThreads);
  config.dynamicSmemBytes = kSmem;
  config.stream = stream;
  cudaLaunchAttribute cluster;
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = unsigned(kv_splits);
  cluster.val.clusterDim.y = 1;
  cluster.val.clusterDim.z = 1;
  config.attrs = &cluster;
  config.numAttrs = 1;
  const cudaError_t launch_status = cudaLaunchKernelEx(&config, kernel, args, kv_splits, maps);
  if (launch_status != cudaSuccess) return cudaGetErrorString(launch_status);
  MA_RETURN_LAUNCH_STATUS();
#else
  return "extend: KV splits need thread-block clusters (CUDA sm_90)";
#endif
}

}  // namespace mixed_attn::gpu::extend_detail
