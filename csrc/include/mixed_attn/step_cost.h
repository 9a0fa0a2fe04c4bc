// Estimated GPU time of a step's launches, for the planner's two performance decisions: the
// sm_90a extend kernel's KV split and, in mode "auto", split or fold dispatch of a step.
//
// Plain C++ (no torch, no CUDA). A model fitted to per-layer times measured on the H200
// (lab sweeps of 1238 step compositions at 32/8/128 and 8/1/128, and 100 extend launches with the KV
// split forced to 1 and 2; page 16, the sm_90a kernel at head dim 128; benchmarks/RESULTS.md,
// session 8, has the fit and its errors).
// Other head dims and kernels scale the per-key cost by the work a key costs a CTA (rows x head
// dim); other GPUs use the H200's constants (both halves scale with the GPU, the decisions
// depend on their ratio).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace mixed_attn {

// Microseconds. An extend launch runs one CTA per SM in the plan's costliest-first tile order;
// a CTA costs a fixed part (Q load, pipeline fill, epilogue: about 770 keys' worth) plus its
// keys. Its estimate folds the launch into rounds of num_sms CTAs: round r can start once the
// shortest CTA of each earlier round is done (costliest first, the SMs freed earliest take the
// next CTAs), so the launch lasts max over r of (the shortest CTAs of rounds before r + the
// longest of r): exact for equal CTAs, and it sees that a short tail round fits beside a long
// first one (median error 3.7% over 257 measured extend launches, p90 11%).
constexpr double kStepFixedUs = 3.8;         // the rest of a step's layer (KV save, launch gaps)
constexpr double kExtendCtaUs = 17.0;        // fixed part of one extend CTA
// More per CTA of a KV-split cluster (the merge through distributed shared memory, the cluster's
// co-scheduling): 1.0 until session 22. With 5.0 (and the cut merge below), the steps of a
// 500-step sweep that leave a KV split measured 0.5-10% faster in 12 of 13, the other 1.03x slower
// (benchmarks/RESULTS.md, session 22; tools/pending/refit_check.sh).
constexpr double kExtendSplitCtaUs = 5.0;
constexpr double kExtendKeyUs = 0.022;       // one key of a 192-row x 128-dim CTA
// A persistent launch (one CTA per SM serving a share of the items): a CTA's start-up once, then
// a fixed part per item (the pass boundary: the last P V, the epilogue, the next Q and the first
// K/V tile, the consumer warpgroups starting in step), plus its keys at kExtendKeyUs; their sum is
// kExtendCtaUs (a CTA of one item costs what it does in a launch of one CTA per item). Fitted on
// 28 persistent launches (10 compositions at tiles of 48 and 96 queries, 32/8/128, page 16: median
// error 2.4%, p90 6.4%; benchmarks/RESULTS.md, session 9): most of a CTA's fixed cost is per
// item, not the CTA's start-up.
constexpr double kPersistentItemUs = 9.5;
constexpr double kPersistentStartUs = kExtendCtaUs - kPersistentItemUs;
// An unsplit launch is persistent unless one CTA per item is estimated this much faster: both
// estimates err by 2-4% (median) and the persistent launch measured 0-4% faster where they tie
// (benchmarks/RESULTS.md, session 9), so only a clear margin (a few items dwarfing the rest,
// which the hardware's dynamic scheduling spreads better than the kernel's static one) decides.
constexpr double kPersistentMargin = 1.05;
constexpr double kDecodeHalfUs = 17.6;       // the decode half's launches (stage 1 and merge)
constexpr double kDecodeByteUs = 2.1e-7;     // K/V bytes of the decode half over HBM (4.7 TB/s)
// The longest decode CTA's split, once a wave: refitted on the decode halves measured since the
// wave-filling splits and the narrow decode kernel, which the session-8 fit put too high
// (benchmarks/RESULTS.md, session 17, "The decode half's step cost refitted").
constexpr double kDecodeCtaByteUs = 4.5e-6;  // 220 GB/s

