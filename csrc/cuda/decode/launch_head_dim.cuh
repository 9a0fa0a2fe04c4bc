// Host side of the decode for one head dim: picks the stage-1 instantiation
// (kernel x q dtype x cache dtype x rows per block), launches it over (split, kv head x
// block of (query, head) pairs, decode row), then the merge for rows with more
// than one split.
// Included by one decode/instantiate_hd*.cu per head dim so the builds run in parallel.
#pragma once
#include "cuda/build_variants.h"
#include "cuda/common/pdl.cuh"
#include "cuda/common/smem_optin.h"
#include "cuda/decode/common.cuh"
#include "cuda/decode/stage1_narrow.cuh"
#include "cuda/decode/stage1_portable.cuh"
#include "cuda/decode/stage1_tensor_core.cuh"

namespace mixed_attn::gpu::decode {

template <auto kKernel>
const char* launch_stage1(int smem_bytes, int threads, dim3 grid, const DecodeParams& p, const DecodeConsts& c,
                          gpuStream_t stream) {
  // The 48 KB a launch gets without the opt-in covers static and dynamic shared memory
  // together, and the tensor-core stage 1 declares some of its own (part_m / part_l, well under
  // 1 KB): a dynamic size near 48 KB needs the opt-in too.
  constexpr int kStaticSmemAllowance = 1024;
  if (smem_bytes + kStaticSmemAllowance > 48 * 1024) {
    const char* err = opt_in_dynamic_smem(reinterpret_cast<const void*>(kKernel), smem_bytes);
    if (err != nullptr) return err;
  }
#if (defined(MA_DECODE_MIN_CTAS_PER_SM) || defined(MA_DECODE_NARROW_MAXNREG)) && defined(MA_CUDA)
  lab_prefer_max_smem_carveout(reinterpret_cast<const void*>(kKernel));  // so a decode CTA fits beside an extend CTA
#endif
  // Stage 1 reads only what the KV save wrote, which completed before the extend started: as the
  // extend's programmatic dependent it needs no wait (cuda/common/pdl.cuh).
  const bool programmatic = p.attn.plan.pdl != 0 && p.follows_extend != 0;
  return launch_maybe_programmatic(kKernel, grid, dim3(threads), smem_bytes, stream, programmatic, p, c);
}

#if defined(MA_CUDA)
template <int D, typename QT, bool kFp8, int kBlocks, bool kTwoHalves, int kKvPack = 1>
const char* launch_tc_variant(dim3 grid, const DecodeParams& p, const DecodeConsts& c, gpuStream_t stream) {
  using Tr = TcTraits<D, kFp8, kBlocks, kKvPack>;
  return launch_stage1<decode_split_tc_kernel<D, QT, kFp8, kTwoHalves, kBlocks, kKvPack>>(Tr::kSmemBytes, Tr::kThreads,
                                                                                          grid, p, c, stream);
}

template <int D, typename QT, bool kFp8>
const char* launch_tc(int blocks, bool two_halves, dim3 grid, const DecodeParams& p, const DecodeConsts& c,
                      gpuStream_t stream) {
  // Two kv heads a CTA (head dim 64): one 128-wide row (launch_decode checks).
  if constexpr (D == 64) {
    if (c.kv_pack == 2) {
      switch (blocks) {
        case 1:
          return two_halves ? launch_tc_variant<2 * D, QT, kFp8, 1, true, 2>(grid, p, c, stream)
                            : launch_tc_variant<2 * D, QT, kFp8, 1, false, 2>(grid, p, c, stream);
        case 2: return launch_tc_variant<2 * D, QT, kFp8, 2, true, 2>(grid, p, c, stream);
        case 4: return launch_tc_variant<2 * D, QT, kFp8, 4, true, 2>(grid, p, c, stream);
        default: return "decode: the plan's blocks per CTA must be 1, 2 or 4";
      }
    }
  }
  constexpr int kMaxBlocks = TcTraits<D, kFp8>::kWarps;  // one block per warp at most
  if (blocks > kMaxBlocks) return "decode: the plan's blocks per CTA exceed this head dim's warps";
  switch (blocks) {
    case 1:
      return two_halves ? launch_tc_variant<D, QT, kFp8, 1, true>(grid, p, c, stream)
                        : launch_tc_variant<D, QT, kFp8, 1, false>(grid, p, c, stream);
    case 2: return launch_tc_variant<D, QT, kFp8, 2, true>(grid, p, c, stream);
    case 4:
      if constexpr (kMaxBlocks >= 4) return launch_tc_variant<D, QT, kFp8, 4, true>(grid, p, c, stream);
      [[fallthrough]];
    default: return "decode: the plan's blocks per CTA must be 1, 2 or 4";
  }
}
#endif

template <int D, typename QT>
const char* launch_stage1_typed(const DecodeParams& p, const DecodeConsts& c, dim3 grid, DecodeKernel kernel,
                                gpuStream_t stream) {
  const bool fp8 = p.attn.kv_dtype == DType::kFloat8E4M3;
  const bool portable = kernel == DecodeKernel::kPortable;
#if defined(MA_NO_FP8)
  if (fp8) return "this build has no kernels for float8_e4m3fn caches (MIXED_ATTN_FP8=OFF)";
#endif
#if defined(MA_CUDA)
  if (kernel == DecodeKernel::kTensorCoreNarrow) {
#if !defined(MA_NO_FP8)
    if (fp8) {
      using Tr = NarrowTraits<D, true>;
      return launch_stage1<decode_split_narrow_kernel<D, QT, true>>(Tr::kSmemBytes, Tr::kThreads, grid, p, c, stream);
    }
#endif
    using Tr = NarrowTraits<D, false>;
    return launch_stage1<decode_split_narrow_kernel<D, QT, false>>(Tr::kSmemBytes, Tr::kThreads, grid, p, c, stream);
  }
  if (!portable) {
    // Both 8-row halves of the MMA when a block can hold more than 8 (query, head) pairs; the
    // plan's blocks per CTA (decode_cta_blocks) pick the rest.
    const bool two_halves = p.attn.plan.decode_max_q * c.group > 8;
    const int blocks = p.attn.plan.decode_cta_blocks;
#if !defined(MA_NO_FP8)
    if (fp8) return launch_tc<D, QT, true>(blocks, two_halves, grid, p, c, stream);
#endif
    return launch_tc<D, QT, false>(blocks, two_halves, grid, p, c, stream);
  }
#else
  (void)portable;
#endif
#if !defined(MA_NO_FP8)
  if (fp8) return launch_stage1<decode_split_portable_kernel<D, QT, uint8_t>>(0, kPortableThreads, grid, p, c, stream);
#endif
  return launch_stage1<decode_split_portable_kernel<D, QT, QT>>(0, kPortableThreads, grid, p, c, stream);
}

template <int D>
const char* launch_decode_head_dim(const DecodeParams& p, DecodeKernel kernel, gpuStream_t stream) {
  const AttentionCommon& a = p.attn;
  const DecodeConsts c = make_consts(a);
  // Normal plans: (split, (kv-head slot, pair block), decode row). Graph-safe plans: (arena slot
  // of the bucket, (kv-head slot, pair block), 1); see load_split_view.
  const bool graph = a.plan.maybe_counts != nullptr;
  const int heads = a.num_kv_heads / c.kv_pack * c.row_blocks;
  if (graph && a.plan.graph_max_partials == 0) return nullptr;
  const dim3 grid =
      graph ? dim3(a.plan.graph_max_partials, heads, 1) : dim3(a.plan.max_splits, heads, a.plan.num_decode_rows);
  const bool bf16 = a.q_dtype == DType::kBFloat16;
  const char* err = bf16 ? launch_stage1_typed<D, ma_bf16>(p, c, grid, kernel, stream)
                         : launch_stage1_typed<D, ma_half>(p, c, grid, kernel, stream);
  if (err != nullptr) return err;
  // Rows with one split were written by stage 1; a graph-safe bucket that can split
  // always launches the merge (the step's rows may split), which skips those rows.
  const bool may_split = graph ? a.plan.graph_max_partials > 1 : a.plan.max_splits > 1;
  if (may_split) {
    constexpr int kWarpsPerBlock = 4;
    const int items = (graph ? a.plan.graph_max_rows : a.plan.num_decode_rows) * a.num_qo_heads;
    const dim3 merge_grid((items + kWarpsPerBlock - 1) / kWarpsPerBlock);
    // As stage 1's programmatic dependent the merge launches during stage 1's last wave and
    // waits for it (griddepcontrol.wait) before its first read.
    const bool programmatic = p.attn.plan.pdl != 0;
    const dim3 block(kWarpsPerBlock * kWarpSize);
    err =
        bf16
            ? launch_maybe_programmatic(decode_merge_kernel<D, ma_bf16>, merge_grid, block, 0, stream, programmatic, p)
            : launch_maybe_programmatic(decode_merge_kernel<D, ma_half>, merge_grid, block, 0, stream, programmatic, p);
    if (err != nullptr) return err;
  }
  MA_RETURN_LAUNCH_STATUS();
}

}  // namespace mixed_attn::gpu::decode
