// The launch policy: every decision about how a step is launched, made on the
// host from a small description of the device, recorded in the plan.
//
// Plain C++ (no torch, no CUDA): the planner calls it, the CPU tests check its
// decisions, and the kernels include it only for the shapes and pack_factor
// below (one copy of each). Launchers and kernels read the decisions from
// PlanView and decide nothing themselves, so a plan and its launch never
// disagree (design.md, "The plan owns every launch decision").
#pragma once
#include <cstdint>
#include <string>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define MA_HOST_DEVICE __host__ __device__
#else
#define MA_HOST_DEVICE
#endif

namespace mixed_attn {

// What the planner knows of the device it plans for. Filled once per device by
// torch.ops.mixed_attn.device_desc (csrc/cuda/device_desc.cu for GPUs).
enum class DeviceKind : int32_t { kCpu = 0, kCuda = 1, kHip = 2 };
struct DeviceDesc {
  DeviceKind kind = DeviceKind::kCpu;
  int32_t arch = 0;               // CUDA: 10 * major + minor (90 on H100/H200); 0 otherwise
  int32_t num_sms = 132;          // SMs / CUs the split policies fill
  bool sm90_extend = false;       // the build holds sm_90a code and the device is cc 9.0
  bool tma_encoder = false;       // the driver exports cuTensorMapEncodeTiled
  bool hip_mfma = false;          // HIP: a CDNA2/CDNA3 GPU (gfx90a, gfx94x, gfx95x), whose MFMA
                                  // bf16/fp16 instructions the extend kernel is compiled for
};

// Kernel families. kAuto is a request only; a plan always records a concrete one.
enum class ExtendKernel : int32_t {
  kAuto = 0,
  kMma = 1,   // portable FlashAttention-2-style kernel: mma.sync on NVIDIA, MFMA on CDNA
  kSm90 = 2,  // warp-specialised wgmma kernel (sm_90a builds on cc 9.0)
  kHost = 3,  // the CPU implementation
};
enum class DecodeKernel : int32_t {
  kAuto = 0,
  kTensorCore = 1,  // mma.sync stage 1 (CUDA)
  kPortable = 2,    // matrix-free stage 1 (HIP, and a second implementation on CUDA)
  kHost = 3,        // the CPU implementation
  kTensorCoreNarrow = 4,  // mma.sync stage 1 computed transposed: <= 8 (query, head) pairs a CTA,
                          // about half the registers (CUDA; decode/stage1_narrow.cuh)
};

// What the wrapper may force (its extend_backend= / decode_backend= /
// extend_kv_splits= / extend_tma= arguments, defaulted from the environment in
// python/mixed_attn/env.py). Zero / -1 leave the choice to the policy.
struct LaunchRequest {
  ExtendKernel extend_kernel = ExtendKernel::kAuto;
  DecodeKernel decode_kernel = DecodeKernel::kAuto;
  int32_t extend_kv_splits = 0;  // 0: policy; N >= 1: N CTAs per query tile (clamped to the max)
  int32_t extend_tma = -1;       // -1: policy; 0: cp.async only; 1: TMA (an error where impossible)
  int32_t extend_q_tma = -1;     // -1: policy (TMA where possible); 0: Q by cp.async; 1: TMA (an error
                                 // where impossible)
  int32_t extend_tile_tokens = 0;  // 0: the kernel's tile; N: tiles of N query tokens (every kernel
                                   // runs any tile size, in passes; oracles and tests use this)
  int32_t decode_max_q = 0;        // 0: policy; N in [1, kDecodeMaxQueries]: rows of up to N new
                                   // tokens are decode-class (split mode)
  int32_t extend_persistent = -1;  // -1: policy (persistent unless the estimate finds one CTA per
                                   // item clearly faster); 0: one sm_90a CTA per item; 1: persistent
                                   // sm_90a launches (about one CTA per SM) wherever not KV-split
  int32_t extend_item_parts = -1;  // -1: policy (the planner cuts the costliest items of a persistent
                                   // sm_90a launch into 2..kExtendMaxItemParts parts where its
                                   // estimate finds that faster); 1: never; N in 2..4: every item of
                                   // the launch in N parts (a persistent launch; tests, benchmarks)
  int32_t pdl = -1;                // -1: policy; 0: ordinary launches; 1: the decode launches as
                                   // programmatic dependents (an error below compute capability 9.0)
  int32_t extend_block_rows = 0;   // 0: policy (the sm_90a kernel at head dim 128 with a 16-bit
                                   // cache: 192 or 128 rows a tile, per step by the estimate); N:
                                   // the kernel's tile of N rows (128 or 192 there; else its one)
  int32_t decode_kv_pack = 0;      // 0: policy; 1: one kv head a tensor-core decode CTA; 2: two
                                   // adjacent ones where a step's rows fit (decode_step_kv_pack;
                                   // the tensor_core kernel at head dim 64 only)
  int32_t extend_leave_sms = -1;   // -1: policy (a split step whose decode half outweighs its
                                   // extend leaves SMs where the estimate finds it faster: plan.cc,
                                   // step 3f); 0: never; N: the sm_90a extend launch is persistent on
                                   // at most num_sms - N CTAs, never KV-split, planned for that many
                                   // SMs, so N SMs are free from its start for the decode stage 1
                                   // launched after it (its programmatic dependent)
  int32_t decode_first = -1;       // -1: the policy (plan.cc, step 3g: per step, where the estimate
                                   // of that order beats the extend-first one); 0: the extend
                                   // launches first; 1: wherever the step allows it. The order: where
                                   // a split step's decode has no merge (one split a row) and the plan
                                   // is not graph-safe, the decode's stage 1 first and the extend as its
                                   // programmatic dependent, on the SMs the decode's last wave leaves
                                   // (1 needs pdl and excludes extend_leave_sms=N; plan_info's
                                   // decode_first per step)
};

// Most parts an item of a persistent sm_90a launch is cut into (each part parks a partial of
// block_rows x (head_dim + 8) floats in the arena; plan.cc chooses the cut).
constexpr int kExtendMaxItemParts = 4;

// The per-wrapper part of the policy: depends on the model and the device only.
struct LaunchPolicy {
  ExtendKernel extend_kernel = ExtendKernel::kHost;
  int32_t extend_block_rows = 0;    // query rows (query x packed head) per extend CTA
  int32_t extend_alt_block_rows = 0;  // sm_90a, head dim 128, 16-bit cache: the kernel's other
                                      // shape, which a step takes where the estimate finds it
                                      // faster (plan.cc, step 3e); 0: none or fixed by the request
  int32_t extend_alt_pack = 1;        // ... its q heads per tile, and its query tokens per tile:
  int32_t extend_alt_tile_tokens = 0; // extend_alt_block_rows / extend_alt_pack
  int32_t extend_pack = 1;          // q heads of one KV head packed into a CTA's rows
  int32_t extend_tile_tokens = 16;  // query tokens per extend tile: block_rows / pack
  int32_t extend_max_kv_splits = 1; // CTAs that may share one query tile (sm_90a: 2)
  bool extend_tma = false;          // sm_90a: interior K/V tiles by TMA, else cp.async
  bool extend_q_tma = false;        // sm_90a: Q tiles whose every row is a query by TMA, else cp.async
  bool extend_persistent = false;   // sm_90a: launches whose tiles are not KV-split may be persistent
                                    // (the planner's estimate decides: plan.cc, fastest_kv_splits) ...
  bool extend_persistent_fixed = false;  // ... or are, always (extend_persistent=1)
  int32_t extend_max_item_parts = 1;  // sm_90a persistent launches: items may be cut into up to this
                                      // many parts (1: never; the planner's estimate decides) ...
  bool extend_item_parts_fixed = false;  // ... or every item is cut into exactly that many
  int32_t extend_leave_sms = 0;     // SMs a persistent sm_90a extend launch leaves free (the request's) ...
  bool extend_leave_sms_auto = false;  // ... or, per step, the planner's choice (step 3f)
  DecodeKernel decode_kernel = DecodeKernel::kHost;
  bool decode_narrow_when_fits = false;  // tensor core chosen by the policy: a step whose decode rows
                                         // all fit the narrow kernel (launch pairs <= 8) runs it
  int32_t decode_max_q = 1;         // rows of up to this many new tokens go to the split-KV decode
                                    // (default: kDecodeDefaultPairs / group, benchmarks/RESULTS.md)
  int32_t decode_kv_pack = 1;       // kv heads a tensor-core decode CTA may read together (1 or 2;
                                    // each step: decode_step_kv_pack)
  bool pdl = false;                 // CUDA cc >= 9.0: decode stage 1 launches as the extend's
                                    // programmatic dependent, the merge as stage 1's (cuda/common/pdl.cuh)
  bool decode_first = false;        // the request's decode_first=1: the order wherever a step allows it ...
  bool decode_first_auto = false;   // ... or, per step, the planner's choice (step 3g)
};

// Largest divisor of the GQA group that fits in `rows`: the q heads packed
// into a CTA's rows (rows = query * pack + head).
MA_HOST_DEVICE inline int pack_factor(int group, int rows) {
  int p = group < rows ? group : rows;
  if (p < 1) return 1;
  while (group % p != 0) --p;
  return p;
}

// Query rows per CTA of each extend kernel at each head dim. The kernels' traits
// (extend/portable/kernel.cuh, extend/sm90/kernel.cuh) must agree: the instantiation files
// static_assert it, and the launchers reject a plan made for other rows.
MA_HOST_DEVICE constexpr int extend_mma_block_rows(int head_dim, bool hip) {
  // CUDA: 4 warps x 2 m16 tiles at d64, 8 warps x 1 at d128/d256. CDNA (64 KB of
  // LDS per workgroup): 4 waves x 2 at d64, 4 x 1 at d128/d256.
  return head_dim == 64 ? 128 : head_dim == 128 ? (hip ? 64 : 128) : head_dim == 256 ? (hip ? 64 : 128) : 0;
}
// Consumer warpgroups of the sm_90a kernel (64 query rows each; extend/sm90/traits.cuh says why):
// three share every K/V tile at d64/d128; at d256 O alone takes 128 registers a thread, so two.
// Lab builds may override them, on the C++ and the CUDA flags alike (the planner cuts the tiles).
#ifndef MA_SM90_D64_WGS
#define MA_SM90_D64_WGS 3
#endif
#ifndef MA_SM90_D128_WGS
#define MA_SM90_D128_WGS 3
#endif
#ifndef MA_SM90_D256_WGS
#define MA_SM90_D256_WGS 2
#endif
MA_HOST_DEVICE constexpr int extend_sm90_wgs(int head_dim) {
  return head_dim == 64 ? MA_SM90_D64_WGS : head_dim == 128 ? MA_SM90_D128_WGS : head_dim == 256 ? MA_SM90_D256_WGS : 0;
}
MA_HOST_DEVICE constexpr int extend_sm90_block_rows(int head_dim) { return 64 * extend_sm90_wgs(head_dim); }
// The second shape of the sm_90a kernel at head dim 128, 16-bit caches: two consumer warpgroups
// (128 query rows, the S/PV overlap on). It runs the short extends 13-18% faster than the
// default 192 rows (a row of 32 new tokens x a group of 4 fills it; a launch whose longest items
// set its time has shorter ones) and long ones 4-10% slower (half as many copied K/V bytes per
// FLOP again): benchmarks/RESULTS.md, session 20. The planner picks it per step by its estimate
// (plan.cc, step 3e). 0 where there is none (other head dims, a lab build already at 2).
MA_HOST_DEVICE constexpr int extend_sm90_alt_block_rows(int head_dim) {
  return head_dim == 128 && MA_SM90_D128_WGS == 3 ? 128 : 0;
}
// Ranks 1.. of a KV-split cluster park their partial state in rank 0's shared
// memory, which has room for one partial at every head dim: two splits at most
// (three measured slower where they fit: benchmarks/RESULTS.md). Whether a launch splits is
// the planner's step-cost estimate (step_cost.h).
constexpr int kSm90MaxKvSplits = 2;
// Decode-class rows: a row of q new tokens (speculative verify, q >= 2) runs on the split-KV
// decode kernels when q <= the policy's decode_max_q: its q x group (query, head) pairs are
// packed into 16-row MMA blocks, causal among the row's own new tokens. Beyond
// kDecodeMaxQueries a row goes to the extend kernel always.
constexpr int kDecodeMaxQueries = 16;
// (query, head) pairs of one kv head per MMA block (the M of mma.sync m16n8k16).
constexpr int kDecodeBlockRows = 16;
// The default decode_max_q: rows of at most this many (query, head) pairs are decode-class.
constexpr int kDecodeDefaultPairs = 32;
MA_HOST_DEVICE inline int decode_row_blocks(int q_len, int group) {
  return (q_len * group + kDecodeBlockRows - 1) / kDecodeBlockRows;
}
// Warps of the tensor-core stage 1 (its traits read this): 4, or 2 where a 3-stage ring of
// 256-wide bf16 rows must still fit 2 CTAs per SM.
MA_HOST_DEVICE constexpr int decode_tc_warps(int head_dim, bool kv_fp8) {
  return head_dim * (kv_fp8 ? 1 : 2) / 16 >= 32 ? 2 : 4;
}
// MMA blocks one tensor-core CTA serves (1, 2 or 4: its warps split between the blocks, so each
// K/V tile is read once for all of them): enough for the longest decode row of the launch, at
// most one block per warp. The portable stage 1 serves one block per CTA.
MA_HOST_DEVICE inline int decode_cta_blocks(int max_q, int group, int head_dim, bool kv_fp8, bool tensor_core) {
  if (!tensor_core) return 1;
  const int need = decode_row_blocks(max_q, group), warps = decode_tc_warps(head_dim, kv_fp8);
  const int m = need <= 1 ? 1 : (need <= 2 ? 2 : 4);
  return m < warps ? m : warps;
}
// CTAs per (decode row, kv head, split) for a row of q tokens.
MA_HOST_DEVICE inline int decode_row_ctas(int q_len, int group, int cta_blocks) {
  return (decode_row_blocks(q_len, group) + cta_blocks - 1) / cta_blocks;
}
// Kv heads one wide tensor-core stage-1 CTA reads (decode/stage1_tensor_core.cuh): two adjacent
// ones at head dim 64, as one 128-wide row of 256 contiguous bytes a key (a 16-bit NHD cache), their
// (query, head) pairs on the MMA's M side, each query zero outside its own head's half of the row.
// A head-dim-64 CTA over one kv head ran at 78-80% of the read floor on the H200 where head dim 128
// runs at 94% (benchmarks/RESULTS.md, session 22): it pays a tile's fixed work (barrier, softmax,
// page lookups) for half the bytes. A step packs where the policy allows it, its kv heads pair up and
// its longest row's pairs of both heads fit the 4 MMA blocks of a CTA (one-token rows up to a group
// of 32; at group 4 verify rows up to 8, so graph-safe and deterministic launches, sized by the
// policy's decode_max_q, pair too); the grid then has num_kv_heads / 2 kv-head slots of 2 * group
// pairs each. Each CTA still runs the body of the blocks its own row needs.
MA_HOST_DEVICE inline int decode_step_kv_pack(int policy_pack, int num_kv_heads, int launch_q, int group) {
  return policy_pack == 2 && num_kv_heads % 2 == 0 && launch_q * group * 2 <= 4 * kDecodeBlockRows ? 2 : 1;
}
// (query, head) pairs of one kv head the narrow stage 1 serves in a CTA (the N of its MMA).
constexpr int kDecodeNarrowPairs = kDecodeBlockRows / 2;
// Whether the policy's tensor-core choice runs the narrow kernel on steps it fits: at head dim
// 256, where it measured 7-11% faster than the wide one (64 rows at 4k, 16/8/256: its O^T is 64
// registers a thread against the wide kernel's 128). At head dim 128 the two were level within
// the run-to-run noise (32/8/128) or the wide one 4-6% faster (MQA, 8/1/128), so the wide one
// stays (benchmarks/RESULTS.md, session 12).
MA_HOST_DEVICE constexpr bool decode_narrow_by_default(int head_dim) { return head_dim >= 256; }
// Query tokens per tile of the CPU implementation (it has no tile shape; any works).
constexpr int kHostTileTokens = 16;

// Chooses the per-wrapper policy. Returns an empty string, or an error that
// names the request that cannot be honoured on this device (or the kernel the
// device cannot run: the HIP extend kernel needs hip_mfma).
std::string choose_launch_policy(const DeviceDesc& dev, int32_t head_dim, int32_t group_size, int32_t page_size,
                                 bool kv_fp8, const LaunchRequest& req, LaunchPolicy* out);

// Names for messages and for plan_info readers.
const char* extend_kernel_name(ExtendKernel k);
const char* decode_kernel_name(DecodeKernel k);

}  // namespace mixed_attn
