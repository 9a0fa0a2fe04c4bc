// Scalar math every attention kernel shares (CUDA and HIP): the log2 constants, the fast
// exp2, and the logit cap. Scores live in the log2 domain inside the kernels (score * log2 e),
// so every exponential is an exp2; LSEs leave the kernels in natural-log units.
#pragma once
#include "mixed_attn/compat.h"

namespace mixed_attn::gpu {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// 2^x. CUDA: ex2.approx.ftz (2 ulp; results below 2^-126 flush to 0, which no softmax
// weight needs). HIP: exp2f lowers to v_exp_f32 (with a small denormal fix-up).
__device__ __forceinline__ float fast_exp2(float x) {
#if defined(MA_CUDA)
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
#else
  return exp2f(x);
#endif
}

// tanh through one exp2: 1 - 2 / (e^{2x} + 1). Saturates to +-1 without NaN for large |x|.
// Absolute error below 6e-7 (tools/logit_cap_error.cc, with ex2 and the division at 2 ulp);
// the softmax sees cap * tanh as an absolute shift of the score, so that is what matters
// (cap 50: a weight moves by less than 3e-5, far below bf16 resolution). The Triton oracle
// (python/mixed_attn/triton_ref.py) uses the same formula.
__device__ __forceinline__ float tanh_exp2(float x) {
  const float e = fast_exp2(x * (2.0f * kLog2e));
  return 1.0f - __fdividef(2.0f, e + 1.0f);
}

// The logit cap: cap * tanh(raw * scale / cap), in log2 units. `inner` = scale / cap,
// `outer_log2` = cap * log2 e (both computed once per launch).
__device__ __forceinline__ float logit_cap_log2(float raw, float inner, float outer_log2) {
  return outer_log2 * tanh_exp2(raw * inner);
}

}  // namespace mixed_attn::gpu
