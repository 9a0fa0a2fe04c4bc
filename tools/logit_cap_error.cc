// Max error of the two tanh formulas the kernels used for the logit cap, in fp32 on the CPU,
// against tanh in double:  g++ -O2 tools/logit_cap_error.cc -o /tmp/lce && /tmp/lce
//   exp2 form: 1 - 2 / (2^(2x log2 e) + 1)  (the decode kernel before; the Triton oracle)
//   tanhf:     tanhf                       (the extend kernels; now every GPU kernel,
//                                           common/math.cuh; CUDA's tanhf is within 2 ulp too)
// The GPU's ex2.approx (2 ulp) and __fdividef (2 ulp) are modelled by perturbing
// their results by +-2 ulp. What the softmax sees is cap * tanh, in log2 units: an
// absolute error err in tanh moves a weight by a factor 2^(cap * log2e * err).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

static float ulp_shift(float x, int k) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if (x == 0.f || !std::isfinite(x)) return x;
  u += k;
  float y;
  std::memcpy(&y, &u, 4);
  return y;
}

int main() {
  double worst_abs[2] = {0, 0}, worst_rel[2] = {0, 0}, at_abs[2] = {0, 0};
  double worst_abs_pert = 0;
  for (int64_t i = 0; i <= 4000000; ++i) {
    const float x = -20.f + 40.f * float(i) / 4000000.f;
    const double ref = std::tanh(double(x));
    const float e = std::exp2(x * (2.0f * 1.4426950408889634f));
    const float f_exp2 = 1.0f - 2.0f / (e + 1.0f);
    const float f_tanhf = std::tanh(x);
    const float vals[2] = {f_exp2, f_tanhf};
    for (int k = 0; k < 2; ++k) {
      const double ae = std::fabs(double(vals[k]) - ref);
      if (ae > worst_abs[k]) {
        worst_abs[k] = ae;
        at_abs[k] = x;
      }
      if (std::fabs(ref) > 1e-3) worst_rel[k] = std::fmax(worst_rel[k], ae / std::fabs(ref));
    }
    for (int pe = -2; pe <= 2; pe += 4)
      for (int pd = -2; pd <= 2; pd += 4) {
        const float ep = ulp_shift(e, pe);
        const float q = ulp_shift(2.0f / (ep + 1.0f), pd);
        worst_abs_pert = std::fmax(worst_abs_pert, std::fabs(double(1.0f - q) - ref));
      }
  }
  std::printf(
      "exp2 form: max abs err %.3g (at x=%g), max rel err (|tanh|>1e-3) %.3g; "
      "with ex2/fdividef at +-2 ulp: max abs err %.3g\n",
      worst_abs[0], at_abs[0], worst_rel[0], worst_abs_pert);
  std::printf("tanhf:     max abs err %.3g (at x=%g), max rel err (|tanh|>1e-3) %.3g\n", worst_abs[1], at_abs[1],
              worst_rel[1]);
  std::printf("fp32 ulp of 1.0 (the rounding of a score near cap): %.3g\n", std::ldexp(1.0, -23));
  return 0;
}
