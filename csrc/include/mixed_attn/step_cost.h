// Estimated GPU time of a step's launches, for the planner's two performance decisions: the
// sm_90a extend kernel's KV split and, in mode "auto", split or fold dispatch of a step.
//
// Plain C++ (no torch, no CUDA). A linear model fitted to per-layer times measured on the H200
// (lab sweeps of 1238 step compositions at 32/8/128 and 8/1/128, page 16, and the sm_90a kernel
// at head dim 128; benchmarks/RESULTS.md, session 8, has the fit and its errors: median 7-10%).
// Other head dims and kernels scale the per-key cost by the work a key costs a CTA (rows x head
// dim); other GPUs use the H200's constants (both halves scale with the GPU, the decisions
// depend on their ratio).
#pragma once
#include <cstdint>

namespace mixed_attn {

// Microseconds. An extend launch is modelled as rounds of one CTA per SM in the plan's
// costliest-first tile order: each round costs a CTA's fixed part (Q load, pipeline fill,
// epilogue: about 500 keys' worth) plus the keys of its first, longest CTA.
constexpr double kStepFixedUs = 10.6;        // KV save and the first launch of a step
constexpr double kExtendRoundUs = 9.9;       // fixed part of one CTA, per round
constexpr double kExtendSplitRoundUs = 7.0;  // more per round under a KV split (cluster merge)
constexpr double kExtendKeyUs = 0.0196;      // one key of a 192-row x 128-dim CTA
constexpr double kDecodeHalfUs = 17.0;       // the decode half's launches (stage 1 and merge)
constexpr double kDecodeByteUs = 2.2e-7;     // K/V bytes of the decode half over HBM (4.5 TB/s)
constexpr double kDecodeCtaByteUs = 7.7e-6;  // K/V bytes of one decode CTA's split (130 GB/s)

// Per-key cost of one extend CTA of `block_rows` query rows at `head_dim`.
inline double extend_key_us(int block_rows, int head_dim) {
  return kExtendKeyUs * (double(block_rows) * head_dim) / (192.0 * 128.0);
}

// One extend launch, tiles fed costliest first (add_tile), `ctas_per_tile` CTAs per tile (head
// groups) each split over `splits` CTAs, one CTA per SM.
class ExtendLaunchEstimate {
 public:
  ExtendLaunchEstimate(int64_t ctas_per_tile, int splits, int num_sms)
      : per_tile_(ctas_per_tile * splits), splits_(splits), sms_(num_sms < 1 ? 1 : num_sms) {}
  // The CTAs [n, n + per_tile) of this tile start a round at every multiple of sms.
  void add_tile(int64_t keys) {
    const int64_t rounds = ceil_div(ctas_ + per_tile_, sms_) - ceil_div(ctas_, sms_);
    rounds_ += rounds;
    first_keys_ += double(rounds) * double(ceil_div(keys, splits_));
    ctas_ += per_tile_;
  }
  // Launch time; 0 for an empty launch (none is made).
  double us(double key_us) const {
    if (ctas_ == 0) return 0.0;
    const double round = kExtendRoundUs + (splits_ > 1 ? kExtendSplitRoundUs : 0.0);
    return double(rounds_) * round + first_keys_ * key_us;
  }

 private:
  static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
  int64_t per_tile_, splits_, sms_;
  int64_t ctas_ = 0, rounds_ = 0;
  double first_keys_ = 0.0;
};

// The decode half: its launches, `kv_bytes` of K/V over HBM, and `waves` waves of CTAs each
// streaming at most `longest_bytes` (a linear fit: the last two overlap only in part).
inline double decode_half_us(double kv_bytes, int64_t waves, double longest_bytes) {
  return kDecodeHalfUs + kv_bytes * kDecodeByteUs + double(waves) * longest_bytes * kDecodeCtaByteUs;
}

}  // namespace mixed_attn
