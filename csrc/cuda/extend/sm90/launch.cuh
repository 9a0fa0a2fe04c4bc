// Host side of the sm_90a extend kernel: the checks of the plan against the kernel's shape, the
// TMA maps when the plan asks for TMA, and the launch: the plan's extend_ctas CTAs when it makes
// the launch persistent (its costliest items possibly cut into parts, cut_merge.cuh), a cluster of
// kv_splits CTAs per item when it splits the tiles' K/V (kv_split_merge.cuh), else one CTA per item.
#pragma once
#include <cstdint>
#include <cstdlib>  // lab probe: getenv
#include <cstring>

#include "cuda/common/smem_optin.h"
#include "cuda/extend/args.cuh"
#include "cuda/extend/sm90/kernel.cuh"
#include "cuda/extend/sm90/tma_maps.h"
#include "cuda/extend/sm90/traits.cuh"
#include "mixed_attn/compat.h"
#include "mixed_attn/launch_policy.h"
#include "mixed_attn/params.h"

namespace mixed_attn::gpu::extend_detail {

// Host side: launch one instantiation (instantiated in extend/instantiate_hd{64,128,256}.cu) as
// the plan decided: its KV split per query tile and TMA or cp.async for K/V. kWGs: consumer
// warpgroups (the tile's rows / 64; the plan's extend_block_rows picks it). kFp8: the fp8 e4m3
// cache instantiation (cp.async only; the cache's scales applied).
template <int kHeadDim, int kWGs, typename T, bool kFp8>
const char* launch_extend_sm90_impl(const ExtendParams& p, gpuStream_t stream) {
  const AttentionCommon& a = p.attn;
  constexpr int kSmem = sm90_smem_bytes<kHeadDim, kWGs, kFp8>();
  constexpr int BM = Sm90Traits<kHeadDim, kWGs>::kBlockM;
  static_assert(BM == extend_sm90_block_rows(kHeadDim) || (BM == extend_sm90_alt_block_rows(kHeadDim) && !kFp8),
                "launch_policy.h must know the kernel's rows");
  if (a.plan.extend_block_rows != BM) return "extend: the plan's tiles were cut for another kernel shape";
  ExtendArgs args = make_extend_args(a, BM, kFp8 ? a.k_scale : 1.f, kFp8 ? a.v_scale : 1.f);
  const int64_t blocks = extend_grid_blocks(args);
  const int kv_splits = a.plan.extend_kv_splits;
  if (kv_splits < 1 || kv_splits > sm90_max_kv_splits<kHeadDim, kWGs>())
    return "extend: the plan's KV split count is outside what the sm_90a merge holds";
  // The merge runs once, after the last pass: a split plan must cover its tiles in one pass.
  if (kv_splits > 1 && a.plan.extend_tile_tokens > args.tile_capacity)
    return "extend: a KV-split plan needs tiles of at most one pass";
  if (blocks * kv_splits > 0x7fffffff) return "extend: too many (tile, head group) blocks for one launch";
  // Persistent launch: the plan's extend_ctas CTAs share the items out (Sm90Schedule).
  const int persistent_ctas = a.plan.extend_ctas;
  if (persistent_ctas < 0 || (persistent_ctas > 0 && kv_splits > 1))
    return "extend: the plan's persistent CTA count must be >= 0, and 0 under a KV split";
  // Cut items (cut_merge.cuh): parts of one pass each, in a persistent launch, with the arena
  // slots and counters the op layer found for them.
  const int64_t cut_items = a.plan.extend_cut_items;
  if (cut_items != 0) {
    if (cut_items < 0 || cut_items > blocks || a.plan.extend_item_parts < 2 ||
        a.plan.extend_item_parts > kExtendMaxItemParts || persistent_ctas == 0)
      return "extend: the plan's cut items must be a persistent launch's, of 2..4 parts";
    if (a.plan.extend_tile_tokens > args.tile_capacity) return "extend: a plan with cut items needs tiles of one pass";
    if (p.maybe_cut_partials == nullptr || p.maybe_cut_counters == nullptr)
      return "extend: the plan cuts items but no arena slots / counters were given for their parts";
    if (blocks + cut_items * (a.plan.extend_item_parts - 1) > 0x7fffffff)
      return "extend: too many units for one launch";
    args.cut_partials = p.maybe_cut_partials;
    args.cut_counters = p.maybe_cut_counters;
  }
#if MA_SM90_LAB_STREAM
  if (const char* copies = std::getenv("MA_LAB_STREAM_COPIES")) args.lab_stream_copies = std::atoi(copies);
  if (const char* nb = std::getenv("MA_LAB_STREAM_NONBLOCK")) args.lab_stream_nonblocking = std::atoi(nb) != 0;
  const int64_t lab_chunks = a.num_pages * a.k_stride_page * int64_t(sizeof(T)) / kLabStreamBytes;
  if (lab_chunks < 1 || lab_chunks >= (int64_t(1) << 31)) return "extend: lab stream probe: cache size out of range";
  uint32_t lab_pow2 = 1;
  while (int64_t(lab_pow2) * 2 <= lab_chunks) lab_pow2 *= 2;
  args.lab_stream_chunk_mask = lab_pow2 - 1;
#endif
  Sm90TmaMaps maps;
  std::memset(&maps, 0, sizeof(maps));
  const bool use_tma = a.plan.extend_tma != 0;
  if (kFp8 && use_tma) return "extend: the plan asks for TMA on an fp8 cache (the sm_90a fp8 path is cp.async only)";
  if (use_tma && !kFp8) {
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
  // Q by TMA (the kernel takes it for tiles whose every row is a query): boxes of the plan's pack
  // heads x the tile's tokens, so that one box is one 64-column piece of the whole tile.
  if (a.plan.extend_q_tma != 0) {
#if defined(MA_CUDA)
    if (args.pack * args.tile_capacity == BM && !encode_q_map<T>(&maps.q, a, args.pack, args.tile_capacity))
      return "extend: the plan asks for Q by TMA but q's tensor map could not be encoded (q's address and strides "
             "must be multiples of 16 bytes; plan with extend_q_tma=0)";
#else
    return "extend: the plan asks for Q by TMA but this build has no TMA path (plan with extend_q_tma=0)";
#endif
  }
  using Kernel = decltype(&extend_sm90_kernel<kHeadDim, kWGs, T, false, false>);
  Kernel kernel;
  if constexpr (kFp8) kernel = extend_sm90_kernel<kHeadDim, kWGs, T, false, true>;
  else
    kernel = use_tma ? extend_sm90_kernel<kHeadDim, kWGs, T, true, false>
                     : extend_sm90_kernel<kHeadDim, kWGs, T, false, false>;
  const char* smem_err = opt_in_dynamic_smem(reinterpret_cast<const void*>(kernel), kSmem);
  if (smem_err != nullptr) return smem_err;
#if MA_SM90_D128_MAXNREG > 0
  lab_prefer_max_smem_carveout(reinterpret_cast<const void*>(kernel));  // room for a decode CTA beside it
#endif
  if (kv_splits == 1) {
    const int64_t grid = persistent_ctas > 0 ? persistent_ctas : blocks;
    // After the decode's stage 1 (plan.decode_first): its programmatic dependent. The extend reads
    // nothing stage 1 writes, and the KV save completed before stage 1 started.
    const char* err =
        launch_maybe_programmatic(kernel, dim3(unsigned(grid)), dim3(Sm90Traits<kHeadDim, kWGs>::kThreads), kSmem,
                                  stream, p.follows_decode != 0 && a.plan.pdl != 0, args, 1, maps);
    if (err != nullptr) return err;
    MA_RETURN_LAUNCH_STATUS();
  }
#if defined(MA_CUDA)
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(unsigned(blocks * kv_splits));
  config.blockDim = dim3(Sm90Traits<kHeadDim, kWGs>::kThreads);
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
