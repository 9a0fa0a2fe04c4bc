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

// The logit cap: cap * tanh(raw * scale / cap), in log2 units. `inner` = scale / cap,
// `outer_log2` = cap * log2 e (both computed once per launch). tanhf (2 ulp, absolute error
// ~1e-7 and relative error ~2e-7 everywhere; tools/logit_cap_error.cc) rather than tanh from
// one exp2 (1 - 2 / (e^{2x} + 1): absolute error up to 6e-7 with ex2.approx, and relative
// error unbounded near 0): both are accurate enough once multiplied by the cap, but the exp2
// form's division costs the register-bound sm_90a consumer extra spills. The CPU reference
// (csrc/cpu/attention_cpu.cc) uses std::tanh, the Triton oracle the exp2 form.
__device__ __forceinline__ float logit_cap_log2(float raw, float inner, float outer_log2) {
  return outer_log2 * tanhf(raw * inner);
}

}  // namespace mixed_attn::gpu
