// Host planner: see mixed_attn/plan.h for the contract.
#include "mixed_attn/plan.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <sstream>

#include "mixed_attn/step_cost.h"

namespace mixed_attn {
namespace {

// A rejected plan: the error, no info, nothing written.
PlanResult& failed(PlanResult& r, std::string error) {
  r.error = std::move(error);
  r.info.clear();
  return r;
}

// The per-row loops run over non-negative int32 values: 32-bit unsigned division is several
// times cheaper than 64-bit, and the loops are most of plan()'s cost for large batches.
inline int32_t ceil_div32(int32_t a, int32_t b) {
  const uint32_t q = uint32_t(a) / uint32_t(b);
  return int32_t(q + (q * uint32_t(b) != uint32_t(a)));
}
int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

// First key position a decode row needs: the window's left edge for its first
// query, aligned down to a page so that splits start on page boundaries.
int32_t decode_kv_start(int32_t seq_len, int32_t q_len, int32_t window_left, int32_t page_size) {
  if (window_left < 0) return 0;
  int64_t first = std::max<int64_t>(0, int64_t(seq_len) - q_len - window_left);
  return int32_t(first / page_size * page_size);
}

std::string check_config(const PlanConfig& c) {
  if (c.page_size < 1) return cat("page_size must be >= 1, got ", c.page_size);
  if (c.num_qo_heads < 1) return cat("num_qo_heads must be >= 1, got ", c.num_qo_heads);
  if (c.num_kv_heads < 1) return cat("num_kv_heads must be >= 1, got ", c.num_kv_heads);
  if (c.num_qo_heads % c.num_kv_heads != 0)
    return cat("num_qo_heads (", c.num_qo_heads, ") must be a multiple of num_kv_heads (", c.num_kv_heads, ")");
  if (c.head_dim != 64 && c.head_dim != 128 && c.head_dim != 256)
    return cat("head_dim must be 64, 128 or 256, got ", c.head_dim);
  if (c.device.num_sms < 1) return cat("num_sms must be >= 1, got ", c.device.num_sms);
  if (c.fixed_split_tokens < 1) return cat("fixed_split_tokens must be >= 1, got ", c.fixed_split_tokens);
  if (c.max_splits_per_row < 1) return cat("max_splits_per_row must be >= 1, got ", c.max_splits_per_row);
  if (c.min_split_tokens < 1) return cat("min_split_tokens must be >= 1, got ", c.min_split_tokens);
  if (c.ctas_per_sm < 1) return cat("ctas_per_sm must be >= 1, got ", c.ctas_per_sm);
  return {};
}

// An invalid row (the conditions check_inputs names); branch-free, for plan_step's row loop.
inline bool bad_row(int64_t ext, int64_t seq, int64_t pages, int32_t page_size) {
  return (ext < 1) | (seq < ext) | (pages < 0) | (pages * page_size < seq);
}

// rows = false: the batch-level checks only (plan_step checks the rows in its own row loop, with
// bad_row, and calls this again for the error).
std::string check_inputs(const PlanConfig& c, const PlanInputs& in, bool rows = true) {
  const int32_t B = in.num_rows;
  if (B < 1) return cat("qo_indptr: the batch must have at least one row, got ", B);
  if (in.qo_indptr[0] != 0) return cat("qo_indptr[0] must be 0, got ", in.qo_indptr[0]);
  if (in.kv_indptr[0] < 0) return cat("kv_indptr[0] must be >= 0, got ", in.kv_indptr[0]);
  if (!rows) return {};
  for (int32_t b = 0; b < B; ++b) {
    const int64_t ext = int64_t(in.qo_indptr[b + 1]) - in.qo_indptr[b];
    if (ext < 1)
      return cat("qo_indptr must be strictly increasing (every row needs extend_len >= 1): row ", b, " has extend_len ",
                 ext);
    const int64_t seq = in.seq_lens[b];
    if (seq < ext) return cat("seq_lens[", b, "] = ", seq, " is smaller than the row's extend_len ", ext);
    const int64_t pages = int64_t(in.kv_indptr[b + 1]) - in.kv_indptr[b];
    if (pages < 0) return cat("kv_indptr must be non-decreasing: row ", b, " has ", pages, " pages");
    // pages < ceil(seq / page_size), without a division per row (seq >= 1 here)
    if (pages * c.page_size < seq)
      return cat("kv_indptr: row ", b, " has ", pages, " pages but seq_len ", seq, " needs ",
                 ceil_div32(int32_t(seq), c.page_size), " at page_size ", c.page_size);
  }
  return {};
}

// Splits of a decode row of `keys` keys under the step's chunk: returns the count and sets the
// row's chunk. Deterministic plans keep the fixed chunk; the SM-aware policy caps the count at
// max_splits_per_row and shares the keys out evenly (a short last split would leave its CTA's SM
// idle for most of the launch).
int64_t row_splits(int64_t keys, int64_t chunk, int64_t align, const PlanConfig& cfg, int64_t* row_chunk) {
  if (keys <= chunk) {  // keys >= 1: one split (most rows of a large batch), no division
    *row_chunk = chunk;
    return 1;
  }
  if (chunk <= INT32_MAX && keys <= INT32_MAX - align) {
    // The same steps in 32-bit divisions (several times cheaper): every value stays below
    // keys + align.
    const int32_t k = int32_t(keys), a = int32_t(align);
    int32_t c = int32_t(chunk), n = ceil_div32(k, c);
    if (!cfg.deterministic && n > cfg.max_splits_per_row) {
      c = ceil_div32(ceil_div32(k, cfg.max_splits_per_row), a) * a;
      n = ceil_div32(k, c);
    }
    if (!cfg.deterministic && n > 1) {
      c = ceil_div32(ceil_div32(k, n), a) * a;
      n = ceil_div32(k, c);
    }
    *row_chunk = c;
    return n;
  }
  int64_t c = chunk;
  int64_t n = c <= INT32_MAX ? ceil_div32(int32_t(keys), int32_t(c)) : 1;
  if (!cfg.deterministic && n > cfg.max_splits_per_row) {
    c = round_up(ceil_div(keys, cfg.max_splits_per_row), align);
    n = ceil_div(keys, c);
  }
  if (!cfg.deterministic && n > 1) {
    c = round_up(ceil_div(keys, n), align);
    n = ceil_div(keys, c);
  }
  *row_chunk = c;
  return n;
}

// The sm_90a KV split in [lo, hi] of a launch over `n` tiles of keys(i) keys (costliest first)
// that the step-cost estimate finds fastest, and that launch's estimate; ties keep fewer CTAs. The
// per-CTA fixed cost is what a split doubles: short tiles (a prefill chunk over a short
// prefix) lose by splitting, few long ones gain (benchmarks/RESULTS.md, session 8).
// persistent: how an unsplit launch may run: kNever (one CTA per item), kAlways (persistent, on
// min(num_sms, items) CTAs: a graph-safe plan's captured geometry) or kIfFaster (persistent
// unless one CTA per item is estimated kPersistentMargin faster: the kernel's static schedule
// loses to the hardware's dynamic one where a few items dwarf the rest, e.g. a 128k-key decode
// row folded into a prefill chunk's launch). *chosen_persistent: whether the launch returned is
// the persistent one.
enum class Persistence { kNever, kAlways, kIfFaster };
template <typename Keys>
int fastest_kv_splits(const Keys& keys, int64_t n, int64_t head_groups, int lo, int hi, int num_sms,
                      const ExtendItemCost& cost, Persistence persistent, bool* chosen_persistent, double* launch_us) {
  thread_local std::vector<double> loads;  // the persistent estimate's per-CTA loads
  int best = lo;
  double best_us = -1.0;
  *chosen_persistent = false;
  auto consider = [&](int s, bool pers, double us) {
    if (best_us < 0.0 || us < best_us) best = s, best_us = us, *chosen_persistent = pers;
  };
  for (int s = lo; s <= hi; ++s) {
    double pers_us = -1.0;
    if (s == 1 && persistent != Persistence::kNever) {
      PersistentLaunchEstimate e(head_groups, std::min<int64_t>(num_sms, n * head_groups), cost, &loads);
      for (int64_t i = 0; i < n; ++i) e.add_tile(keys(i));
      pers_us = e.us();
      if (persistent == Persistence::kAlways) {
        consider(1, true, pers_us);
        continue;
      }
    }
    ExtendLaunchEstimate e(head_groups, s, num_sms, cost);
    for (int64_t i = 0; i < n; ++i) e.add_tile(keys(i));
    const double us = e.us();
    if (pers_us >= 0.0 && pers_us <= us * kPersistentMargin) consider(1, true, pers_us);
    else consider(s, false, us);
  }
  *launch_us = n > 0 ? best_us : 0.0;
  return best;
}

// The decode launch of a step whose decode rows have at most launch_q queries: the stage-1
// kernel (the narrow one where the policy lets the step pick it and every row fits one CTA of
// <= 8 pairs: the same grid and CTA count as the wide one), the kv heads one CTA reads, and so
// the (query, head) pairs per query of one CTA's kv heads, the kv-head slots of the grid and the
// MMA blocks a CTA serves. Graph bounds and every step plan it alike.
struct DecodeShape {
  DecodeKernel kernel;
  int32_t kv_pack;     // kv heads one CTA reads (decode_step_kv_pack)
  int32_t group;       // (query, head) pairs per query of those kv heads: GQA group x kv_pack
  int64_t kv_slots;    // num_kv_heads / kv_pack
  int32_t cta_blocks;  // 16-pair MMA blocks per CTA (decode_cta_blocks)
};

DecodeShape decode_shape(const PlanConfig& cfg, const LaunchPolicy& policy, int32_t launch_q) {
  const int32_t group = cfg.num_qo_heads / cfg.num_kv_heads;
  DecodeShape s;
  s.kernel = policy.decode_narrow_when_fits && launch_q * group <= kDecodeNarrowPairs ? DecodeKernel::kTensorCoreNarrow
                                                                                      : policy.decode_kernel;
  s.kv_pack = s.kernel == DecodeKernel::kTensorCore
                  ? decode_step_kv_pack(policy.decode_kv_pack, cfg.num_kv_heads, launch_q, group)
                  : 1;
  s.group = group * s.kv_pack;
  s.kv_slots = cfg.num_kv_heads / s.kv_pack;
  s.cta_blocks = decode_cta_blocks(launch_q, s.group, cfg.head_dim * s.kv_pack, cfg.kv_fp8,
                                   policy.decode_kernel == DecodeKernel::kTensorCore);
  return s;
}

}  // namespace

int64_t plan_meta_capacity(int64_t max_rows, int64_t max_tokens, int64_t extend_tile_tokens, int64_t head_groups) {
  const int64_t tile = std::max<int64_t>(1, extend_tile_tokens);
  const int64_t max_tiles = max_rows + ceil_div(max_tokens, tile);
  // The count header, qo_indptr, kv_indptr (B+1 each), seq_lens (B), four decode
  // arrays (<= B+1 each), two ints per extend tile, a counter per cut item (at most one per item).
  return kNumCounts + 3 * (max_rows + 1) + 4 * (max_rows + 1) + 2 * max_tiles +
         max_tiles * std::max<int64_t>(0, head_groups);
}

std::string graph_bounds(const PlanConfig& cfg, const LaunchPolicy& policy, GraphBounds* out) {
  if (cfg.graph_max_rows < 1) return cat("graph bucket: max_batch must be >= 1, got ", cfg.graph_max_rows);
  if (cfg.graph_max_tokens < cfg.graph_max_rows)
    return cat("graph bucket: max_tokens (", cfg.graph_max_tokens, ") must be >= max_batch (", cfg.graph_max_rows,
               "): every row has a token");
  if (cfg.graph_max_extend_tokens < 0 || cfg.graph_max_extend_tokens > cfg.graph_max_tokens)
    return cat("graph bucket: max_extend_tokens must be in [0, max_tokens], got ", cfg.graph_max_extend_tokens);
  if (cfg.mode == DispatchMode::kFold && cfg.graph_max_extend_tokens != cfg.graph_max_tokens)
    return "graph bucket: in fold mode every token is an extend token (max_extend_tokens = max_tokens)";
  GraphBounds g;
  const int64_t ext = cfg.graph_max_extend_tokens;
  // Extend rows hold at least one token each; each costs at most one partial tile.
  if (ext > 0) g.max_tiles = std::min<int64_t>(cfg.graph_max_rows, ext) + ceil_div(ext, policy.extend_tile_tokens);
  if (cfg.mode != DispatchMode::kFold) {
    // A row of q decode tokens and n splits takes q * n slots; the decode tokens of a step
    // number at most T_dec = min(max_tokens, max_rows * decode_max_q).
    const int64_t dmq = std::max(1, policy.decode_max_q);
    const int64_t decode_tokens = std::min<int64_t>(cfg.graph_max_tokens, cfg.graph_max_rows * dmq);
    const int64_t worst = decode_tokens * cfg.max_splits_per_row;
    if (cfg.graph_max_partials > 0) {
      g.max_partials = cfg.graph_max_partials;
    } else if (cfg.deterministic) {
      g.max_partials = worst;  // fixed-size splits: no bound from the policy
    } else {
      // The SM-aware chunk is at least W * S / (target * c1), W = sum of keys_d * ctas(q_d),
      // c1 = ctas(1), S the kv-head slots (plan_step), and n_d <= 1 + keys_d / chunk, so the slots
      // sum_d q_d * n_d are at most T_dec + max_q ceil(q * c1 * target / (ctas(q) * S)):
      // T_dec + target / S for one-token rows.
      const int64_t target = int64_t(cfg.device.num_sms) * cfg.ctas_per_sm;
      const DecodeShape ds = decode_shape(cfg, policy, int32_t(dmq));  // a graph launch's bound is dmq
      const int64_t c1 = decode_row_ctas(1, ds.group, ds.cta_blocks);
      int64_t extra = 0;
      for (int32_t q = 1; q <= dmq; ++q)
        extra = std::max(extra,
                         ceil_div(q * c1 * target, int64_t(decode_row_ctas(q, ds.group, ds.cta_blocks)) * ds.kv_slots));
      g.max_partials = std::min(worst, decode_tokens + extra);
    }
  }
  *out = g;
  return {};
}

std::string config_launch_policy(const PlanConfig& cfg, LaunchPolicy* out) {
  if (std::string e = check_config(cfg); !e.empty()) return e;
  std::string e = choose_launch_policy(cfg.device, cfg.head_dim, cfg.num_qo_heads / cfg.num_kv_heads, cfg.page_size,
                                       cfg.kv_fp8, cfg.request, out);
  if (!e.empty()) return e;
  if (cfg.request.decode_kv_pack == 2 && cfg.num_kv_heads % 2 != 0)
    return cat("decode_kv_pack=2 pairs adjacent kv heads: num_kv_heads must be even, got ", cfg.num_kv_heads);
  // Fold plans send every row to the extend kernel: no decode-class rows.
  if (cfg.mode == DispatchMode::kFold) out->decode_max_q = 0;
  return e;
}

PlanResult plan_step(const PlanConfig& cfg, const PlanInputs& in, int32_t* meta_out) {
  PlanResult r;
  LaunchPolicy policy;
  if (std::string e = config_launch_policy(cfg, &policy); !e.empty()) {
    r.error = e;
    return r;
  }
  if (std::string e = check_inputs(cfg, in, /*rows=*/false); !e.empty()) {
    r.error = e;
    return r;
  }
  GraphBounds graph;
  if (cfg.graph_safe) {
    // The rows are checked in step 1 below; an invalid row is still the error reported first.
    auto failed_graph = [&](std::string e) -> PlanResult& {
      std::string row = check_inputs(cfg, in);
      return failed(r, row.empty() ? std::move(e) : std::move(row));
    };
    if (std::string e = graph_bounds(cfg, policy, &graph); !e.empty()) return failed_graph(e);
    if (in.num_rows > cfg.graph_max_rows)
      return failed_graph(
          cat("the step has ", in.num_rows, " rows, over the graph bucket's max_batch = ", cfg.graph_max_rows));
    if (cfg.graph_max_kv_pages > 0 && in.kv_indptr[in.num_rows] > cfg.graph_max_kv_pages)
      return failed_graph(cat("the step needs ", in.kv_indptr[in.num_rows], " page ids but the captured run()'s ",
                              "kv_indices holds ", cfg.graph_max_kv_pages, ": a replay would read past it (capture ",
                              "with a kv_indices buffer of the bucket's largest page count)"));
    if (in.qo_indptr[in.num_rows] > cfg.graph_max_tokens)
      return failed_graph(cat("the step has ", in.qo_indptr[in.num_rows],
                              " tokens, over the graph bucket's max_tokens = ", cfg.graph_max_tokens));
  }

  const int32_t B = in.num_rows;
  const bool split = cfg.mode != DispatchMode::kFold;
  auto extend_len = [&](int32_t b) { return in.qo_indptr[b + 1] - in.qo_indptr[b]; };

  // Per-thread scratch, reused across calls: no heap allocation per plan once warm.
  struct Tile { int32_t row, q_start; };
  struct Scratch {
    std::vector<int32_t> decode_rows, extend_rows, kv_start, chunk, split_indptr;
    std::vector<Tile> tiles;
    std::vector<uint64_t> tile_order;
    std::vector<int32_t> fold_keys, fold_dec_keys, alt_keys;
  };
  thread_local Scratch scratch;  // one thread-local lookup
  std::vector<int32_t>& decode_rows = scratch.decode_rows;
  std::vector<int32_t>& extend_rows = scratch.extend_rows;
  std::vector<int32_t>& kv_start = scratch.kv_start;
  std::vector<int32_t>& chunk = scratch.chunk;
  std::vector<int32_t>& split_indptr = scratch.split_indptr;
  std::vector<Tile>& tiles = scratch.tiles;
  std::vector<uint64_t>& tile_order = scratch.tile_order;

  // 1. Partition. Any row order works: kernels index rows through these lists. A row of
  // at most decode_max_q new tokens is a decode row (the policy's threshold; 0 in fold mode).
  // The same pass checks the rows (an invalid one: check_inputs names it, before anything is
  // written), finds each decode row's first key and key count (in chunk[], until step 2 writes
  // the chunk there), and the longest rows.
  decode_rows.resize(B);
  extend_rows.resize(B);
  kv_start.resize(B);
  chunk.resize(B);
  int64_t Nd = 0, Ne = 0, sum_keys = 0, max_keys = 0, min_keys = INT64_MAX;
  int32_t max_decode_q = 0, max_q = 0, max_seq = 0;
  bool bad = false;
  for (int32_t b = 0; b < B; ++b) {
    const int64_t ext64 = int64_t(in.qo_indptr[b + 1]) - in.qo_indptr[b];
    const int32_t q = int32_t(ext64), seq = in.seq_lens[b];
    bad |= bad_row(ext64, seq, int64_t(in.kv_indptr[b + 1]) - in.kv_indptr[b], cfg.page_size);
    max_q = std::max(max_q, q);
    max_seq = std::max(max_seq, seq);
    if (split && q <= policy.decode_max_q) {
      max_decode_q = std::max(max_decode_q, q);
      const int32_t start = decode_kv_start(seq, q, cfg.window_left, cfg.page_size);
      const int64_t keys = int64_t(seq) - start;  // in int32 for a valid row
      kv_start[Nd] = start;
      chunk[Nd] = int32_t(keys);
      sum_keys += keys;
      max_keys = std::max(max_keys, keys);
      min_keys = std::min(min_keys, keys);
      decode_rows[Nd++] = b;
    } else {
      extend_rows[Ne++] = b;
    }
  }
  if (bad) return failed(r, check_inputs(cfg, in));
  decode_rows.resize(Nd);
  extend_rows.resize(Ne);
  kv_start.resize(Nd);

  // 2. Split counts. Splits start on multiples of `align` keys so that a split
  // covers whole pages and whole kernel tiles.
  const int64_t align = std::max<int64_t>(cfg.page_size, 64);
  // The launch's bound on a decode row's queries (grid and kernel variant): the step's longest,
  // or the policy's in graph-safe and deterministic plans, so that neither the captured geometry
  // nor a row's kernel variant depends on the rest of the batch. It fixes the MMA blocks per CTA.
  const int32_t launch_q =
      (cfg.graph_safe || cfg.deterministic) ? std::max(1, policy.decode_max_q) : std::max(1, max_decode_q);
  const DecodeShape dshape = decode_shape(cfg, policy, launch_q);
  const int32_t dgroup = dshape.group;        // (query, head) pairs per query of a CTA's kv heads
  const int64_t kv_slots = dshape.kv_slots;  // kv-head slots of the grid
  const int cta_blocks = dshape.cta_blocks;
  const int64_t one_query_ctas = decode_row_ctas(1, dgroup, cta_blocks);
  chunk.resize(Nd);  // the key counts of step 1
  split_indptr.resize(Nd + 1);
  split_indptr[0] = 0;
  // Keys weighted by the row's CTAs per (kv head, split) in units of a one-query row's,
  // so that the SM-aware chunk below fills the GPU with verify rows too (one-query rows only:
  // the plain sum).
  int64_t total_keys = sum_keys;
  if (max_decode_q > 1) {
    total_keys = 0;
    for (int64_t d = 0; d < Nd; ++d)
      total_keys += int64_t(chunk[d]) * decode_row_ctas(extend_len(decode_rows[d]), dgroup, cta_blocks);
    total_keys = ceil_div(total_keys, one_query_ctas);
  }
  int64_t chunk_all;
  if (cfg.deterministic) {
    // Depends on the configuration alone, never on the batch.
    chunk_all = round_up(cfg.fixed_split_tokens, align);
  } else {
    // SM-aware: enough (row, kv head, split) CTAs to fill the GPU, but never
    // splits shorter than min_split_tokens.
    const int64_t target_ctas = int64_t(cfg.device.num_sms) * cfg.ctas_per_sm;
    chunk_all = ceil_div(total_keys * kv_slots, std::max<int64_t>(1, target_ctas));
    chunk_all = round_up(std::max<int64_t>(chunk_all, cfg.min_split_tokens), align);
    // Wave-aware: the launch lasts about (waves of target_ctas CTAs) x (its longest split plus a
    // CTA's fixed cost), so the chunk is the candidate with the lowest such cost; ties keep fewer
    // CTAs. Candidates: the fill chunk above x 1, 1.5, 2, 3 (a larger chunk that drops a partial
    // last wave: benchmarks/RESULTS.md, session 5, 128 rows at 8k over one kv head, 3 splits in
    // 1.45 waves against 2 in 0.97), and the longest row cut in n equal splits (session 11: 2 rows
    // at 128k take 16 splits, 256 CTAs in one wave, against the fill chunk's 11, 176 CTAs: 15%
    // faster; 96 rows of 512-16k keys, which the fill chunk left unsplit, 13% faster at 1-2k keys
    // a split, because the longest rows no longer make a last wave of their own). Graph-safe plans
    // try no chunk below the fill chunk (fewer slots, so the bucket's bound holds).
    constexpr int64_t kCtaFixedKeys = 64;  // a CTA's fixed cost in keys (session 11 split sweep)
    int64_t cands[16];
    int num_cands = 0;
    auto add = [&](int64_t c) {
      c = std::min(round_up(std::max<int64_t>(c, cfg.min_split_tokens), align), round_up(max_keys, align));
      if (cfg.graph_safe && c < chunk_all) return;
      for (int i = 0; i < num_cands; ++i)
        if (cands[i] == c) return;
      cands[num_cands++] = c;
    };
    for (int64_t num : {2, 3, 4, 6}) add(chunk_all * num / 2);  // chunk_all x num / 2
    for (int64_t n : {1, 2, 3, 4, 6, 8, 12, 16, 24, 32})
      if (n <= cfg.max_splits_per_row) add(ceil_div(max_keys, n));
    if (num_cands > 1) {
      // Each candidate's cost from below in O(1), so that the pass over the rows runs only for a
      // candidate that can still win. Splits: each row takes at least those of the shortest row
      // and, when no row reaches the per-row cap, the rows together at least sum_keys / c; a
      // row's CTAs per split are at least a one-query row's. The longest row's split is exact.
      const int64_t H = kv_slots, target = std::max<int64_t>(1, target_ctas);
      const int64_t cap = cfg.max_splits_per_row;
      int64_t bound[16];
      for (int i = 0; i < num_cands; ++i) {
        const int64_t c = cands[i];
        int64_t cm;
        row_splits(max_keys, c, align, cfg, &cm);
        int64_t splits = Nd * std::min(ceil_div(min_keys, c), cap);
        if (max_keys <= cap * c) splits = std::max(splits, ceil_div(sum_keys, c));
        bound[i] = ceil_div(splits * one_query_ctas * H, target) * (std::min(max_keys, cm) + kCtaFixedKeys);
      }
      for (int i = 1; i < num_cands; ++i)  // by bound, ties larger chunk first (<= 14 entries)
        for (int j = i; j > 0 && (bound[j] < bound[j - 1] || (bound[j] == bound[j - 1] && cands[j] > cands[j - 1]));
             --j)
          std::swap(bound[j], bound[j - 1]), std::swap(cands[j], cands[j - 1]);
      int64_t best_cost = -1, best_chunk = chunk_all;
      for (int i = 0; i < num_cands; ++i) {
        const int64_t c = cands[i];
        if (best_cost >= 0 && (bound[i] > best_cost || (bound[i] == best_cost && c <= best_chunk))) continue;
        int64_t ctas = 0, longest = 0, row_chunk;
        if (c >= max_keys && max_decode_q <= 1) {  // no row splits: no pass needed
          ctas = Nd * one_query_ctas, longest = max_keys;
        } else {
          for (int64_t d = 0; d < Nd; ++d) {
            const int64_t keys = chunk[d];  // the key counts of step 1
            const int64_t n = row_splits(keys, c, align, cfg, &row_chunk);
            ctas += n * (max_decode_q <= 1 ? one_query_ctas
                                           : decode_row_ctas(extend_len(decode_rows[d]), dgroup, cta_blocks));
            longest = std::max(longest, std::min(keys, row_chunk));
          }
        }
        const int64_t cost = ceil_div(ctas * H, target) * (longest + kCtaFixedKeys);
        if (best_cost < 0 || cost < best_cost || (cost == best_cost && c > best_chunk))
          best_cost = cost, best_chunk = c;
      }
      chunk_all = best_chunk;
    } else if (num_cands == 1) {
      chunk_all = cands[0];
    }
  }
  int32_t max_splits = 0;
  // Mode auto's decode estimate, and step 3f's: CTAs and longest split, per kv head (plans that
  // never choose a mode or the SMs the extend leaves skip them). Deterministic plans may leave SMs:
  // the choice moves where the extend's whole items and the decode's CTAs run, never what any of
  // them computes (their items are never cut or KV-split, their decode splits fixed in tokens).
  const bool may_choose_mode = cfg.mode == DispatchMode::kAuto && !cfg.graph_safe && !cfg.deterministic;
  const bool may_leave_sms = policy.extend_leave_sms_auto && split && Nd > 0 && !cfg.graph_safe;
  const bool may_order_decode_first = policy.decode_first_auto && split && Nd > 0 && !cfg.graph_safe;  // step 3g
  int64_t decode_ctas = 0, longest_split = 0;
  for (int64_t d = 0; d < Nd; ++d) {
    const int32_t q = extend_len(decode_rows[d]);
    const int64_t keys = chunk[d];
    int64_t c;
    const int64_t n = row_splits(keys, chunk_all, align, cfg, &c);
    chunk[d] = int32_t(c);
    split_indptr[d + 1] = int32_t(split_indptr[d] + n * q);  // q slots per split
    max_splits = std::max<int32_t>(max_splits, int32_t(n));
    if (may_choose_mode || may_leave_sms || may_order_decode_first) {
      decode_ctas += n * (max_decode_q <= 1 ? one_query_ctas : decode_row_ctas(q, dgroup, cta_blocks));
      longest_split = std::max(longest_split, std::min(keys, c));
    }
  }
  const int64_t num_partials = split_indptr[Nd];
  if (cfg.graph_safe && num_partials > graph.max_partials)
    return failed(r, cat("the step's decode rows need ", num_partials,
                         " arena slots (query tokens x KV splits), over the graph bucket's max_partials = ",
                         graph.max_partials, " (raise max_partials, or fixed_split_tokens in deterministic mode)"));

  // 3. Extend work list: (row, q_start) tiles, costliest first so the longest
  // tiles start early and the tail of the launch is short.
  tiles.clear();
  tile_order.clear();
  const int32_t tt = policy.extend_tile_tokens;
  // Keys a tile of row b starting at query q0 reads: its cost (tiles of `tile_tokens` queries: the
  // policy's, or the other shape's in step 3e).
  auto tile_cost = [&](int32_t b, int32_t q0, int32_t tile_tokens = 0) {
    const int32_t ext = extend_len(b), t = tile_tokens > 0 ? tile_tokens : tt;
    const int64_t keys = int64_t(in.seq_lens[b] - ext) + std::min(q0 + t, ext);
    return cfg.window_left >= 0 ? std::min<int64_t>(keys, int64_t(cfg.window_left) + t) : keys;
  };
  for (int32_t b : extend_rows) {
    for (int32_t q0 = 0, ext = extend_len(b); q0 < ext; q0 += tt) {
      const int64_t keys = tile_cost(b, q0);
      // Sort key: cost descending (a cost is at most seq_len, so 32 bits), then the order the
      // tiles are made in (row, then q_start): the order a stable sort by cost gives.
      tile_order.push_back(uint64_t(UINT32_MAX - uint32_t(keys)) << 32 | uint32_t(tiles.size()));
      tiles.push_back({b, q0});
    }
  }
  std::sort(tile_order.begin(), tile_order.end());
  const int64_t Nt = int64_t(tiles.size());
  if (cfg.graph_safe) {
    int64_t ext_tokens = 0;
    for (int32_t b : extend_rows) ext_tokens += extend_len(b);
    if (ext_tokens > cfg.graph_max_extend_tokens)
      return failed(r, cat("the step has ", ext_tokens, " tokens in extend-kernel rows, over the graph ",
                           "bucket's max_extend_tokens = ", cfg.graph_max_extend_tokens));
    if (Nt > graph.max_tiles)  // cannot happen given the token bound; checked all the same
      return failed(r, cat("the step has ", Nt, " extend tiles, over the graph bucket's ", graph.max_tiles));
  }

  // 3b. KV splits of the extend tiles (sm_90a kernel only). The merge runs after a
  // tile's single pass, which the policy's tile size guarantees. Deterministic
  // plans: the wave policy depends on the launch size, so it would make a row's
  // bits depend on the rest of the batch; they keep one CTA per tile unless the
  // wrapper fixes the split (a fixed split is batch-invariant too).
  // Graph-safe plans: the split is part of the captured geometry, so it is the
  // wrapper's fixed choice (default 1), never the per-step estimate.
  const bool one_pass = policy.extend_tile_tokens <= policy.extend_block_rows / policy.extend_pack;
  const bool sm90_split_ok = policy.extend_kernel == ExtendKernel::kSm90 && one_pass;
  const int32_t forced = cfg.request.extend_kv_splits;
  const int64_t head_groups = cfg.num_qo_heads / policy.extend_pack;
  // The estimate's item cost in the plan's tile shape (the 128-row shape of head dim 128 has its
  // own: step_cost.h, extend_item_cost).
  auto item_cost = [&](int32_t rows) {
    const bool two_wg =
        policy.extend_kernel == ExtendKernel::kSm90 && !cfg.kv_fp8 && rows == extend_sm90_alt_block_rows(cfg.head_dim);
    return extend_item_cost(rows, cfg.head_dim, cfg.kv_fp8, two_wg);
  };
  const ExtendItemCost cost = item_cost(policy.extend_block_rows);
  // The KV split of a launch over n tiles of keys(i) keys and its step-cost estimate: the
  // wrapper's fixed split, else (never in deterministic or graph-safe plans, where it would
  // depend on the batch) the fastest by the estimate.
  const int fixed = sm90_split_ok && forced > 0 ? std::min(forced, policy.extend_max_kv_splits) : 0;
  // SMs the extend launch is planned for: all, or all but those the request leaves to the decode
  // (extend_leave_sms: persistent on the rest, never KV-split, its cut and estimate on them alone).
  const int num_sms = cfg.device.num_sms;
  const int extend_sms = num_sms - policy.extend_leave_sms;
  const bool leaves_sms = policy.extend_leave_sms > 0;
  const int free =
      sm90_split_ok && !cfg.deterministic && !cfg.graph_safe && !leaves_sms ? policy.extend_max_kv_splits : 1;
  // Unsplit launches: persistent where the policy allows it, unless the estimate finds one CTA
  // per item clearly faster; always where the wrapper asks for it (extend_persistent=1 or
  // extend_leave_sms) and in graph-safe plans (the captured geometry is the bucket's).
  const Persistence persistence = !policy.extend_persistent ? Persistence::kNever
                                  : cfg.graph_safe || policy.extend_persistent_fixed || leaves_sms
                                      ? Persistence::kAlways
                                      : Persistence::kIfFaster;
  auto launch_splits = [&](const auto& keys, int64_t n, int64_t groups, const ExtendItemCost& c, double* us,
                           bool* persistent) -> int32_t {
    const int lo = fixed > 0 ? fixed : 1, hi = fixed > 0 ? fixed : free;
    return fastest_kv_splits(keys, n, groups, lo, hi, extend_sms, c, persistence, persistent, us);
  };
  // The estimate of the best launch over n tiles (keys(i) keys, `groups` items each) at cost c:
  // its KV split and persistence as above, then cut items by step 3c's rule. For the launches
  // another plan_step call would make: the other tile shape's (step 3e), the fold one (step 3d).
  auto best_launch_us = [&](const auto& keys, int64_t n, int64_t groups, const ExtendItemCost& c) {
    double us = 0.0;
    bool persistent;
    launch_splits(keys, n, groups, c, &us, &persistent);
    if (policy.extend_max_item_parts > 1 && !policy.extend_item_parts_fixed && persistence != Persistence::kNever) {
      thread_local std::vector<double> loads;
      int64_t k;
      int s;
      us = fastest_item_cut(keys, n, groups, extend_sms, c, policy.extend_max_item_parts, n * groups, us, &k, &s,
                            &loads);
    }
    return us;
  };
  auto tile_keys = [&](int64_t i) { return int64_t(UINT32_MAX - uint32_t(tile_order[i] >> 32)); };
  // The decode half's estimate in its parts (mode auto, step 3d; the SMs left to it, step 3f).
  auto decode_estimate = [&] {
    const int64_t kv_elem = cfg.kv_fp8 ? 1 : 2;
    const int64_t head_key_bytes = int64_t(cfg.head_dim) * 2 * kv_elem;  // K and V of one key, one kv head
    DecodeHalfCost d;
    d.bytes_us = double(total_keys) * head_key_bytes * cfg.num_kv_heads * kDecodeByteUs;
    d.ctas = decode_ctas * kv_slots;
    d.slots = std::max<int64_t>(1, int64_t(num_sms) * cfg.ctas_per_sm);
    d.wave_us = double(longest_split) * head_key_bytes * dshape.kv_pack * kDecodeCtaByteUs;
    return d;
  };
  const bool auto_mode = may_choose_mode && Nd > 0;
  bool persistent_launch = false;  // the unsplit launch the estimate chose is the persistent one
  double extend_us = 0.0;  // the step-cost estimate of this launch
  int32_t extend_kv_splits = 1;
  if (sm90_split_ok && (cfg.graph_safe || Nt > 0) && (forced > 0 || (!cfg.deterministic && !cfg.graph_safe)))
    extend_kv_splits = launch_splits(tile_keys, Nt, head_groups, cost, &extend_us, &persistent_launch);
  else if (Nt > 0 && (auto_mode || persistence == Persistence::kIfFaster))  // unsplit: the estimate, persistence
    launch_splits(tile_keys, Nt, head_groups, cost, &extend_us, &persistent_launch);
  // A launch whose tiles are not split is persistent where the estimate chose so (graph-safe
  // plans: wherever the policy allows it): about one CTA per SM, each serving a share of the
  // (tile, head group) items (extend/sm90/traits.cuh, Sm90Schedule); a graph-safe plan on the
  // bucket's count, a captured geometry.
  int64_t extend_ctas = 0;
  if (extend_kv_splits == 1 && (persistent_launch || persistence == Persistence::kAlways))
    extend_ctas = std::min<int64_t>(extend_sms, (cfg.graph_safe ? graph.max_tiles : Nt) * head_groups);

  // The metadata layout (its capacity is checked in step 4). Graph-safe plans lay every array
  // out at its bucket capacity, so the offsets (baked into a captured launch) are the same for
  // every plan of the bucket.
  std::vector<int64_t>& info = r.info;
  info.assign(kPlanNumFields, 0);
  int64_t off = 0;
  auto take = [&](PlanInfoField f, int64_t n) {
    info[f] = off;
    off += n;
  };
  const int64_t cap_rows = cfg.graph_safe ? cfg.graph_max_rows : B;
  const int64_t cap_decode = cfg.graph_safe ? cfg.graph_max_rows : Nd;
  const int64_t cap_tiles = cfg.graph_safe ? graph.max_tiles : Nt;
  take(kPlanOffCounts, kNumCounts);
  take(kPlanOffQoIndptr, cap_rows + 1);
  take(kPlanOffKvIndptr, cap_rows + 1);
  take(kPlanOffSeqLens, cap_rows);
  take(kPlanOffDecodeRows, cap_decode);
  take(kPlanOffDecodeSplitIndptr, cap_decode + 1);
  take(kPlanOffDecodeKvStart, cap_decode);
  take(kPlanOffDecodeChunkTokens, cap_decode);
  take(kPlanOffExtendTiles, 2 * cap_tiles);

  // 3c. Cut items (docs/extend_work_balance.md): a persistent launch deals whole items, so where
  // a few CTAs hold one item more than the rest (or a KV split leaves its last wave part idle),
  // the k costliest items run as `parts` units each over a share of their K/V tiles, dealt after
  // the whole items; the last unit of an item to finish merges the parts' partials from the arena
  // (extend/sm90/cut_merge.cuh). Never in graph-safe plans (the cut is part of the launch, not
  // of the captured counts) and, unless the wrapper fixes it, not in deterministic plans (it
  // depends on the batch). One counter per cut item in the metadata (zero as uploaded; the
  // merging unit sets it back), within what the buffer holds.
  int64_t cut_items = 0;
  int32_t item_parts = 1;
  if (policy.extend_max_item_parts > 1 && Nt > 0 && !cfg.graph_safe) {
    const int64_t items = Nt * head_groups;
    const int64_t room = cfg.meta_capacity > 0 ? std::max<int64_t>(0, cfg.meta_capacity - off) : items;
    if (policy.extend_item_parts_fixed) {
      if (room < items)
        return failed(r, cat("extend_item_parts=", policy.extend_max_item_parts, ": the plan's ", items,
                             " cut items need that many metadata entries more than the buffer holds (size it "
                             "with plan_meta_capacity's head_groups)"));
      cut_items = items, item_parts = policy.extend_max_item_parts;
    } else if (!cfg.deterministic && persistence != Persistence::kNever && extend_us > 0.0) {
      thread_local std::vector<double> loads;
      int64_t k;
      int s;
      const double us = fastest_item_cut(tile_keys, Nt, head_groups, extend_sms, cost, policy.extend_max_item_parts,
                                         room, extend_us, &k, &s, &loads);
      if (k > 0) cut_items = k, item_parts = s, extend_us = us;
    }
    if (cut_items > 0) {
      extend_kv_splits = 1;
      extend_ctas = std::min<int64_t>(extend_sms, items + cut_items * (item_parts - 1));
    }
  }
  take(kPlanOffExtendCutCounters, cut_items);
  // Each part's partial (block_rows x (head_dim + 8) floats: O, row max and row sum per consumer
  // thread) in whole arena slots of Hq x head_dim floats, after the decode partials.
  const int64_t part_floats = int64_t(policy.extend_block_rows) * (cfg.head_dim + 8);
  const int64_t cut_slots = cut_items * item_parts * ceil_div(part_floats, int64_t(cfg.num_qo_heads) * cfg.head_dim);

  // 3e. The kernel's other tile shape (sm_90a, head dim 128, 16-bit cache: 128 rows against 192;
  // launch_policy.h, extend_sm90_alt_block_rows): where the estimate of its best launch (KV split,
  // persistence and cut items chosen the same way) beats this one's by kAltRowsMargin, the step is
  // planned with it (a plan of that shape, made by this same function). Its items cost what
  // step_cost.h's extend_item_cost says of that shape: a key its rows' share of the default's,
  // times kExtendTwoWgKeyFactor, or the key's copy where that is more (128 rows copy the same K/V
  // for a third fewer rows); a fixed part kExtendTwoWgItemFactor of the default's. Never in deterministic or
  // graph-safe plans (a row's shape would depend on its batch; the captured geometry is fixed),
  // nor where the request fixes the launch (KV split, item parts, persistence).
  if (policy.extend_alt_block_rows > 0 && !cfg.deterministic && !cfg.graph_safe && Nt > 0 && extend_us > 0.0 &&
      forced == 0 && !policy.extend_item_parts_fixed && persistence == Persistence::kIfFaster) {
    const int32_t alt_rows = policy.extend_alt_block_rows, alt_tt = policy.extend_alt_tile_tokens;
    std::vector<int32_t>& alt_keys = scratch.alt_keys;
    alt_keys.clear();
    for (int32_t b : extend_rows)
      for (int32_t q0 = 0, ext = extend_len(b); q0 < ext; q0 += alt_tt)
        alt_keys.push_back(int32_t(tile_cost(b, q0, alt_tt)));
    std::sort(alt_keys.begin(), alt_keys.end(), [](int32_t x, int32_t y) { return x > y; });
    auto alt_tile_keys = [&](int64_t i) { return int64_t(alt_keys[i]); };
    const int64_t alt_n = int64_t(alt_keys.size()), alt_groups = cfg.num_qo_heads / policy.extend_alt_pack;
    const double alt_us = best_launch_us(alt_tile_keys, alt_n, alt_groups, item_cost(alt_rows));
    if (alt_us * kAltRowsMargin < extend_us) {
      PlanConfig alt_cfg = cfg;
      alt_cfg.request.extend_block_rows = alt_rows;
      PlanResult a = plan_step(alt_cfg, in, meta_out);
      // A plan of the other shape that does not fit the metadata buffer (more tiles): this one.
      if (a.ok) return a;
    }
  }

  // 3f. SMs left to the decode (extend_leave_sms = -1, the policy; issue 14). The decode's stage 1
  // launches as the extend's programmatic dependent, so it starts on the SMs the extend launch
  // leaves free: a persistent extend on num_sms - N CTAs runs longer, but the decode streams
  // beside it from the start (step_cost.h, overlapped_step_us; the steps it gains and loses on:
  // benchmarks/RESULTS.md, sessions 27-29). Deterministic plans too (above, may_leave_sms).
  // Candidates: N of num_sms x 1/8, 1/4, 1/3, 2/5, 1/2, each its persistent launch's estimate uncut
  // (cutting every candidate as step 3c does cost the planner several times this step's host time
  // and moved only D's choice, between two N measured alike); the best, where it beats this
  // plan's estimate by kLeaveSmsMargin, is planned by this same function with that N fixed (which
  // cuts its items as step 3c does; after step 3d, which weighs it against fold in mode auto).
  // Not where the overlap was measured to lose (step_cost.h, kLeaveMaxExtendStream and
  // kLeaveMinDecodeShare): an extend that streams its K/V near the HBM rate, or one several times
  // the decode half.
  const auto extend_kv_bytes = [&] {
    const int64_t head_key_bytes = int64_t(cfg.head_dim) * 2 * (cfg.kv_fp8 ? 1 : 2);
    double bytes = 0.0;
    for (int32_t b : extend_rows) {
      const int64_t keys = cfg.window_left >= 0
                               ? std::min<int64_t>(in.seq_lens[b], int64_t(cfg.window_left) + extend_len(b))
                               : int64_t(in.seq_lens[b]);
      bytes += double(keys) * double(head_key_bytes) * cfg.num_kv_heads;
    }
    return bytes;
  };
  // CTAs of this plan's extend launch as it stands (persistent or cut: extend_ctas; else one per
  // item and split), for the estimates of steps 3f and 3g.
  const int64_t extend_launch_ctas = extend_ctas > 0 ? extend_ctas : Nt * head_groups * extend_kv_splits;
  int leave_sms = 0;  // the choice (0: none), planned after step 3d: mode auto compares it with fold
  double leave_step_us = 0.0;
  if (may_leave_sms && Nt > 0 && extend_us > 0.0 && forced == 0 &&
      extend_kv_bytes() * kDecodeByteUs <= kLeaveMaxExtendStream * extend_us &&
      decode_estimate().us() >= kLeaveMinDecodeShare * extend_us) {
    const DecodeHalfCost decode = decode_estimate();
    const int64_t items = Nt * head_groups;
    double best_us = overlapped_step_us(extend_us, extend_launch_ctas, num_sms, decode) / kLeaveSmsMargin;
    int best_leave = 0;
    // No launch on n SMs ends before its CTAs' mean load, and the step's estimate grows with the
    // extend's: a candidate whose bound is past the best is not dealt out.
    double load = 0.0;
    for (int64_t i = 0; i < Nt; ++i) load += (cost.item_us + cost.key_us * double(tile_keys(i))) * double(head_groups);
    for (int fortieths : {5, 10, 13, 16, 20}) {
      const int leave = num_sms * fortieths / 40, sms = num_sms - leave;
      if (leave < 1 || sms < 1) continue;
      const int64_t ctas = std::min<int64_t>(sms, items);
      if (overlapped_step_us(kPersistentStartUs + load / double(sms), ctas, num_sms, decode) >= best_us) continue;
      double us = 0.0;
      bool persistent;
      fastest_kv_splits(tile_keys, Nt, head_groups, 1, 1, sms, cost, Persistence::kAlways, &persistent, &us);
      const double step_us = overlapped_step_us(us, ctas, num_sms, decode);
      if (step_us < best_us) best_us = step_us, best_leave = leave;
    }
    if (best_leave > 0) leave_sms = best_leave, leave_step_us = best_us;
  }

  // 3g. The decode's stage 1 first and the extend as its programmatic dependent (decode_first;
  // launch_policy.h), instead of the extend first with the decode beside its ragged end: the
  // extend's CTAs then take the SMs the decode's last wave leaves. Only where the step's decode has
  // no merge (whose CTAs, waiting for stage 1 on every SM, would keep an extend CTA, which needs a
  // whole SM, off until stage 1 ends), the extend no KV split and no SMs left to the decode, and
  // the launch geometry is the plan's own (a graph's captured order is the bucket's). The request's
  // 1 takes it wherever allowed; the policy (-1) where step_cost.h's estimate of this order beats
  // the extend-first one by kDecodeFirstMargin (a small extend beside a large decode: case A).
  const bool decode_first_ok = split && Nd > 0 && Nt > 0 && max_splits <= 1 && extend_kv_splits == 1 &&
                               !cfg.graph_safe && !leaves_sms && leave_sms == 0;
  bool decode_first = decode_first_ok && policy.decode_first;
  double decode_first_us = 0.0;  // the policy's estimate of the step in that order, where it took it
  if (decode_first_ok && may_order_decode_first && extend_us > 0.0) {
    const DecodeHalfCost decode = decode_estimate();
    const double first_us = decode_first_step_us(extend_us, extend_launch_ctas, num_sms, decode);
    if (first_us * kDecodeFirstMargin < overlapped_step_us(extend_us, extend_launch_ctas, num_sms, decode))
      decode_first = true, decode_first_us = first_us;
  }

  // 3d. Mode auto: split or fold, whichever the step-cost estimate finds faster for this step
  // (fold runs the decode rows as tiles of the one extend launch: cheaper when they are few
  // and short next to a large extend half, or few enough to fill its last wave). A fold plan
  // is then made by this same function; either plan records both estimates.
  double est_split_us = 0.0, est_fold_us = 0.0;
  if (auto_mode) {
    // A launch that leaves SMs to the decode overlaps the halves (step 3f's choice, or the
    // request's), as does the decode first (step 3g's choice); otherwise they are counted one
    // after the other (the decode's start on SMs an extend leaves idle is not). The fold launch
    // below is estimated as this plan would launch it: on every SM unless the request leaves some
    // (a fold plan has no decode to leave SMs to).
    const DecodeHalfCost decode = decode_estimate();
    est_split_us = kStepFixedUs + (leave_sms > 0         ? leave_step_us
                                   : decode_first_us > 0 ? decode_first_us
                                   : leaves_sms          ? overlapped_step_us(extend_us, extend_ctas, num_sms, decode)
                                                         : extend_us + decode.us());
    // The fold launch: the decode rows' tiles merged into the extend tiles' costliest-first order.
    std::vector<int32_t>& dec_keys = scratch.fold_dec_keys;
    std::vector<int32_t>& fold_keys = scratch.fold_keys;
    dec_keys.clear();
    for (int32_t b : decode_rows)
      for (int32_t q0 = 0, ext = extend_len(b); q0 < ext; q0 += tt) dec_keys.push_back(int32_t(tile_cost(b, q0)));
    std::sort(dec_keys.begin(), dec_keys.end(), [](int32_t x, int32_t y) { return x > y; });
    fold_keys.resize(size_t(Nt) + dec_keys.size());
    for (int64_t i = 0, j = 0, k = 0; k < int64_t(fold_keys.size()); ++k)
      fold_keys[k] = (j >= int64_t(dec_keys.size()) || (i < Nt && tile_keys(i) >= dec_keys[j]))
                         ? int32_t(tile_keys(i++))
                         : dec_keys[j++];
    auto fold_tile_keys = [&](int64_t i) { return int64_t(fold_keys[i]); };
    est_fold_us = kStepFixedUs + best_launch_us(fold_tile_keys, int64_t(fold_keys.size()), head_groups, cost);
    if (est_fold_us < est_split_us) {
      PlanConfig fold_cfg = cfg;
      fold_cfg.mode = DispatchMode::kFold;
      PlanResult f = plan_step(fold_cfg, in, meta_out);
      if (f.ok) {
        f.info[kPlanModeRequested] = int64_t(DispatchMode::kAuto);
        f.info[kPlanEstSplitNs] = int64_t(est_split_us * 1000.0);
        f.info[kPlanEstFoldNs] = int64_t(est_fold_us * 1000.0);
      }
      return f;
    }
  }
  // Step 3f's choice: a plan of this step with that many SMs left, made by this same function
  // (in split mode: mode auto chose it above, and the plan records that and both estimates).
  if (leave_sms > 0) {
    PlanConfig leave_cfg = cfg;
    leave_cfg.request.extend_leave_sms = leave_sms;
    leave_cfg.mode = DispatchMode::kSplit;
    PlanResult a = plan_step(leave_cfg, in, meta_out);
    if (a.ok) {
      a.info[kPlanModeRequested] = int64_t(cfg.mode);
      if (auto_mode) {
        a.info[kPlanEstSplitNs] = int64_t(est_split_us * 1000.0);
        a.info[kPlanEstFoldNs] = int64_t(est_fold_us * 1000.0);
      }
      return a;
    }
  }

  // 4. Layout of the metadata buffer (laid out above, the cut counters last).
  if (cfg.meta_capacity > 0 && off > cfg.meta_capacity) {
    r.error = cat("plan metadata needs ", off, " int32 entries but the buffer holds ", cfg.meta_capacity,
                  " (raise max_batch / max_tokens)");
    r.info.clear();
    return r;
  }

  info[kPlanMagic] = kPlanMagicValue;
  info[kPlanNumRows] = B;
  info[kPlanNumTokens] = in.qo_indptr[B];
  info[kPlanMode] = int64_t(split ? DispatchMode::kSplit : DispatchMode::kFold);
  info[kPlanModeRequested] = int64_t(cfg.mode);
  info[kPlanEstSplitNs] = int64_t(est_split_us * 1000.0);
  info[kPlanEstFoldNs] = int64_t(est_fold_us * 1000.0);
  info[kPlanNumDecodeRows] = Nd;
  info[kPlanNumExtendRows] = int64_t(extend_rows.size());
  info[kPlanNumExtendTiles] = Nt;
  info[kPlanExtendTileTokens] = tt;
  info[kPlanNumPartials] = num_partials + cut_slots;
  info[kPlanMaxSplits] = max_splits;
  info[kPlanMetaLen] = off;
  info[kPlanNumKvPages] = in.kv_indptr[B];
  info[kPlanPageSize] = cfg.page_size;
  info[kPlanNumQoHeads] = cfg.num_qo_heads;
  info[kPlanNumKvHeads] = cfg.num_kv_heads;
  info[kPlanHeadDim] = cfg.head_dim;
  info[kPlanWindowLeft] = cfg.window_left;
  info[kPlanDeterministic] = cfg.deterministic ? 1 : 0;
  info[kPlanMaxQLen] = max_q;
  info[kPlanMaxSeqLen] = max_seq;
  info[kPlanExtendKernel] = int64_t(policy.extend_kernel);
  info[kPlanExtendBlockRows] = policy.extend_block_rows;
  info[kPlanExtendKvSplits] = extend_kv_splits;
  info[kPlanExtendTma] = policy.extend_tma ? 1 : 0;
  info[kPlanExtendQTma] = policy.extend_q_tma ? 1 : 0;
  info[kPlanExtendCtas] = extend_ctas;
  info[kPlanExtendCutItems] = cut_items;
  info[kPlanExtendItemParts] = item_parts;
  info[kPlanExtendCutSlot0] = num_partials;
  info[kPlanDecodeKernel] = int64_t(dshape.kernel);
  info[kPlanKvFp8] = cfg.kv_fp8 ? 1 : 0;
  info[kPlanGraphSafe] = cfg.graph_safe ? 1 : 0;
  info[kPlanGraphMaxRows] = cfg.graph_safe ? cfg.graph_max_rows : 0;
  info[kPlanGraphMaxTokens] = cfg.graph_safe ? cfg.graph_max_tokens : 0;
  info[kPlanGraphMaxTiles] = cfg.graph_safe ? graph.max_tiles : 0;
  info[kPlanGraphMaxPartials] = cfg.graph_safe ? graph.max_partials : 0;
  info[kPlanDecodeMaxQ] = launch_q;
  info[kPlanDecodeMaxQPolicy] = policy.decode_max_q;
  info[kPlanDecodeCtaBlocks] = cta_blocks;
  info[kPlanDecodeKvPack] = dshape.kv_pack;
  info[kPlanPdl] = policy.pdl ? 1 : 0;
  info[kPlanExtendLeaveSms] = leaves_sms && Nt > 0 ? policy.extend_leave_sms : 0;
  info[kPlanDecodeFirst] = decode_first ? 1 : 0;  // step 3g

  // 5. Fill the buffer (only now: a rejected plan writes nothing).
  int32_t* m = meta_out;
  int32_t* counts = m + info[kPlanOffCounts];
  counts[kCountRows] = B;
  counts[kCountTokens] = in.qo_indptr[B];
  counts[kCountDecodeRows] = int32_t(Nd);
  counts[kCountExtendTiles] = int32_t(Nt);
  counts[kCountPartials] = int32_t(num_partials);
  std::memcpy(m + info[kPlanOffQoIndptr], in.qo_indptr, sizeof(int32_t) * (B + 1));
  std::memcpy(m + info[kPlanOffKvIndptr], in.kv_indptr, sizeof(int32_t) * (B + 1));
  std::memcpy(m + info[kPlanOffSeqLens], in.seq_lens, sizeof(int32_t) * B);
  std::copy(decode_rows.begin(), decode_rows.end(), m + info[kPlanOffDecodeRows]);
  std::copy(split_indptr.begin(), split_indptr.end(), m + info[kPlanOffDecodeSplitIndptr]);
  std::copy(kv_start.begin(), kv_start.end(), m + info[kPlanOffDecodeKvStart]);
  std::copy(chunk.begin(), chunk.end(), m + info[kPlanOffDecodeChunkTokens]);
  int32_t* t = m + info[kPlanOffExtendTiles];
  for (int64_t i = 0; i < Nt; ++i) {
    const Tile& tile = tiles[uint32_t(tile_order[i])];
    t[2 * i] = tile.row;
    t[2 * i + 1] = tile.q_start;
  }
  std::fill_n(m + info[kPlanOffExtendCutCounters], cut_items, 0);
  r.ok = true;
  return r;
}

PlanView plan_view(const int64_t* info, const int32_t* meta) {
  PlanView v;
  v.qo_indptr = meta + info[kPlanOffQoIndptr];
  v.kv_indptr = meta + info[kPlanOffKvIndptr];
  v.seq_lens = meta + info[kPlanOffSeqLens];
  v.decode_rows = meta + info[kPlanOffDecodeRows];
  v.decode_split_indptr = meta + info[kPlanOffDecodeSplitIndptr];
  v.decode_kv_start = meta + info[kPlanOffDecodeKvStart];
  v.decode_chunk_tokens = meta + info[kPlanOffDecodeChunkTokens];
  v.extend_tiles = meta + info[kPlanOffExtendTiles];
  v.num_rows = int32_t(info[kPlanNumRows]);
  v.num_tokens = int32_t(info[kPlanNumTokens]);
  v.num_decode_rows = int32_t(info[kPlanNumDecodeRows]);
  v.num_extend_tiles = int32_t(info[kPlanNumExtendTiles]);
  v.extend_tile_tokens = int32_t(info[kPlanExtendTileTokens]);
  v.num_partials = int32_t(info[kPlanNumPartials]);
  v.max_splits = int32_t(info[kPlanMaxSplits]);
  v.deterministic = int32_t(info[kPlanDeterministic]);
  v.extend_kernel = int32_t(info[kPlanExtendKernel]);
  v.extend_block_rows = int32_t(info[kPlanExtendBlockRows]);
  v.extend_kv_splits = int32_t(info[kPlanExtendKvSplits]);
  v.extend_tma = int32_t(info[kPlanExtendTma]);
  v.extend_q_tma = int32_t(info[kPlanExtendQTma]);
  v.extend_ctas = int32_t(info[kPlanExtendCtas]);
  v.extend_cut_items = int32_t(info[kPlanExtendCutItems]);
  v.extend_item_parts = int32_t(info[kPlanExtendItemParts]);
  v.decode_kernel = int32_t(info[kPlanDecodeKernel]);
  v.decode_max_q = int32_t(info[kPlanDecodeMaxQ]);
  v.decode_cta_blocks = int32_t(info[kPlanDecodeCtaBlocks]);
  v.decode_kv_pack = int32_t(info[kPlanDecodeKvPack]);
  v.pdl = int32_t(info[kPlanPdl]);
  v.decode_first = int32_t(info[kPlanDecodeFirst]);
  const bool graph = info[kPlanGraphSafe] != 0;
  v.maybe_counts = graph ? meta + info[kPlanOffCounts] : nullptr;
  v.graph_max_rows = int32_t(info[kPlanGraphMaxRows]);
  v.graph_max_tokens = int32_t(info[kPlanGraphMaxTokens]);
  v.graph_max_tiles = int32_t(info[kPlanGraphMaxTiles]);
  v.graph_max_partials = int32_t(info[kPlanGraphMaxPartials]);
  return v;
}

const char* const* plan_config_field_names() {
  // A table, as written (clang-format would put one name a line).
  // clang-format off
  static const char* const names[kCfgNumFields + 1] = {
      "page_size", "num_qo_heads", "num_kv_heads", "head_dim", "window_left", "mode",
      "deterministic", "fixed_split_tokens", "max_splits_per_row", "min_split_tokens",
      "ctas_per_sm", "kv_fp8", "device_kind", "device_arch", "num_sms", "device_sm90_extend",
      "device_tma_encoder", "device_hip_mfma", "extend_kernel", "decode_kernel", "extend_kv_splits", "extend_tma",
      "extend_tile_tokens", "graph_safe", "graph_max_rows", "graph_max_tokens",
      "graph_max_extend_tokens", "graph_max_partials", "graph_max_kv_pages", "decode_max_q",
      "extend_persistent", "extend_item_parts", "pdl", "extend_block_rows", "extend_q_tma", "decode_kv_pack",
      "extend_leave_sms", "decode_first", nullptr};
  // clang-format on
  return names;
}

const char* const* plan_info_field_names() {
  // A table, as written (clang-format would put one name a line).
  // clang-format off
  static const char* const names[kPlanNumFields + 1] = {
      "magic", "num_rows", "num_tokens", "mode", "num_decode_rows", "num_extend_rows",
      "num_extend_tiles", "extend_tile_tokens", "num_partials", "max_splits", "meta_len",
      "off_qo_indptr", "off_kv_indptr", "off_seq_lens", "off_decode_rows",
      "off_decode_split_indptr", "off_decode_kv_start", "off_decode_chunk_tokens",
      "off_extend_tiles", "num_kv_pages", "page_size", "num_qo_heads", "num_kv_heads",
      "head_dim", "window_left", "deterministic", "max_q_len", "max_seq_len", "extend_kernel",
      "extend_block_rows", "extend_kv_splits", "extend_tma", "decode_kernel", "off_counts", "kv_fp8", "graph_safe",
      "graph_max_rows", "graph_max_tokens", "graph_max_tiles", "graph_max_partials", "decode_max_q",
      "decode_max_q_policy", "decode_cta_blocks", "mode_requested", "est_split_ns", "est_fold_ns", "extend_ctas",
      "extend_cut_items", "extend_item_parts", "extend_cut_slot0", "off_extend_cut_counters", "pdl", "extend_q_tma",
      "decode_kv_pack", "extend_leave_sms", "decode_first", nullptr};
  // clang-format on
  return names;
}

std::string config_from_list(const int64_t* v, int64_t len, PlanConfig* cfg) {
  if (len != kCfgNumFields) return cat("config: expected ", int(kCfgNumFields), " entries, got ", len);
  for (int f = 0; f < kCfgNumFields; ++f)
    if (v[f] < INT32_MIN || v[f] > INT32_MAX)
      return cat("config: ", plan_config_field_names()[f], " = ", v[f], " is out of range");
  auto in = [&](int f, int64_t lo, int64_t hi) -> std::string {
    if (v[f] < lo || v[f] > hi)
      return cat(plan_config_field_names()[f], " must be in [", lo, ", ", hi, "], got ", v[f]);
    return {};
  };
  for (auto e : {in(kCfgMode, 0, 2), in(kCfgDeterministic, 0, 1), in(kCfgKvFp8, 0, 1), in(kCfgDeviceKind, 0, 2),
                 in(kCfgDeviceSm90Extend, 0, 1), in(kCfgDeviceTmaEncoder, 0, 1), in(kCfgDeviceHipMfma, 0, 1),
                 in(kCfgExtendKernel, 0, 3), in(kCfgDecodeKernel, 0, 4), in(kCfgExtendTma, -1, 1),
                 in(kCfgExtendQTma, -1, 1), in(kCfgExtendPersistent, -1, 1),
                 in(kCfgExtendItemParts, -1, kExtendMaxItemParts), in(kCfgPdl, -1, 1), in(kCfgDecodeKvPack, 0, 2),
                 in(kCfgExtendBlockRows, 0, 256), in(kCfgGraphSafe, 0, 1), in(kCfgWindowLeft, -1, INT32_MAX)})
    if (!e.empty()) return e;
  PlanConfig& c = *cfg;
  c.page_size = int32_t(v[kCfgPageSize]);
  c.num_qo_heads = int32_t(v[kCfgNumQoHeads]);
  c.num_kv_heads = int32_t(v[kCfgNumKvHeads]);
  c.head_dim = int32_t(v[kCfgHeadDim]);
  c.window_left = int32_t(v[kCfgWindowLeft]);
  c.mode = DispatchMode(v[kCfgMode]);
  c.deterministic = v[kCfgDeterministic] != 0;
  c.fixed_split_tokens = int32_t(v[kCfgFixedSplitTokens]);
  c.max_splits_per_row = int32_t(v[kCfgMaxSplitsPerRow]);
  c.min_split_tokens = int32_t(v[kCfgMinSplitTokens]);
  c.ctas_per_sm = int32_t(v[kCfgCtasPerSm]);
  c.kv_fp8 = v[kCfgKvFp8] != 0;
  c.device.kind = DeviceKind(v[kCfgDeviceKind]);
  c.device.arch = int32_t(v[kCfgDeviceArch]);
  c.device.num_sms = int32_t(v[kCfgNumSms]);
  c.device.sm90_extend = v[kCfgDeviceSm90Extend] != 0;
  c.device.tma_encoder = v[kCfgDeviceTmaEncoder] != 0;
  c.device.hip_mfma = v[kCfgDeviceHipMfma] != 0;
  c.request.extend_kernel = ExtendKernel(v[kCfgExtendKernel]);
  c.request.decode_kernel = DecodeKernel(v[kCfgDecodeKernel]);
  c.request.extend_kv_splits = int32_t(v[kCfgExtendKvSplits]);
  c.request.extend_tma = int32_t(v[kCfgExtendTma]);
  c.request.extend_q_tma = int32_t(v[kCfgExtendQTma]);
  c.request.extend_tile_tokens = int32_t(v[kCfgExtendTileTokens]);
  c.graph_safe = v[kCfgGraphSafe] != 0;
  c.graph_max_rows = int32_t(v[kCfgGraphMaxRows]);
  c.graph_max_tokens = int32_t(v[kCfgGraphMaxTokens]);
  c.graph_max_extend_tokens = int32_t(v[kCfgGraphMaxExtendTokens]);
  c.graph_max_partials = int32_t(v[kCfgGraphMaxPartials]);
  c.graph_max_kv_pages = int32_t(v[kCfgGraphMaxKvPages]);
  c.request.decode_max_q = int32_t(v[kCfgDecodeMaxQ]);
  c.request.extend_persistent = int32_t(v[kCfgExtendPersistent]);
  c.request.extend_item_parts = int32_t(v[kCfgExtendItemParts]);
  c.request.pdl = int32_t(v[kCfgPdl]);
  c.request.extend_block_rows = int32_t(v[kCfgExtendBlockRows]);
  c.request.decode_kv_pack = int32_t(v[kCfgDecodeKvPack]);
  c.request.extend_leave_sms = int32_t(v[kCfgExtendLeaveSms]);
  c.request.decode_first = int32_t(v[kCfgDecodeFirst]);
  if (c.request.extend_leave_sms < -1 || c.request.extend_leave_sms >= c.device.num_sms)
    return cat("extend_leave_sms must be -1 (policy) or in [0, num_sms - 1 = ", c.device.num_sms - 1, "], got ",
               c.request.extend_leave_sms);
  return {};
}

std::string check_plan_info(const int64_t* info, int64_t len) {
  if (len != kPlanNumFields) return cat("plan_info: expected ", int(kPlanNumFields), " entries, got ", len);
  if (info[kPlanMagic] != kPlanMagicValue) return "plan_info: not a plan made by mixed_attn.plan";
  const int64_t meta_len = info[kPlanMetaLen];
  for (int f = kPlanOffQoIndptr; f <= kPlanOffExtendTiles; ++f)
    if (info[f] < 0 || info[f] > meta_len) return cat("plan_info: offset field ", f, " out of range");
  if (info[kPlanOffCounts] < 0 || info[kPlanOffCounts] + kNumCounts > meta_len)
    return "plan_info: the count header is out of range";
  if (info[kPlanExtendCutItems] < 0 || info[kPlanOffExtendCutCounters] < 0 ||
      info[kPlanOffExtendCutCounters] + info[kPlanExtendCutItems] > meta_len)
    return "plan_info: the cut items' counters are out of range";
  return {};
}

}  // namespace mixed_attn
