// Parameter structs for every kernel family of mixed_attn.
//
// Plain C++: no torch, no CUDA headers. Filled on the host by the binding layer
// (csrc/torch/), passed by value to the CPU implementation and to the CUDA
// launchers. Strides are in elements, never bytes; the last dimension of every
// tensor is contiguous (checked by the binding layer).
#pragma once
#include <cstdint>

namespace mixed_attn {

// Element types that cross the params boundary.
enum class DType : int32_t {
  kFloat32 = 0,
  kFloat16 = 1,
  kBFloat16 = 2,
  kFloat8E4M3 = 3,  // e4m3fn (no inf, max 448): only for the KV cache
};

// Counts of a step that graph-safe plans keep in device memory (PlanView.maybe_counts),
// so that a captured launch reads the counts of the plan it is replayed with.
enum PlanCount : int32_t {
  kCountRows = 0,     // B
  kCountTokens,       // T
  kCountDecodeRows,   // Nd
  kCountExtendTiles,  // Nt
  kCountPartials,     // decode arena slots used: decode_split_indptr[Nd] (cut extend items' not counted)
  kNumCounts
};

// Read-only view of one plan's metadata buffer (see plan.h for the layout).
// The pointers live where the kernels run: device memory for CUDA, host
// memory for the CPU implementation.
struct PlanView {
  const int32_t* qo_indptr;            // [B+1] query token offsets per row
  const int32_t* kv_indptr;            // [B+1] page-list offsets into kv_indices
  const int32_t* seq_lens;             // [B]   prefix_len + extend_len
  const int32_t* decode_rows;          // [Nd]  batch row of each decode row
  const int32_t* decode_split_indptr;  // [Nd+1] arena slot offsets; a row of q new tokens and n
                                       // splits holds q * n slots: slot(s, i) = first + s * q + i
                                       // for split s, query i (n = diff / q)
  const int32_t* decode_kv_start;      // [Nd]  first key position its first query attends (window)
  const int32_t* decode_chunk_tokens;  // [Nd]  keys per split (last split may be short)
  const int32_t* extend_tiles;         // [Nt][2] (row, first query index in the row)
  int32_t num_rows;                    // B
  int32_t num_tokens;                  // T
  int32_t num_decode_rows;             // Nd
  int32_t num_extend_tiles;            // Nt
  int32_t extend_tile_tokens;          // query tokens per extend tile
  int32_t num_partials;                // sum of decode splits: arena slots used
  int32_t max_splits;                  // largest split count of any decode row
  int32_t deterministic;               // 1: batch-invariant results (no work splitting that
                                       // depends on the size of the launch)
  // Launch decisions of the plan (launch_policy.h); launchers follow them.
  int32_t extend_kernel;               // ExtendKernel
  int32_t extend_block_rows;           // query rows per extend CTA the tiles were cut for
  int32_t extend_kv_splits;            // CTAs of one cluster per extend query tile (sm_90a)
  int32_t extend_tma;                  // 1: interior K/V tiles by TMA (sm_90a)
  int32_t extend_q_tma;                // 1: full Q tiles by TMA (sm_90a)
  int32_t extend_ctas;                 // > 0: a persistent sm_90a launch of this many CTAs sharing
                                       // the (tile, head group) items out; 0: one CTA per item
  int32_t extend_cut_items;            // persistent launches: its costliest items run in parts
  int32_t extend_item_parts;           // ... of this many (ExtendParams: their partials, counters)
  int32_t decode_kernel;               // DecodeKernel
  int32_t decode_max_q;                // no decode row of the launch has more query tokens (>= 1)
  int32_t decode_cta_blocks;           // 16-pair MMA blocks per decode CTA (1, 2 or 4)
  int32_t decode_kv_pack;              // kv heads per tensor-core decode CTA (1, or 2: head dim 64)
  int32_t pdl;                         // 1: the decode launches as programmatic dependents (cuda/common/pdl.cuh)
  int32_t decode_first;                // 1: the decode's stage 1 first, the extend as its programmatic dependent
  // Graph-safe plans (MixedAttention(cuda_graph=True)): the launch geometry is the bucket's,
  // fixed when the wrapper is built; kernels read the step's counts from maybe_counts and
  // CTAs past them exit. Null (and the graph_* fields 0) otherwise: counts are the ints above.
  const int32_t* maybe_counts;         // [kNumCounts] in device memory, or null
  int32_t graph_max_rows;              // grid bounds of a graph-safe plan: rows / tokens ...
  int32_t graph_max_tokens;
  int32_t graph_max_tiles;             // ... extend tiles ...
  int32_t graph_max_partials;          // ... decode partials (arena slots)
};

// What every attention kernel reads: queries, paged cache, output, options.
struct AttentionCommon {
  const void* q;             // [T, Hq, D]
  int64_t q_stride_token;
  int64_t q_stride_head;
  const void* k_cache;       // [num_pages, page_size, Hkv, D]
  const void* v_cache;       // [num_pages, page_size, Hkv, D]
  int64_t k_stride_page, k_stride_slot, k_stride_head;
  int64_t v_stride_page, v_stride_slot, v_stride_head;
  int64_t num_pages;         // pages in each cache (bounds of the sm_90a kernel's TMA maps); 0: unknown
  int64_t q_tokens;          // rows of q (the bound of the sm_90a kernel's Q map: the tensor's, which a
                             // graph-safe plan's replays may use up to, not this plan's T)
  const int32_t* kv_indices; // [kv_indptr[B]] page ids
  void* out;                 // [T, Hq, D]
  int64_t out_stride_token;
  int64_t out_stride_head;
  float* maybe_lse;          // [T, Hq] fp32 natural-log LSE (sink included), or null
  int64_t lse_stride_token;
  const float* maybe_sinks;  // [Hq] fp32 sink logits (units of the scaled score), or null
  int32_t num_qo_heads;      // Hq
  int32_t num_kv_heads;      // Hkv; Hq % Hkv == 0
  int32_t head_dim;          // D
  int32_t page_size;
  float sm_scale;            // score = q.k * sm_scale
  float logit_cap;           // > 0: score = cap * tanh(score / cap)
  int32_t window_left;       // >= 0: keys j >= p - window_left only
  float k_scale;             // fp8 cache: k = k_cache * k_scale (1 otherwise)
  float v_scale;
  DType q_dtype;             // also the dtype of out
  DType kv_dtype;            // == q_dtype or kFloat8E4M3
  PlanView plan;
};

// KV save: write the new tokens' keys and values into the paged cache.
struct SaveKVParams {
  const void* k;             // [T, Hkv, D], dtype q_dtype
  const void* v;             // [T, Hkv, D]
  int64_t k_stride_token, k_stride_head;
  int64_t v_stride_token, v_stride_head;
  void* k_cache;             // [num_pages, page_size, Hkv, D], dtype kv_dtype
  void* v_cache;
  int64_t kc_stride_page, kc_stride_slot, kc_stride_head;
  int64_t vc_stride_page, vc_stride_slot, vc_stride_head;
  const int32_t* kv_indices;
  float k_scale;             // fp8 cache stores k / k_scale (a true division, as the reference)
  float v_scale;
  int32_t num_kv_heads, head_dim, page_size;
  DType src_dtype, kv_dtype;
  PlanView plan;
};

// Extend kernel: every tile of plan.extend_tiles, queries over prefix + causal new.
struct ExtendParams {
  AttentionCommon attn;
  // A plan with cut items (plan.extend_cut_items > 0), else null: the parts' partials (the arena
  // from the plan's extend_cut_slot0 on) and each cut item's counter of finished parts (in the
  // plan's metadata: zero as uploaded, and again after every launch).
  float* maybe_cut_partials;
  int32_t* maybe_cut_counters;
  int32_t follows_decode;  // 1: the op layer launched the decode's stage 1 just before, on the same
                           // stream (plan.decode_first): the extend launches as its programmatic dependent
};

// Split-KV decode: stage 1 writes one partial (normalised output + LSE) per
// (decode row, split, q head) into the arena; stage 2 merges them into out.
struct DecodeParams {
  AttentionCommon attn;
  float* partial_out;        // [num_partials, Hq, D] fp32 arena slice
  float* partial_lse;        // [num_partials, Hq] fp32 arena slice; -inf = no key
  int32_t follows_extend;    // 1: the op layer launched the extend kernel just before, on the same
                             // stream (with plan.pdl, stage 1 launches as its programmatic dependent)
};

}  // namespace mixed_attn
