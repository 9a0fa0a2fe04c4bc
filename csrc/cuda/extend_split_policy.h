// KV-split policy of the sm_90a extend kernel (extend_sm90.cuh): how many CTAs of a
// cluster share one query tile. Plain C++ (no CUDA, no torch) so that CI checks its
// decisions on the CPU (tests/test_extend_split_policy.py).
#pragma once
#include <cstdint>

namespace mixed_attn::gpu::extend_detail {

// KV splits per query tile for a launch of `blocks` (tile, head group) CTAs, one CTA per SM.
// Few long tiles leave SMs idle in the last wave (case D at 192 rows: 176 CTAs on 132 SMs run
// as two waves, 67% busy); splitting each tile's K/V range over S CTAs of a cluster turns that
// into S times as many CTAs of 1/S the work. Cost model in units of one unsplit CTA:
// ceil(blocks * S / SMs) / S; ties go to the split (measured, H200 2026-11-30: 128 CTAs of
// case D at d256 on 132 SMs, 0.782 ms unsplit, 0.744 split in two); launches of three waves
// or more keep S = 1 (their costliest-first order already fills the last wave; case B at
// d128, 688 CTAs: 0.905 ms unsplit, 0.945 split).
inline int sm90_kv_splits(int64_t blocks, int num_sms, int max_splits) {
  if (num_sms < 1 || blocks < 1 || blocks >= 3 * int64_t(num_sms)) return 1;
  int best = 1;
  double best_cost = double((blocks + num_sms - 1) / num_sms);
  for (int s = 2; s <= max_splits; ++s) {
    const double cost = double((blocks * s + num_sms - 1) / num_sms) / s;
    if (cost <= best_cost) best = s, best_cost = cost;
  }
  return best;
}

}  // namespace mixed_attn::gpu::extend_detail