// The rate one CTA copies K/V into shared memory (extend_item_cost, below).
constexpr double kExtendCopyUsPerByte = 4.0e-5;
// An fp8 cache's key costs this many times a 16-bit one's, at every head dim: the producer copies
// its bytes and widens them into the same 16-bit ring the consumers read, so the widening adds to
// the 16-bit key's cost rather than the byte count halving it (the fit: benchmarks/RESULTS.md,
// session 16, "The step cost of an fp8 key").
constexpr double kExtendFp8KeyFactor = 1.2;
// The sm_90a kernel's 128-row shape at head dim 128 (two consumer warpgroups; plan.cc, step 3e)
// against the 192-row one (three). A (row, key) costs it kExtendTwoWgKeyFactor more: it copies
// half as many K/V bytes per FLOP again (B 0.876 / 0.793 ms, D 0.578 / 0.556, launches that both
// balance: benchmarks/RESULTS.md, session 20). An item's fixed part costs it kExtendTwoWgItemFactor
// of the default's: the Q load, the epilogue's stores and the last P V of a third fewer rows
// (one-wave launches of short items, P-512 22.3 -> 18.3 us, case C's extend half 0.023 -> 0.019
// ms, and case J's persistent one, 0.232 -> 0.195: benchmarks/RESULTS.md, session 21).
constexpr double kExtendTwoWgKeyFactor = 1.10;
constexpr double kExtendTwoWgItemFactor = 0.6;

