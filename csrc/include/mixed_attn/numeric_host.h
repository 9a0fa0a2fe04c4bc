// Host-side element conversions (bf16, fp16, fp8 e4m3fn <-> float) for the
// CPU implementation. Torch-free; rounding is round-to-nearest-even like the
// GPU conversions, and fp8 saturates to +-448 as design.md asks.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

namespace mixed_attn::host {

struct bf16_t { uint16_t bits; };
struct fp16_t { uint16_t bits; };
struct fp8e4m3_t { uint8_t bits; };

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float to_float(float x) { return x; }
inline float to_float(bf16_t x) { return bits_float(uint32_t(x.bits) << 16); }

inline float to_float(fp16_t x) {
  const uint32_t sign = uint32_t(x.bits & 0x8000) << 16;
  const uint32_t exp = (x.bits >> 10) & 0x1f, man = x.bits & 0x3ff;
  if (exp == 0) {  // zero or subnormal: man * 2^-24
    float v = std::ldexp(float(man), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return bits_float(sign | 0x7f800000u | (man << 13));
  return bits_float(sign | ((exp + 112) << 23) | (man << 13));
}

inline float to_float(fp8e4m3_t x) {
  const bool neg = x.bits & 0x80;
  const int exp = (x.bits >> 3) & 0xf, man = x.bits & 0x7;
  float v;
  if (exp == 15 && man == 7) v = NAN;
  else if (exp == 0) v = std::ldexp(float(man), -9);
  else v = std::ldexp(float(8 + man), exp - 10);
  return neg ? -v : v;
}

template <typename T> T from_float(float x);

template <> inline float from_float<float>(float x) { return x; }

template <> inline bf16_t from_float<bf16_t>(float x) {
  uint32_t u = float_bits(x);
  if (std::isnan(x)) return {uint16_t((u >> 16) | 0x40)};
  u += 0x7fff + ((u >> 16) & 1);
  return {uint16_t(u >> 16)};
}

template <> inline fp16_t from_float<fp16_t>(float x) {
  const uint32_t u = float_bits(x);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000);
  const float a = std::fabs(x);
  if (std::isnan(x)) return {uint16_t(sign | 0x7e00)};
  if (a >= 65520.f) return {uint16_t(sign | 0x7c00)};  // rounds to inf
  if (a < 6.103515625e-05f) {  // subnormal half: multiples of 2^-24
    const float m = std::nearbyint(std::ldexp(a, 24));
    return {uint16_t(sign | uint16_t(m))};  // m == 1024 lands on the smallest normal
  }
  int e;
  std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1)
  float m = std::nearbyint(std::ldexp(a, 11 - e));  // in [1024, 2048]
  int exp = e - 1 + 15;
  if (m == 2048.f) {
    m = 1024.f;
    exp += 1;
  }
  if (exp >= 31) return {uint16_t(sign | 0x7c00)};
  return {uint16_t(sign | (exp << 10) | (uint16_t(m) - 1024))};
}

template <> inline fp8e4m3_t from_float<fp8e4m3_t>(float x) {
  if (std::isnan(x)) return {0x7f};
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  float a = std::fmin(std::fabs(x), 448.f);  // saturate
  if (a < 0.015625f) {  // below the smallest normal 2^-6: multiples of 2^-9
    const float m = std::nearbyint(std::ldexp(a, 9));  // 0..8; 8 is the smallest normal
    return {uint8_t(sign | uint8_t(m))};
  }
  int e;
  std::frexp(a, &e);
  float m = std::nearbyint(std::ldexp(a, 4 - e));  // in [8, 16]
  int exp = e - 1 + 7;
  if (m == 16.f) {
    m = 8.f;
    exp += 1;
  }
  return {uint8_t(sign | (exp << 3) | (uint8_t(m) - 8))};
}

}  // namespace mixed_attn::host
