// The TMA tensor maps of the sm_90a extend kernel: the kernel-parameter type that carries the
// descriptors of q and of the K and V caches, and their encoding on the host (launch.cuh calls
// it when the plan asks for TMA). The kernel's TMA copies are in producer.cuh.
#pragma once
#include <cstdint>
#include <type_traits>

#include "cuda/arch/tma_encoder.h"
#include "mixed_attn/compat.h"
#include "mixed_attn/params.h"
#if defined(MA_CUDA)
#include <cuda.h>  // CUtensorMap and its encoder's types (the encoder is fetched at run time)
#endif

namespace mixed_attn::gpu::extend_detail {

// The TMA descriptors of q and of the K and V caches (kernel parameters). On HIP a
// placeholder of the same size: the sm_90a kernel is never launched there.
#if defined(MA_CUDA)
using TmaMap = CUtensorMap;
#define MA_GRID_CONSTANT __grid_constant__
#else
struct alignas(64) TmaMap { unsigned long long opaque[16]; };
#define MA_GRID_CONSTANT
#endif
struct Sm90TmaMaps { TmaMap q, k, v; };
// Keys per TMA box: 16 keys of one page (the launcher uses TMA only for page sizes
// that are multiples of 16).
constexpr int kTmaBoxKeys = 16;

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
  return encode(map, type, 4, const_cast<void*>(cache), dims, strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// q [q_tokens, Hq, D] as a 3-D TMA tensor (innermost first: D, Hq, token) with boxes of
// (64 columns, pack heads, tile_tokens tokens): one box is one 64-column piece of a Q tile
// whose rows (query x packed head, the kernel's row order) all hold queries, landing in the
// 128-byte swizzle as the tile's rows 0..pack * tile_tokens - 1. False when the driver, the
// box or the strides (multiples of 16 bytes) do not allow it.
template <typename T>
bool encode_q_map(CUtensorMap* map, const AttentionCommon& a, int pack, int tile_tokens) {
  const TensorMapEncodeFn encode = tensor_map_encoder();
  if (encode == nullptr || a.q_tokens < 1 || pack < 1 || pack > 256 || tile_tokens < 1 || tile_tokens > 256 ||
      a.head_dim % 64 != 0 || reinterpret_cast<uintptr_t>(a.q) % 16 != 0)
    return false;
  constexpr int64_t kElem = sizeof(T);
  const cuuint64_t dims[3] = {cuuint64_t(a.head_dim), cuuint64_t(a.num_qo_heads), cuuint64_t(a.q_tokens)};
  const cuuint64_t strides[2] = {cuuint64_t(a.q_stride_head * kElem), cuuint64_t(a.q_stride_token * kElem)};
  for (cuuint64_t st : strides)
    if (st % 16 != 0 || st >= (cuuint64_t(1) << 40)) return false;
  const cuuint32_t box[3] = {64, cuuint32_t(pack), cuuint32_t(tile_tokens)};
  const cuuint32_t elem_strides[3] = {1, 1, 1};
  const CUtensorMapDataType type =
      std::is_same<T, ma_bf16>::value ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  return encode(map, type, 3, const_cast<void*>(a.q), dims, strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}
#endif

}  // namespace mixed_attn::gpu::extend_detail