// What an extend launch's estimate charges one item of a CTA of `block_rows` query rows at
// `head_dim`: a key (its math, the fit's per-key cost scaled by rows x head dim, or, where
// larger, the copy of its K and V rows into shared memory at the rate one CTA streams them: that
// rate, about 25 GB/s, is what the fit at head dim 128 (512 bytes a key in 0.022 us) and the d256
// launches measured in session 9 (B-d256 0.988 ms, estimated 0.99 with it and 0.74 without; fold
// of case G) both give: at head dim 256 the copy, not the math, sets a key's cost. The cp.async
// copies (the default since session 17) are faster than this at head dim 256, but the faster rate
// moves D-d256 from a KV split to a persistent launch that has not been timed (benchmarks/
// RESULTS.md, session 17): the rate stays until that launch is), and the item's fixed part.
// two_wg_shape: the 128-row shape of head dim 128 (above).
struct ExtendItemCost {
  double key_us;   // one key
  double item_us;  // the fixed part of one item of a persistent CTA
  // The fixed part of a CTA of one item (a launch of one CTA per item): the item's and the CTA's
  // start-up.
  double cta_us() const { return kPersistentStartUs + item_us; }
};
inline ExtendItemCost extend_item_cost(int block_rows, int head_dim, bool kv_fp8, bool two_wg_shape = false) {
  const double math =
      kExtendKeyUs * (double(block_rows) * head_dim) / (192.0 * 128.0) * (two_wg_shape ? kExtendTwoWgKeyFactor : 1.0);
  const double copy = kExtendCopyUsPerByte * 2.0 * head_dim * 2;  // K and V rows of 16-bit elements
  return {std::max(math, copy) * (kv_fp8 ? kExtendFp8KeyFactor : 1.0),
          kPersistentItemUs * (two_wg_shape ? kExtendTwoWgItemFactor : 1.0)};
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// One extend launch, tiles fed costliest first (add_tile), `ctas_per_tile` CTAs per tile (head
// groups) each split over `splits` CTAs, one CTA per SM.
class ExtendLaunchEstimate {
 public:
  ExtendLaunchEstimate(int64_t ctas_per_tile, int splits, int num_sms, const ExtendItemCost& cost)
      : per_tile_(ctas_per_tile * splits),
        splits_(splits),
        sms_(num_sms < 1 ? 1 : num_sms),
        key_us_(cost.key_us),
        cta_us_(cost.cta_us() + (splits > 1 ? kExtendSplitCtaUs : 0.0)) {}
  void add_tile(int64_t keys) {
    const double t = cta_us_ + key_us_ * double(splits_ == 1 ? keys : (keys + splits_ - 1) / splits_);
    // This tile's CTAs fill the open round from position pos_; a CTA at position 0 starts a
    // round, closing the one before, which ended with the previous CTA: the previous tile's
    // last when it is this tile's first CTA, else one of this tile's.
    for (int64_t left = per_tile_; left > 0;) {
      if (pos_ == 0) {
        close_round(left == per_tile_ ? last_us_ : t);
        longest_us_ = t;
      }
      const int64_t take = std::min(left, sms_ - pos_);
      left -= take;
      pos_ = pos_ + take == sms_ ? 0 : pos_ + take;
    }
    last_us_ = t;
    any_ = true;
  }
  // Launch time; 0 for an empty launch (none is made).
  double us() const { return any_ ? std::max(done_us_, before_us_ + longest_us_) : 0.0; }

 private:
  void close_round(double shortest) {
    if (longest_us_ < 0.0) return;  // no round open yet
    done_us_ = std::max(done_us_, before_us_ + longest_us_);
    before_us_ += shortest;
  }
  int64_t per_tile_, splits_, sms_;
  double key_us_, cta_us_;
  int64_t pos_ = 0;  // CTAs of the open round so far
  bool any_ = false;
  double last_us_ = 0.0, longest_us_ = -1.0, before_us_ = 0.0, done_us_ = 0.0;
};

// One persistent extend launch (no KV split): `ctas` CTAs dealt the items (tile, head group; tiles
// fed costliest first by add_tile, `head_groups` items each) in alternating directions, as
// the kernel's schedule does (extend/sm90/traits.cuh, Sm90Schedule); the launch lasts as long as
// its most loaded CTA. `loads` is the caller's scratch (resized here).
class PersistentLaunchEstimate {
 public:
  PersistentLaunchEstimate(int64_t head_groups, int64_t ctas, const ExtendItemCost& cost, std::vector<double>* loads)
      : head_groups_(head_groups), ctas_(ctas < 1 ? 1 : ctas), cost_(cost), loads_(*loads) {
    loads_.assign(size_t(ctas_), 0.0);
  }
  void add_tile(int64_t keys) { add_units(cost_.item_us + cost_.key_us * double(keys), head_groups_); }
  // n units of t us each (items, or the parts of cut items), in the kernel's order.
  void add_units(double t, int64_t n) {
    // The units go to consecutive CTAs of the round (a run per round they span).
    for (int64_t left = n; left > 0;) {
      const int64_t take = std::min(left, ctas_ - pos_);
      double* run = loads_.data() + (forward_ ? pos_ : ctas_ - pos_ - take);
      for (int64_t j = 0; j < take; ++j) run[j] += t;
      left -= take;
      pos_ += take;
      if (pos_ == ctas_) pos_ = 0, forward_ = !forward_;
    }
    any_ = true;
  }
  double us() const { return any_ ? kPersistentStartUs + *std::max_element(loads_.begin(), loads_.end()) : 0.0; }

 private:
  int64_t head_groups_, ctas_;
  ExtendItemCost cost_;
  std::vector<double>& loads_;
  int64_t pos_ = 0;
  bool forward_ = true, any_ = false;
};

// Cut items in a persistent launch (Stream-K's idea): the k costliest (tile, head group) items
// each run as `parts` units over a share of the item's K/V tiles, dealt after the whole items;
// each unit parks its partial state in the arena and the last of an item's units to finish merges
// them (extend/sm90/cut_merge.cuh). A part costs an item's fixed part, its share of the keys and
// this much for its partial's store and its share of the merge: 2.0 (the model's value) until
// session 22, when P-512 measured its cut (44 items in 2 parts, one wave) no faster than uncut
// where 2.0 credited it 12%: a part's partial goes to the arena and back at one CTA's rate. With
// 6.0, A and P-512 take the 128-row shape uncut (0.98x / 0.97x) and C a persistent launch (0.99x);
// two steps then go from cut items to a KV split and lose (1.14x, 1.20x: head dim 64, one KV
// head; benchmarks/RESULTS.md, session 22). Over the 22 steps the change moves, measured: geomean
// 0.985, total -2.9%.
constexpr double kExtendPartMergeUs = 6.0;
// A step takes the 128-row shape where its estimate beats the default's by this (plan.cc, step 3e).
constexpr double kAltRowsMargin = 1.05;
// A cut plan must be estimated at least this much faster than the uncut launch: the persistent
// estimate errs by 2-4% (median), and a cut costs arena traffic the model charges only roughly.
constexpr double kCutMargin = 1.03;

// The persistent launch over n tiles (keys(i) keys, costliest first, head_groups items each) on
// min(num_sms, units) CTAs with its `cut` costliest items in `parts` parts: the whole items first,
// costliest first, then each cut item's parts in turn (the kernel's order: extend/sm90/kernel.cuh,
// sm90_unit).
template <typename Keys>
double persistent_cut_us(const Keys& keys, int64_t n, int64_t head_groups, int num_sms, const ExtendItemCost& cost,
                         int64_t cut, int parts, std::vector<double>* loads) {
  const int64_t items = n * head_groups, units = items + cut * (parts - 1);
  PersistentLaunchEstimate e(head_groups, std::min<int64_t>(num_sms, units), cost, loads);
  // Whole items: the rest of the tile the cut ends in, then whole tiles.
  const int64_t first_tile = cut / head_groups;
  if (cut % head_groups != 0)
    e.add_units(cost.item_us + cost.key_us * double(keys(first_tile)), head_groups - cut % head_groups);
  for (int64_t i = ceil_div(cut, head_groups); i < n; ++i) e.add_tile(keys(i));
  // Parts, item by item (one tile's items in one run).
  for (int64_t c = 0; c < cut;) {
    const int64_t tile = c / head_groups, run = std::min(cut, (tile + 1) * head_groups) - c;
    const int64_t share = (keys(tile) + parts - 1) / parts;
    e.add_units(cost.item_us + kExtendPartMergeUs + cost.key_us * double(share), run * parts);
    c += run;
  }
  return e.us();
}

// The fastest cut of a persistent launch that beats `beat_us` (the best whole-item launch) by
// kCutMargin: `*cut` items in `*parts` parts (0 and 1: none, when no cut does), and its estimate.
// Candidates: for each part count up to max_parts, the cuts that bring the units to just past a
// whole number of rounds of num_sms (the balanced counts; a search over every cut finds the same
// best within 0.1% on the shapes of docs/extend_work_balance.md). No launch ends before its CTAs'
// mean load (a cut only adds to the total: each part's fixed cost and merge), so a launch already
// that close to it, and a candidate whose mean is past the best so far, are not dealt out.
template <typename Keys>
double fastest_item_cut(const Keys& keys, int64_t n, int64_t head_groups, int num_sms, const ExtendItemCost& cost,
                        int max_parts, int64_t max_cut, double beat_us, int64_t* cut, int* parts,
                        std::vector<double>* loads) {
  const int64_t items = n * head_groups, sms = num_sms < 1 ? 1 : num_sms;
  *cut = 0;
  *parts = 1;
  double load = 0.0;
  for (int64_t i = 0; i < n; ++i) load += (cost.item_us + cost.key_us * double(keys(i))) * double(head_groups);
  auto mean_us = [&](double total) { return kPersistentStartUs + total / double(sms); };
  double best = beat_us / kCutMargin;  // a cut must estimate below this
  if (mean_us(load) >= best) return beat_us;
  const int64_t rounds = ceil_div(items, sms);
  for (int s = 2; s <= max_parts; ++s)
    for (int64_t m = rounds; m < rounds + 4; ++m)
      for (int64_t k : {(m * sms - items) / (s - 1), ceil_div(m * sms - items, s - 1)}) {
        if (k < 1 || k > std::min(items, max_cut)) continue;
        const double added = double(k) * ((s - 1) * cost.item_us + s * kExtendPartMergeUs);
        if (mean_us(load + added) >= best) continue;
        const double us = persistent_cut_us(keys, n, head_groups, num_sms, cost, k, s, loads);
        if (us < best) best = us, *cut = k, *parts = s;
      }
  return *cut > 0 ? best : beat_us;
}

// The decode half: its launches, `kv_bytes` of K/V over HBM, and `waves` waves of CTAs each
// streaming at most `longest_bytes` (a linear fit: the last two overlap only in part).
inline double decode_half_us(double kv_bytes, int64_t waves, double longest_bytes) {
  return kDecodeHalfUs + kv_bytes * kDecodeByteUs + double(waves) * longest_bytes * kDecodeCtaByteUs;
}

// The decode half's estimate in its parts (decode_half_us): its bytes over HBM, its CTAs in waves
// of `slots`, each wave as long as its longest CTA's stream.
struct DecodeHalfCost {
  double bytes_us = 0.0;  // kv_bytes x kDecodeByteUs
  int64_t ctas = 0;       // stage 1's CTAs
  int64_t slots = 1;      // CTAs the GPU runs at once (num_sms x ctas_per_sm)
  double wave_us = 0.0;   // longest_bytes x kDecodeCtaByteUs
  double us() const { return kDecodeHalfUs + bytes_us + double(ceil_div(ctas, slots)) * wave_us; }
};

// The two halves of a split step side by side. The decode's stage 1 launches as the extend's
// programmatic dependent (cuda/common/pdl.cuh), so it runs from the extend's start on the SMs the
// extend launch leaves free, at a share of its rate alone that grows with them (a decode CTA
// streams more than an SM's share of HBM) up to a cap; what is left when the extend is done runs
// on every SM: its share of the bytes, and its CTAs in whole waves (a decode of one wave of long
// CTAs gains nothing from starting a few of them early). Fitted on an H100 (session 27,
// benchmarks/RESULTS.md: the halves alone and extend_leave_sms 22-88 on cases B, D, E, K): the
// shares implied by each step were 1.3-1.9x free SMs / num_sms (32-47 GB/s an SM of its 3.22
// TB/s), never above ~0.67. Not measured on the H200. If an SM streams no faster there (its
// share then 1.1x, its cap 0.44 of 4.7 TB/s), the plans these constants choose on cases B-K
// still estimate 0-3% faster than leaving none, not slower (the note of session 27).
constexpr double kOverlapDecodeRatePerSm = 1.6;  // share of the decode's rate per share of the SMs
constexpr double kOverlapDecodeRateMax = 0.65;   // the most the decode gets beside a running extend
inline double overlapped_step_us(double extend_us, int64_t extend_ctas, int num_sms, const DecodeHalfCost& d) {
  const int sms = num_sms < 1 ? 1 : num_sms;
  const int64_t free_sms = std::max<int64_t>(0, sms - extend_ctas);
  const double rate = std::min(kOverlapDecodeRateMax, kOverlapDecodeRatePerSm * double(free_sms) / double(sms));
  const double alone_us = d.us();
  const double done = alone_us > 0.0 ? std::min(1.0, rate * extend_us / alone_us) : 1.0;  // share done beside
  if (done >= 1.0) return extend_us;
  const int64_t ctas_left = int64_t(std::ceil((1.0 - done) * double(d.ctas)));
  return extend_us + kDecodeHalfUs + (1.0 - done) * d.bytes_us +
         double(ceil_div(ctas_left, std::max<int64_t>(1, d.slots))) * d.wave_us;
}
// A step leaves SMs to its decode (plan.cc, step 3f) where that estimates at least this much
// faster than the launch the extend alone would take: the model above errs by a few percent.
constexpr double kLeaveSmsMargin = 1.03;
// ... and not where the overlap was measured to lose (H100, session 27), with the model above
// predicting a gain: an extend whose K/V, read once at the HBM rate, take more than this share of
// its estimate (case J, 64 extends of 32 tokens over 2k keys: ~56%; 0.570 -> 0.608 ms with N = 52;
// every case that gained: under 3%), which leaves the decode beside it no spare bandwidth ...
constexpr double kLeaveMaxExtendStream = 0.10;
// ... or a decode half estimated below this share of the extend's (case I, 2048 tokens over a 64k
// prefix beside 8 decodes at 128k: 0.25; 5.07 -> 5.22 ms with N = 16; every case that gained:
// 0.64 or more). The gain is at most the decode half, while a longer extend costs in proportion
// to it (its estimate's error, and its contention with the decode's stream, which the model above
// leaves out); where exactly between 0.25 and 0.64 the loss turns to gain is not measured.
constexpr double kLeaveMinDecodeShare = 0.5;

// The other order (plan.cc, step 3g): the decode's stage 1 first, the extend as its programmatic
// dependent. Stage 1's CTAs run in waves of d.slots (rows of equal length finish a wave together,
// as they share HBM alike); its last wave holds fewer CTAs, so SMs with none of them (an extend CTA
// needs a whole SM) idle from that wave's start to the decode's end, that wave's share of its
// bytes. The extend's CTAs take those SMs first: its work (its launch time on the SMs it holds)
// beyond that idle time is spread over every SM after the decode, where the extend is no longer
// than that wave. First fit, on an H100 (session
// 34, benchmarks/RESULTS.md): case A (a 512-token extend beside 128 decodes at 4k, 3.9 waves) this
// estimates the extend +1-7 us past the decode, measured +9 (extend first: +18); case C (7.8
// waves) 0, measured +3.
inline double decode_first_step_us(double extend_us, int64_t extend_ctas, int num_sms, const DecodeHalfCost& d) {
  const int sms = num_sms < 1 ? 1 : num_sms;
  const double alone_us = d.us();
  const double work = extend_us * double(std::min<int64_t>(std::max<int64_t>(1, extend_ctas), sms));
  if (d.ctas <= 0) return alone_us + work / double(sms);
  const int64_t slots = std::max<int64_t>(1, d.slots);
  const int64_t per_sm = std::max<int64_t>(1, slots / sms);
  const int64_t last = d.ctas - (ceil_div(d.ctas, slots) - 1) * slots;  // CTAs of the last wave
  const int64_t idle_sms = std::max<int64_t>(0, sms - ceil_div(last, per_sm));
  const double last_wave_us = (alone_us - kDecodeHalfUs) * double(last) / double(d.ctas);
  // An extend longer than that wave: the CTAs that find no idle SM start near the decode's end and
  // run their whole share after it (a persistent CTA's share is about the launch's time), so this
  // order is estimated to gain nothing.
  if (extend_us > last_wave_us) return alone_us + extend_us;
  return alone_us + std::max(0.0, work - double(idle_sms) * last_wave_us) / double(sms);
}
// A step takes that order (decode_first=-1) where it estimates at least this much faster than the
// extend first: its gain is at most the extend's time, a few percent of such a step (A: 1.2%).
constexpr double kDecodeFirstMargin = 1.005;

}  // namespace mixed_attn
