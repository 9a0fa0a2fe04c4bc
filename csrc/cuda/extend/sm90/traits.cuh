// Shapes and shared-memory layout of the sm_90a extend kernel, and the two small structs every
// role is handed: where the CTA's shared-memory regions and mbarriers are (Sm90Smem, carved up
// in kernel.cuh) and which (query tile, head group, KV split) the CTA works on (Sm90Work).
#pragma once
#include <cstdint>

#include "cuda/extend/sm90/lab_stream.cuh"  // lab_stream_smem_bytes (lab builds only)
#include "cuda/extend/sm90/timeline.cuh"    // MA_SM90_TIMELINE
#include "mixed_attn/compat.h"
#include "mixed_attn/launch_policy.h"  // MA_SM90_D*_WGS, extend_sm90_block_rows

namespace mixed_attn::gpu::extend_detail {

// Tile shapes of the sm_90a kernel per head dim: kBlockN keys per K/V tile,
// kStages ring slots for K and for V, registers per thread after setmaxnreg for producer and
// consumers (128 * producer + 256 * consumer <= 64K). Overridable for sweeps
// (-DMA_SM90_D128_BN=... etc., benchmarks/sweep_extend.py). MA_SM90_D*_KST / _VST: K and V
// slots of a 16-bit cache where they differ from kStages (Sm90RingShape; an fp8 cache's staging
// tiles leave no room for more).
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
#ifndef MA_SM90_D128_KST
#define MA_SM90_D128_KST MA_SM90_D128_ST
#endif
#ifndef MA_SM90_D128_VST
#define MA_SM90_D128_VST MA_SM90_D128_ST
#endif
#ifndef MA_SM90_D256_BN
#define MA_SM90_D256_BN 64
#endif
#ifndef MA_SM90_D256_ST
#define MA_SM90_D256_ST 2
#endif
// Layout of the cp.async-only instantiation's tiles (page sizes TMA cannot serve, head dim
// 64). 1: the 128-byte-swizzled wgmma layout (see tile_byte_off), the one the TMA
// instantiation always uses; since each producer thread copies whole quads of its row
// (producer.cuh) it is the faster one (page 1 at head dim 128: 1.046 -> 0.819 ms,
// benchmarks/RESULTS.md). 0: the no-swizzle canonical layout.
#ifndef MA_SM90_SWIZZLE
#define MA_SM90_SWIZZLE 1
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

// Consumer warpgroups (64 query rows each): MA_SM90_D{64,128,256}_WGS, defined in
// mixed_attn/launch_policy.h, whose extend_sm90_block_rows the planner cuts tiles by. Three share
// every K/V tile among 192 rows instead of 128, a third fewer copied bytes per FLOP, but then the
// consumers have 160 registers: no room for S(t) and P(t-1) at once, so the S/PV overlap is off
// there. Two at head dim 256: O alone takes 128 registers.

// Registers per thread the kernel is compiled for, which is what a CTA is given at launch (the
// roles' setmaxnreg only moves them between warpgroups): kLaunchRegs below. Default:
// __launch_bounds__(threads, 1), the whole register file for one CTA. Lab builds with
// -DMA_SM90_D128_MAXNREG=N: __maxnreg__ on every instantiation, N at head dim 128 (N x threads
// registers, the rest of the SM's left to another kernel's CTAs: docs/overlap_design.md), the
// whole file at the others.
#ifndef MA_SM90_D128_MAXNREG
#define MA_SM90_D128_MAXNREG 0
#endif
// The traits in parentheses: HIP's __launch_bounds__ macro counts its arguments, commas included.
#if MA_SM90_D128_MAXNREG > 0
#define MA_SM90_KERNEL_BOUNDS(head_dim, wgs) __maxnreg__((Sm90Traits<head_dim, wgs>::kLaunchRegs))
#else
#define MA_SM90_KERNEL_BOUNDS(head_dim, wgs) __launch_bounds__((Sm90Traits<head_dim, wgs>::kThreads), 1)
#endif

template <int kBN, int kST, int kWGs, int kProducerRegsIf2, int kConsumerRegsIf2, int kMaxNreg = 0, int kKST = kST,
          int kVST = kST>
struct Sm90Shape {
  static_assert(kWGs == 2 || kWGs == 3, "two or three consumer warpgroups");
  static constexpr int kBlockN = kBN, kStages = kST, kConsumerWGs = kWGs;
  static constexpr int kKStages16 = kKST, kVStages16 = kVST;  // a 16-bit cache's K and V slots
  static constexpr int kBlockM = 64 * kWGs;
  static constexpr int kThreads = 128 * (kWGs + 1);
  // Registers per thread after setmaxnreg: 128 * producer + 128 * kWGs * consumer <= 64K.
  static constexpr int kProducerRegs = kWGs == 2 ? kProducerRegsIf2 : 32;
  static constexpr int kConsumerRegs = kWGs == 2 ? kConsumerRegsIf2 : 160;
  static constexpr bool kOverlap = MA_SM90_OVERLAP != 0 && kWGs == 2;
  // Registers a thread is launched with (MA_SM90_KERNEL_BOUNDS): kMaxNreg, or the register file
  // shared by one CTA's threads (multiples of 8).
  static constexpr int kLaunchRegs = kMaxNreg > 0 ? kMaxNreg : 65536 / kThreads / 8 * 8;
  static_assert(128 * kProducerRegs + 128 * kWGs * kConsumerRegs <= (kMaxNreg > 0 ? kMaxNreg * kThreads : 65536),
                "the roles' registers must fit the CTA's");
};
template <int kHeadDim, int kWGs> struct Sm90Traits;
template <int kWGs> struct Sm90Traits<64, kWGs> : Sm90Shape<MA_SM90_D64_BN, MA_SM90_D64_ST, kWGs, 56, 224> {};
// Lab overrides of the two-warpgroup register split at head dim 128 (with MA_SM90_D128_MAXNREG:
// an extend CTA that leaves registers for a decode CTA on the same SM; docs/overlap_design.md).
#ifndef MA_SM90_D128_PREGS2
#define MA_SM90_D128_PREGS2 56
#endif
#ifndef MA_SM90_D128_CREGS2
#define MA_SM90_D128_CREGS2 224
#endif
template <int kWGs>
struct Sm90Traits<128, kWGs>
    : Sm90Shape<MA_SM90_D128_BN, MA_SM90_D128_ST, kWGs, MA_SM90_D128_PREGS2, MA_SM90_D128_CREGS2, MA_SM90_D128_MAXNREG,
                MA_SM90_D128_KST, MA_SM90_D128_VST> {};
template <int kWGs> struct Sm90Traits<256, kWGs> : Sm90Shape<MA_SM90_D256_BN, MA_SM90_D256_ST, kWGs, 40, 232> {};

// The K/V ring of an instantiation: kKSlots K tiles, then kVSlots V tiles, each slot behind a
// full and an empty mbarrier. A 16-bit cache may have more K than V slots or the reverse (the
// producer copies K(t) then V(t), and each waits for its own slot); an fp8 cache has kStages of
// each (its staging tiles take the room).
template <int kHeadDim, int kWGs, bool kFp8>
struct Sm90RingShape {
  using Tr = Sm90Traits<kHeadDim, kWGs>;
  static constexpr int kKSlots = kFp8 ? Tr::kStages : Tr::kKStages16;
  static constexpr int kVSlots = kFp8 ? Tr::kStages : Tr::kVStages16;
  static_assert(kKSlots >= 2 && kVSlots >= 2, "the ring needs two slots of each");
  // Ring position i (the CTA's K/V tiles so far) -> its slot, and the parity of the phase in which
  // the producer fills that slot (the consumers wait for it; the producer waits for the slot's
  // empty phase before it, parity ^ 1).
  static __device__ __forceinline__ int k_slot(int i) { return i % kKSlots; }
  static __device__ __forceinline__ int v_slot(int i) { return i % kVSlots; }
  static __device__ __forceinline__ int k_phase(int i) { return (i / kKSlots) & 1; }
  static __device__ __forceinline__ int v_phase(int i) { return (i / kVSlots) & 1; }
};

// The dynamic shared memory's declared alignment (kernel.cuh): at most 1024 - this bytes go
// before the 1024-byte aligned tiles.
constexpr int kSm90SmemDeclaredAlign = 128;
// Dynamic shared memory of one CTA, in the order kernel.cuh carves it up. kFp8: an fp8 e4m3
// cache, whose K/V tiles land as bytes in two staging tiles and are widened into the ring (cp.async
// only: no TMA box pages).
template <int kHeadDim, int kWGs, bool kFp8>
constexpr int sm90_smem_bytes() {
  using Tr = Sm90Traits<kHeadDim, kWGs>;
  using Ring = Sm90RingShape<kHeadDim, kWGs, kFp8>;
  return Tr::kBlockM * kHeadDim * 2                                    // Q
         + (Ring::kKSlots + Ring::kVSlots) * Tr::kBlockN * kHeadDim * 2  // K and V slots
         + (kFp8 ? 2 * Tr::kBlockN * kHeadDim : 0)                     // fp8: two staging tiles of bytes
         + 2 * Tr::kBlockN * 16                                        // row offset table, two tiles
         + (kFp8 ? 0 : 2 * Tr::kBlockN * 4)                            // page of each TMA box, two tiles
         + (2 * (Ring::kKSlots + Ring::kVSlots) + 3) * 8               // mbarriers
         + 8                                                           // a cut item's "merge here" flag
         + lab_stream_smem_bytes<kHeadDim, kFp8>()                     // lab probe (0 in the default build)
         + 1024 - kSm90SmemDeclaredAlign;                              // room to align the tiles to 1024 B
}
// An instantiation fits an SM's 227 KB: the fp8 one with its staging tiles beside the ring (every
// head dim; at 256 with 40 bytes to spare; the launch policy sends every fp8 cache to this kernel
// on sm_90a), the 16-bit one with the ring shape chosen for it.
template <int kHeadDim, int kWGs, bool kFp8>
constexpr bool sm90_fits() {
  return sm90_smem_bytes<kHeadDim, kWGs, kFp8>() <= 227 * 1024;
}

// KV splits (CTAs of one cluster sharing a query tile): at most 2. Ranks 1.. park
// their partial O, row max and row sum (fp32, one float4 per thread per 8 output
// columns, plus one) in rank 0's Q + ring region, which has room for one partial
// at every head dim (kv_split_merge.cuh). Three splits (room at head dim 64) measured
// slower than two (benchmarks/RESULTS.md).
template <int kHeadDim, int kWGs>
constexpr int sm90_max_kv_splits() {
  using Tr = Sm90Traits<kHeadDim, kWGs>;
  // The smaller ring of the two instantiations.
  using R16 = Sm90RingShape<kHeadDim, kWGs, false>;
  using R8 = Sm90RingShape<kHeadDim, kWGs, true>;
  constexpr int ring16 = R16::kKSlots + R16::kVSlots, ring8 = R8::kKSlots + R8::kVSlots;
  constexpr int ring_tiles = ring16 < ring8 ? ring16 : ring8;
  constexpr int region = Tr::kBlockM * kHeadDim * 2 + ring_tiles * Tr::kBlockN * kHeadDim * 2;
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
template <int kChunks, int kRows, bool kSwizzle>
__device__ __forceinline__ int tile_byte_off(int r, int c) {
  if constexpr (kSwizzle) return (c / 8) * (kRows * 128) + r * 128 + (((c % 8) ^ (r % 8)) << 4);
  else return ((r & 7) * 8 + c * 64 + (r >> 3) * (kChunks * 64)) * 2;
}

// The CTA's shared memory (kernel.cuh carves it up; sizes in sm90_smem_bytes).
template <typename T>
struct Sm90Smem {
  T* q;                   // [kBlockM][D], 1024-byte aligned
  T* k;                   // K ring: slot s at s * kTileElems (Sm90RingShape::kKSlots slots)
  T* v;                   // V ring, right after the K ring (kVSlots slots)
  longlong2* row_table;   // [2][kBlockN] (K offset, V offset) in elements of each key's cache row; -1: zero-fill
  int* box_pages;         // [2][kBlockN] page of each TMA box (TMA tiles; the first kBlockN / box_keys entries)
  unsigned char* stage8;  // fp8 caches: [2][kBlockN][D] bytes, K/V tiles as copied, before widening
  uint64_t* k_full;       // [kKSlots] mbarriers: the producer has filled the K slot
  uint64_t* v_full;       // [kVSlots] ... the V slot
  uint64_t* k_empty;      // [kKSlots] every consumer warp is done with the K slot
  uint64_t* v_empty;      // [kVSlots] ... the V slot
  uint64_t* q_full;       // Q is in place
  uint64_t* q_empty;      // every S GEMM of the pass has completed: Q may be overwritten
  uint64_t* merge_arrived;  // rank 0: every other rank's partials are in place
  int* cut_merge;           // a cut item's part: 1 when this CTA is the last of its parts (it merges)
#if MA_SM90_LAB_STREAM
  unsigned char* lab_stream;  // lab probe: kLabStreamSlots scratch slots ...
  uint64_t* lab_stream_full;  // ... and their mbarriers
#endif
};

// Which work items (extend tile, head group) a CTA serves, in order. A KV-split launch: one item
// per cluster of kv_splits CTAs. Otherwise the launch has `ctas` CTAs (the plan's extend_ctas, or
// one per item) and CTA c serves items r * ctas + (r even ? c : ctas - 1 - c), r = 0, 1, ...:
// the items come costliest first (the plan's tile order, head groups innermost), so dealing them
// out in alternating directions ("snake") evens the CTAs' loads (the planner's estimate,
// step_cost.h, deals them the same way). With one CTA per item, CTA c serves item c only. A
// plan with cut items deals units the same way (the whole items, then each cut item's parts:
// sm90_work, kernel.cuh).
// The CTA's index and the launch's size come from blockIdx / gridDim at each call rather than
// registers: the consumers have none to spare across their main loop.
struct Sm90Schedule {
  int kv_splits;
  // Item of round r, or `total` (the step's items: tiles x head groups) when the CTA has no more.
  __device__ __forceinline__ int item(int r, int total) const {
    if (kv_splits > 1) return r == 0 && int(blockIdx.x) / kv_splits < total ? int(blockIdx.x) / kv_splits : total;
    const int ctas = int(gridDim.x), cta = int(blockIdx.x);
    const int i = r * ctas + ((r & 1) ? ctas - 1 - cta : cta);
    return i < total ? i : total;
  }
};

// The CTA's work: one (extend tile, group of `pack` q heads) and, under a KV split or for a cut
// item, which share of its K/V tiles.
struct Sm90Work {
  int split_rank;  // = %cluster_ctarank for a 1-D cluster of kv_splits; a cut item's part
  int kv_splits;   // CTAs (one cluster) sharing the query tile, or a cut item's parts; each covers
                   // a share of its K/V tiles
  int cut;         // a cut item's index (its counter, its parts' arena slots), or -1
  int pack;        // q heads packed into the query rows (row = query * pack + head)
  int q_head0;     // first q head of the group
  int kv_head;
  int row;         // the plan's row (sequence) of the tile
  int tile_q0;     // first query of the tile within the row's extend
  int token0;      // the row's first token in q / out
  int prefix;      // cached keys before the extend
  int tile_end;    // one past the tile's last query
  int window;      // window_left (< 0: none)
};

// Positions each role keeps over all of a CTA's items and passes, so that the mbarrier phases
// line up between producer and consumers across item boundaries.
struct Sm90Ring {
  int kv = 0;  // K/V tiles issued (producer) / consumed (consumers) so far: ring slot and phase
  int q = 0;   // passes so far: the Q slot's phase
#if MA_SM90_LAB_STREAM
  int lab_stream = 0;  // lab probe: the producer's copies so far
#endif
#if MA_SM90_TIMELINE
  uint64_t* tl = nullptr;  // this thread's timeline record of the current item (timeline.cuh), or null
#endif
};

}  // namespace mixed_attn::gpu::extend_detail
