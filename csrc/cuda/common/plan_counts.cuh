// The step's counts as a kernel sees them: from device memory for graph-safe plans
// (a captured launch is replayed with whatever plan was uploaded since), else the
// ints the launcher passed. One place, so every kernel exits past the same bounds.
#pragma once
#include "mixed_attn/compat.h"
#include "mixed_attn/params.h"

namespace mixed_attn::gpu {

__device__ __forceinline__ int plan_count(const PlanView& plan, PlanCount which, int host_value) {
  return plan.maybe_counts != nullptr ? plan.maybe_counts[which] : host_value;
}

}  // namespace mixed_attn::gpu
