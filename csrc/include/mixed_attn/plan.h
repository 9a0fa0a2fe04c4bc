// The host-side planner: one call per serving step, from host lengths only.
//
// Plain C++ (no torch, no CUDA). It partitions the batch into extend rows and
// decode rows, chooses each decode row's KV split count, lays out the arena
// slots of the split partials, builds the extend work list, and writes all of
// it into one int32 metadata buffer that the caller copies to the device with
// a single async copy. It also returns `plan_info`, a small int64 vector of
// counts and offsets that the op layer passes to the kernels.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "mixed_attn/launch_policy.h"
#include "mixed_attn/params.h"

namespace mixed_attn {

enum class DispatchMode : int32_t {
  kSplit = 0,  // extend rows -> extend kernel, decode rows -> split-KV decode
  kFold = 1,   // every row through the extend kernel (baseline, kill switch)
  kAuto = 2,   // per step the one the step-cost estimate (step_cost.h) finds faster; a plan
               // records the concrete mode. Graph-safe and deterministic plans: split always (a
               // captured geometry, and a decode row's bits, must not depend on the batch)
};

struct PlanConfig {
  int32_t page_size = 1;
  int32_t num_qo_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t window_left = -1;          // -1: no window; decode splits skip keys outside it
  DispatchMode mode = DispatchMode::kSplit;
  bool deterministic = false;        // fixed-size splits: batch-invariant decode rows
  int32_t fixed_split_tokens = 2048; // keys per split in deterministic mode
  int32_t max_splits_per_row = 32;   // cap of the SM-aware policy
  int32_t min_split_tokens = 256;    // SM-aware policy never splits finer than this
  int32_t ctas_per_sm = 2;           // SM-aware policy aims for this many decode CTAs per SM
  bool kv_fp8 = false;               // the cache is float8_e4m3 (the sm_90a extend kernel: head dims 64 / 128)
  DeviceDesc device;                 // what the plan is launched on
  LaunchRequest request;             // the wrapper's overrides of the launch policy
  // Graph-safe plans: a metadata layout and launch geometry that depend on these bucket
  // limits only, never on one step's lengths (a plan over the limits is an error).
  bool graph_safe = false;
  int32_t graph_max_rows = 0;         // rows of any plan
  int32_t graph_max_tokens = 0;       // tokens of any plan
  int32_t graph_max_extend_tokens = 0;  // tokens of the rows the extend kernel serves
  int32_t graph_max_partials = 0;     // decode partials (arena slots); 0: the policy's bound
  int32_t graph_max_kv_pages = 0;     // page ids a captured kv_indices holds; 0: not captured yet
  int64_t meta_capacity = 0;         // int32 entries the metadata buffer holds
};

// PlanConfig travels from Python to the plan op as one int list, in this order
// (names exported by torch.ops.mixed_attn.plan_field_names("config")).
enum PlanConfigField : int32_t {
  kCfgPageSize = 0,
  kCfgNumQoHeads,
  kCfgNumKvHeads,
  kCfgHeadDim,
  kCfgWindowLeft,
  kCfgMode,
  kCfgDeterministic,
  kCfgFixedSplitTokens,
  kCfgMaxSplitsPerRow,
  kCfgMinSplitTokens,
  kCfgCtasPerSm,
  kCfgKvFp8,
  kCfgDeviceKind,
  kCfgDeviceArch,
  kCfgNumSms,
  kCfgDeviceSm90Extend,
  kCfgDeviceTmaEncoder,
  kCfgDeviceHipMfma,
  kCfgExtendKernel,
  kCfgDecodeKernel,
  kCfgExtendKvSplits,
  kCfgExtendTma,
  kCfgExtendTileTokens,
  kCfgGraphSafe,
  kCfgGraphMaxRows,
  kCfgGraphMaxTokens,
  kCfgGraphMaxExtendTokens,
  kCfgGraphMaxPartials,
  kCfgGraphMaxKvPages,
  kCfgDecodeMaxQ,
  kCfgExtendPersistent,
  kCfgExtendItemParts,
  kCfgPdl,
  kCfgExtendBlockRows,
  kCfgExtendQTma,
  kCfgDecodeKvPack,
  kCfgExtendLeaveSms,
  kCfgDecodeFirst,
  kCfgNumFields
};

// Names of the PlanConfigField / PlanInfoField entries, in order (for the Python view).
const char* const* plan_config_field_names();
const char* const* plan_info_field_names();

// Decodes a config list (kCfgNumFields entries). Returns an empty string or
// what is wrong, naming the field.
std::string config_from_list(const int64_t* values, int64_t len, PlanConfig* cfg);

// The per-wrapper launch policy of a config (kernel families, tile, TMA).
std::string config_launch_policy(const PlanConfig& cfg, LaunchPolicy* out);

// Indices into plan_info (int64). python/mixed_attn/plan_info.py reads the names
// from plan_info_field_names(): add a field here and there, nowhere else.
enum PlanInfoField : int32_t {
  kPlanMagic = 0,          // kPlanMagicValue: catches a list that is not a plan
  kPlanNumRows,            // B
  kPlanNumTokens,          // T
  kPlanMode,               // DispatchMode
  kPlanNumDecodeRows,      // Nd
  kPlanNumExtendRows,      // rows served by the extend kernel
  kPlanNumExtendTiles,     // Nt
  kPlanExtendTileTokens,
  kPlanNumPartials,        // arena slots this plan needs
  kPlanMaxSplits,
  kPlanMetaLen,            // int32 entries used in the metadata buffer
  kPlanOffQoIndptr,        // offsets (in int32 entries) of each array in the buffer
  kPlanOffKvIndptr,
  kPlanOffSeqLens,
  kPlanOffDecodeRows,
  kPlanOffDecodeSplitIndptr,
  kPlanOffDecodeKvStart,
  kPlanOffDecodeChunkTokens,
  kPlanOffExtendTiles,
  kPlanNumKvPages,         // kv_indptr[B]: kv_indices must hold at least this many
  kPlanPageSize,
  kPlanNumQoHeads,
  kPlanNumKvHeads,
  kPlanHeadDim,
  kPlanWindowLeft,
  kPlanDeterministic,
  kPlanMaxQLen,            // longest extend_len of any row
  kPlanMaxSeqLen,          // longest seq_len of any row
  kPlanExtendKernel,       // ExtendKernel the extend tiles run on
  kPlanExtendBlockRows,    // query rows per extend CTA (the kernel's tile)
  kPlanExtendKvSplits,     // CTAs (of one cluster) sharing each extend query tile
  kPlanExtendTma,          // 1: sm_90a interior K/V tiles by TMA
  kPlanDecodeKernel,       // DecodeKernel of the decode rows
  kPlanOffCounts,          // offset of the PlanCount header (both kinds of plan)
  kPlanKvFp8,              // 1: planned for a float8_e4m3 cache (the kernels chosen depend on it)
  kPlanGraphSafe,          // 1: the layout and launch geometry are the bucket's (below)
  kPlanGraphMaxRows,
  kPlanGraphMaxTokens,
  kPlanGraphMaxTiles,
  kPlanGraphMaxPartials,
  kPlanDecodeMaxQ,         // bound of any decode row's query count for the launch (row blocks,
                           // kernel variant): the step's largest, or the policy's decode_max_q in
                           // graph-safe and deterministic plans (a launch shape that never depends
                           // on the batch)
  kPlanDecodeMaxQPolicy,   // the policy's decode_max_q: rows of up to this many tokens are decode rows
  kPlanDecodeCtaBlocks,    // 16-pair MMA blocks one decode CTA serves (decode_cta_blocks)
  kPlanModeRequested,      // the config's DispatchMode (kAuto: kPlanMode is the one chosen)
  kPlanEstSplitNs,         // mode auto: the step-cost estimate of the step split / folded (ns of
  kPlanEstFoldNs,          // one layer); 0 where no choice was made
  kPlanExtendCtas,         // > 0: the sm_90a extend launch is persistent with this many CTAs
                           // (about one per SM), each serving a share of the (tile, head group)
                           // items; 0: one CTA per item (a graph-safe plan: the bucket's count)
  kPlanExtendCutItems,     // the persistent launch's costliest items cut into parts (0: none) ...
  kPlanExtendItemParts,    // ... of this many parts each (1: none)
  kPlanExtendCutSlot0,     // first arena slot of the parts' partials (after the decode partials)
  kPlanOffExtendCutCounters,  // [cut items] int32 counters of each cut item's finished parts (0)
  kPlanPdl,                // 1: the decode launches as programmatic dependents (cuda/common/pdl.cuh)
  kPlanExtendQTma,         // 1: sm_90a full Q tiles by TMA (launch_policy.h, LaunchPolicy::extend_q_tma)
  kPlanDecodeKvPack,       // kv heads one decode CTA reads (launch_policy.h, decode_step_kv_pack)
  kPlanExtendLeaveSms,     // SMs the persistent extend launch leaves to the decode (plan.cc, step 3f)
  kPlanDecodeFirst,        // 1: the decode's stage 1 launches before the extend (launch_policy.h)
  kPlanNumFields
};
constexpr int64_t kPlanMagicValue = 0x6d69786564;  // "mixed"

// Host inputs of one step. Arrays are host memory, int32.
struct PlanInputs {
  const int32_t* qo_indptr;  // [B+1]
  const int32_t* kv_indptr;  // [B+1] page offsets
  const int32_t* seq_lens;   // [B]
  int32_t num_rows;          // B
};

struct PlanResult {
  bool ok = false;
  std::string error;               // set when !ok: names the offending argument
  std::vector<int64_t> info;       // kPlanNumFields entries
  // meta is written into the caller's buffer (meta_out) when ok.
};

// Size in int32 entries of the metadata buffer for a batch of B rows and T
// tokens (a graph-safe plan of that bucket uses exactly this much).
// head_groups: the extend items a tile holds (Hq / pack), for the counters of cut items (0: no
// room for them; the planner cuts only as many items as the buffer has room for).
int64_t plan_meta_capacity(int64_t max_rows, int64_t max_tokens, int64_t extend_tile_tokens, int64_t head_groups);

// Bounds of a graph-safe bucket, derived from its config (launch geometry of every plan
// made with it): extend tiles, decode partials. Empty string or what is wrong.
struct GraphBounds {
  int64_t max_tiles = 0;
  int64_t max_partials = 0;
};
std::string graph_bounds(const PlanConfig& cfg, const LaunchPolicy& policy, GraphBounds* out);

// Plans one step. Writes the metadata into meta_out[0 : info[kPlanMetaLen]].
// Never touches meta_out when it returns !ok.
PlanResult plan_step(const PlanConfig& cfg, const PlanInputs& in, int32_t* meta_out);

// Builds a PlanView over a metadata buffer laid out by plan_step (host or
// device pointer `meta`, same layout).
PlanView plan_view(const int64_t* info, const int32_t* meta);

// Checks that `info` is a plan: right length, magic, and offsets inside
// meta_len. Returns an empty string when it is, else what is wrong.
std::string check_plan_info(const int64_t* info, int64_t len);

}  // namespace mixed_attn
