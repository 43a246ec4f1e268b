// The single-precision exp that ggml's CPU kernels use in their softmax and flash attention
// (ggml_v_expf), evaluated one element at a time with the same float operations, so that an
// attention computed with it reproduces llama.cpp's bit for bit. Within about 1.5 ulp of exp(x);
// exp(-inf) = 0, large arguments saturate to 0 or +inf.
//
// Method: n = round(x / ln 2) through the 1.5 * 2^23 shift; b = x - n ln 2 with ln 2 split in two
// parts (fused, so b is nearly exact); exp(b) - 1 = j by a degree-5 polynomial; the result is
// 2^n (1 + j). When |n| > 126, 2^n does not fit a float's exponent and is applied as two factors;
// beyond |n| > 192 the result is 0 or +inf.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace infer {

inline float exp_ggml(float x) noexcept {
  const float shift = 0x1.8p23f;
  const float z = std::fma(x, 0x1.715476p+0f, shift);  // x / ln 2 + shift: n in the low mantissa bits
  const float n = z - shift;
  const float b = std::fma(-n, 0x1.7f7d1cp-20f, std::fma(-n, 0x1.62e4p-1f, x));
  uint32_t zbits;
  std::memcpy(&zbits, &z, 4);
  const uint32_t e = zbits << 23;  // n in the exponent field (two's complement, wraps)
  const float u = b * b;
  const float j = std::fma(std::fma(std::fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, std::fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                           u, 0x1.ffffecp-1f * b);
  auto from_bits = [](uint32_t v) {
    float f;
    std::memcpy(&f, &v, 4);
    return f;
  };
  if (!(std::fabs(n) > 126.0f)) return std::fma(j, from_bits(e + 0x3f800000u), from_bits(e + 0x3f800000u));
  // 2^n = s1 * s2 with s1 = 2^-125 or 2^+127 (a plain power) and s2 carrying the rest.
  const uint32_t g = n <= 0.0f ? 0x82000000u : 0u;
  const float s1 = from_bits(g + 0x7f000000u);
  if (std::fabs(n) > 192.0f) return s1 * s1;
  const float s2 = from_bits(e - g);
  return std::fma(s2, j, s2) * s1;
}

}  // namespace infer
