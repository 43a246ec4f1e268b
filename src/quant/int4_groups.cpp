#include "quant/int4_groups.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "core/half.hpp"

namespace infer {
namespace {

float round_scale(float d, ScalePrecision p) noexcept {
  switch (p) {
    case ScalePrecision::f16: return f16_to_f32(f32_to_f16(d));
    case ScalePrecision::bf16: return bf16_to_f32(f32_to_bf16(d));
    case ScalePrecision::f32: break;
  }
  return d;
}

// The code of x for scale d and zero point z, clamp(nearbyint(x / d) + z, 0, 15), as a float, in
// operations a compiler can run on a vector of values: x / d is first held to [-32, 48] (a NaN
// to -32), which changes no code since z is in [0, 15], and there adding and subtracting
// 1.5 * 2^23 rounds it to an integer as nearbyint does (in the current rounding mode).
inline float code_f(float x, float d, float z) noexcept {
  constexpr float kRound = 12582912.0f;
  float v = x / d;
  v = v > -32.0f ? v : -32.0f;
  v = v < 48.0f ? v : 48.0f;
  float q = ((v + kRound) - kRound) + z;
  q = q > 0.0f ? q : 0.0f;
  return q < 15.0f ? q : 15.0f;
}
inline int code_of(float x, float d, float z) noexcept { return static_cast<int>(code_f(x, d, z)); }

struct Choice {
  float d = 0.0f, z = 8.0f;
  double err = 0.0;
};

// The search's passes over a group. The sums run in double, in four running sums (value i into sum
// i mod 4, added as (s0 + s1) + (s2 + s3) at the end) so that each addition need not wait for the
// previous one. Where the baseline has SSE2 (x86-64) four values go at a time (kVector; a lane of
// the two-double registers is one of the sums), the scalar loop is the twin: the same operations
// on every value in the same order, so both give the same bits (tests/unit/test_int4_groups.cpp),
// on every machine and thread count.
constexpr int kLanes = 4;

double lanes_total(const double* s) noexcept { return (s[0] + s[1]) + (s[2] + s[3]); }

#if defined(__SSE2__)
constexpr bool kHaveVector = true;

// code_f(x_i, d, z) - z of four values: the same operations (maxps / minps keep the second
// operand where the first is NaN, as code_f's comparisons do).
inline __m128 steps4(const float* x, __m128 d, __m128 z) noexcept {
  const __m128 round = _mm_set1_ps(12582912.0f);
  __m128 v = _mm_div_ps(_mm_loadu_ps(x), d);
  v = _mm_min_ps(_mm_max_ps(v, _mm_set1_ps(-32.0f)), _mm_set1_ps(48.0f));
  __m128 q = _mm_add_ps(_mm_sub_ps(_mm_add_ps(v, round), round), z);
  q = _mm_min_ps(_mm_max_ps(q, _mm_setzero_ps()), _mm_set1_ps(15.0f));
  return _mm_sub_ps(q, z);
}
inline __m128d low_pd(__m128 v) noexcept { return _mm_cvtps_pd(v); }
inline __m128d high_pd(__m128 v) noexcept { return _mm_cvtps_pd(_mm_movehl_ps(v, v)); }
inline void weights4(const float* imp, __m128d& w01, __m128d& w23) noexcept {
  if (imp) {
    const __m128 w = _mm_loadu_ps(imp);
    w01 = low_pd(w);
    w23 = high_pd(w);
  } else {
    w01 = w23 = _mm_set1_pd(1.0);
  }
}
#else
constexpr bool kHaveVector = false;
#endif

// Error of (d, z) on the group with codes re-chosen for d.
template <bool kVector>
double group_error(const float* x, const float* imp, int64_t g, float d, float z) noexcept {
  double e[kLanes] = {};
  int64_t i = 0;
#if defined(__SSE2__)
  if constexpr (kVector) {
    const __m128 vd = _mm_set1_ps(d), vz = _mm_set1_ps(z);
    const __m128d dd = _mm_set1_pd(d);
    __m128d e01 = _mm_setzero_pd(), e23 = _mm_setzero_pd(), w01, w23;
    for (; i + 4 <= g; i += 4) {
      const __m128 c = steps4(x + i, vd, vz), xv = _mm_loadu_ps(x + i);
      weights4(imp ? imp + i : nullptr, w01, w23);
      const __m128d r01 = _mm_sub_pd(low_pd(xv), _mm_mul_pd(dd, low_pd(c)));
      const __m128d r23 = _mm_sub_pd(high_pd(xv), _mm_mul_pd(dd, high_pd(c)));
      e01 = _mm_add_pd(e01, _mm_mul_pd(_mm_mul_pd(w01, r01), r01));
      e23 = _mm_add_pd(e23, _mm_mul_pd(_mm_mul_pd(w23, r23), r23));
    }
    _mm_storeu_pd(e, e01);
    _mm_storeu_pd(e + 2, e23);
  }
#endif
  for (; i < g; ++i) {
    const double r = static_cast<double>(x[i]) - static_cast<double>(d) * static_cast<double>(code_f(x[i], d, z) - z);
    e[i % kLanes] += (imp ? static_cast<double>(imp[i]) : 1.0) * r * r;
  }
  return lanes_total(e);
}

// A candidate scale d0 with zero point z: codes for d0, the least-squares scale on them, rounded to
// the storage precision; its error with codes re-chosen for that scale.
template <bool kVector>
Choice candidate(const float* x, const float* imp, int64_t g, float d0, float z, ScalePrecision p) noexcept {
  double num[kLanes] = {}, den[kLanes] = {};
  int64_t i = 0;
#if defined(__SSE2__)
  if constexpr (kVector) {
    const __m128 vd = _mm_set1_ps(d0), vz = _mm_set1_ps(z);
    __m128d n01 = _mm_setzero_pd(), n23 = _mm_setzero_pd(), q01 = _mm_setzero_pd(), q23 = _mm_setzero_pd(), w01, w23;
    for (; i + 4 <= g; i += 4) {
      const __m128 c = steps4(x + i, vd, vz), xv = _mm_loadu_ps(x + i);
      weights4(imp ? imp + i : nullptr, w01, w23);
      const __m128d c01 = low_pd(c), c23 = high_pd(c);
      n01 = _mm_add_pd(n01, _mm_mul_pd(_mm_mul_pd(w01, low_pd(xv)), c01));
      n23 = _mm_add_pd(n23, _mm_mul_pd(_mm_mul_pd(w23, high_pd(xv)), c23));
      q01 = _mm_add_pd(q01, _mm_mul_pd(_mm_mul_pd(w01, c01), c01));
      q23 = _mm_add_pd(q23, _mm_mul_pd(_mm_mul_pd(w23, c23), c23));
    }
    _mm_storeu_pd(num, n01);
    _mm_storeu_pd(num + 2, n23);
    _mm_storeu_pd(den, q01);
    _mm_storeu_pd(den + 2, q23);
  }
#endif
  for (; i < g; ++i) {
    const double ci = code_f(x[i], d0, z) - z, w = imp ? static_cast<double>(imp[i]) : 1.0;
    num[i % kLanes] += w * static_cast<double>(x[i]) * ci;
    den[i % kLanes] += w * ci * ci;
  }
  const double nu = lanes_total(num), de = lanes_total(den);
  float d = de > 0.0 && nu > 0.0 ? static_cast<float>(nu / de) : d0;
  d = round_scale(d, p);
  if (!(d > 0.0f) || !std::isfinite(d)) d = round_scale(d0, p);
  return {d, z, d > 0.0f ? group_error<kVector>(x, imp, g, d, z) : 1e300};
}

// The best (d, z) for a group of g values.
template <bool kVector = kHaveVector>
Choice choose(const float* x, const float* imp, int64_t g, bool symmetric, ScalePrecision p) noexcept {
  float lo = 0.0f, hi = 0.0f;
  for (int64_t i = 0; i < g; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  Choice best;
  best.err = 1e300;
  if (symmetric) {
    const float amax = std::max(-lo, hi);
    if (amax == 0.0f) return {0.0f, 8.0f, 0.0};
    // d0 = amax / m, m from 6 to 9 by quarters: m = 8 puts a negative extreme on -8 exactly, 7 a
    // positive one on +7; larger m clip the extremes, smaller ones spread the codes.
    for (int k = 0; k <= 12; ++k) {
      const Choice c = candidate<kVector>(x, imp, g, amax / (6.0f + 0.25f * static_cast<float>(k)), 8.0f, p);
      if (c.err < best.err) best = c;
    }
    return best;
  }
  if (hi - lo == 0.0f) return {0.0f, 8.0f, 0.0};  // lo = hi = 0 (the range always holds 0)
  // The range [lo, hi] (holding 0, as compressed-tensors' observer keeps it) shrunk by p.
  for (int k = 0; k <= 8; ++k) {
    const float shrink = 1.0f - 0.04f * static_cast<float>(k);
    const float d0 = (hi - lo) * shrink / 15.0f;
    const float z = std::clamp(std::nearbyint(-lo * shrink / d0), 0.0f, 15.0f);
    const Choice c = candidate<kVector>(x, imp, g, d0, z, p);
    if (c.err < best.err) best = c;
  }
  return best;
}

uint8_t* block_at(void* dst, int64_t group, int64_t b) noexcept {
  return static_cast<uint8_t*>(dst) + b * i4_block_bytes(group);
}

void store_block(uint8_t* blk, int64_t g, float d, float z, const float* x) noexcept {
  std::memcpy(blk, &d, 4);
  std::memcpy(blk + 4, &z, 4);
  uint8_t* qs = blk + 8;
  for (int64_t c = 0; c < g / kI4RunElements; ++c)
    for (int k = 0; k < 16; ++k) {
      const int lo = d > 0.0f ? code_of(x[32 * c + k], d, z) : static_cast<int>(z);
      const int hi = d > 0.0f ? code_of(x[32 * c + 16 + k], d, z) : static_cast<int>(z);
      qs[16 * c + k] = static_cast<uint8_t>(lo | (hi << 4));
    }
}

inline int code_at(const uint8_t* qs, int64_t i) noexcept {
  const uint8_t b = qs[16 * (i / 32) + (i % 16)];
  return (i % 32) < 16 ? (b & 15) : (b >> 4);
}

template <int64_t G>
void dequantize_groups(const void* src, float* dst, int64_t n) noexcept {
  assert(n % G == 0);
  for (int64_t b = 0; b < n / G; ++b) {
    const auto* blk = static_cast<const uint8_t*>(src) + b * i4_block_bytes(G);
    float d, z;
    std::memcpy(&d, blk, 4);
    std::memcpy(&z, blk + 4, 4);
    for (int64_t i = 0; i < G; ++i) dst[b * G + i] = d * (static_cast<float>(code_at(blk + 8, i)) - z);
  }
}

}  // namespace

I4Group i4_choose_group(const float* x, const float* importance, int64_t g, bool symmetric, ScalePrecision p) noexcept {
  const Choice c = choose(x, importance, g, symmetric, p);
  return {c.d, c.z, c.err};
}

I4Group i4_choose_group_ref(const float* x, const float* importance, int64_t g, bool symmetric, ScalePrecision p) noexcept {
  const Choice c = choose<false>(x, importance, g, symmetric, p);
  return {c.d, c.z, c.err};
}

int i4_code(float x, I4Group grp) noexcept { return grp.d > 0.0f ? code_of(x, grp.d, grp.z) : static_cast<int>(grp.z); }

void i4_store_block(void* dst, int64_t g, int64_t b, I4Group grp, const float* x) noexcept {
  store_block(block_at(dst, g, b), g, grp.d, grp.z, x);
}

std::optional<DType> i4_type_of_group(int64_t group) noexcept {
  if (group == 32) return DType::i4_g32;
  if (group == 64) return DType::i4_g64;
  if (group == 128) return DType::i4_g128;
  return std::nullopt;
}

void quantize_row_i4(const float* x, void* dst, int64_t n, const I4QuantOptions& o) noexcept {
  assert(o.group > 0 && n % o.group == 0);
  for (int64_t b = 0; b < n / o.group; ++b) {
    const float* xg = x + b * o.group;
    const Choice c = choose(xg, o.importance ? o.importance + b * o.group : nullptr, o.group, o.symmetric, o.scale_precision);
    store_block(block_at(dst, o.group, b), o.group, c.d, c.z, xg);
  }
}

double i4_row_error(const float* x, int64_t n, const I4QuantOptions& o) noexcept {
  double e = 0.0;
  for (int64_t b = 0; b < n / o.group; ++b)
    e += choose(x + b * o.group, o.importance ? o.importance + b * o.group : nullptr, o.group, o.symmetric,
                o.scale_precision)
             .err;
  return e;
}

void quantize_row_i4_g32(const float* x, void* dst, int64_t n) noexcept { quantize_row_i4(x, dst, n, {.group = 32}); }
void quantize_row_i4_g64(const float* x, void* dst, int64_t n) noexcept { quantize_row_i4(x, dst, n, {.group = 64}); }
void quantize_row_i4_g128(const float* x, void* dst, int64_t n) noexcept { quantize_row_i4(x, dst, n, {.group = 128}); }
void dequantize_i4_g32(const void* src, float* dst, int64_t n) noexcept { dequantize_groups<32>(src, dst, n); }
void dequantize_i4_g64(const void* src, float* dst, int64_t n) noexcept { dequantize_groups<64>(src, dst, n); }
void dequantize_i4_g128(const void* src, float* dst, int64_t n) noexcept { dequantize_groups<128>(src, dst, n); }

Status i4_rows_from_compressed(const Int4GroupWeight& w, DType type, void* dst) {
  const int64_t G = i4_group_size(type);
  if (G == 0) return invalid_argument("int4 weight: " + std::string(dtype_name(type)) + " is no INT4 type");
  if (w.rows < 0 || w.n <= 0 || w.group <= 0 || w.n % w.group != 0 || w.group % G != 0)
    return invalid_argument("int4 weight: rows of " + std::to_string(w.n) + " in groups of " + std::to_string(w.group) +
                            " do not make whole groups of " + std::to_string(G));
  const int64_t groups = w.n / w.group;
  const auto count = static_cast<size_t>(w.rows) * static_cast<size_t>(w.n);
  const auto n_scales = static_cast<size_t>(w.rows) * static_cast<size_t>(groups);
  if (w.values.size() != count || w.scale.size() != n_scales || (!w.zero_point.empty() && w.zero_point.size() != n_scales))
    return invalid_argument("int4 weight: " + std::to_string(w.values.size()) + " values, " + std::to_string(w.scale.size()) +
                            " scales and " + std::to_string(w.zero_point.size()) + " zero points for " +
                            std::to_string(w.rows) + " rows of " + std::to_string(w.n) + " in groups of " +
                            std::to_string(w.group));
  for (float s : w.scale)
    if (!std::isfinite(s) || s < 0.0f) return invalid_argument("int4 weight: a scale is negative or not finite");
  for (int8_t v : w.values)
    if (v < -8 || v > 7) return invalid_argument("int4 weight: a value outside [-8, 7]");
  for (int8_t v : w.zero_point)
    if (v < -8 || v > 7) return invalid_argument("int4 weight: a zero point outside [-8, 7]");
  const int64_t blocks = w.n / G;
  for (int64_t r = 0; r < w.rows; ++r)
    for (int64_t b = 0; b < blocks; ++b) {
      const size_t s = static_cast<size_t>(r * groups + b * G / w.group);
      const float d = w.scale[s];
      const float z = w.zero_point.empty() ? 8.0f : static_cast<float>(w.zero_point[s] + 8);
      uint8_t* blk = block_at(dst, G, r * blocks + b);
      std::memcpy(blk, &d, 4);
      std::memcpy(blk + 4, &z, 4);
      const int8_t* v = w.values.data() + r * w.n + b * G;
      for (int64_t c = 0; c < G / kI4RunElements; ++c)
        for (int k = 0; k < 16; ++k)
          blk[8 + 16 * c + k] = static_cast<uint8_t>((v[32 * c + k] + 8) | ((v[32 * c + 16 + k] + 8) << 4));
    }
  return Status::ok();
}

void i4_row_to_compressed(const void* src, DType type, int64_t n, int8_t* values, float* scale, int8_t* zero_point) noexcept {
  const int64_t G = i4_group_size(type);
  for (int64_t b = 0; b < n / G; ++b) {
    const auto* blk = static_cast<const uint8_t*>(src) + b * i4_block_bytes(G);
    float z;
    std::memcpy(&scale[b], blk, 4);
    std::memcpy(&z, blk + 4, 4);
    zero_point[b] = static_cast<int8_t>(static_cast<int>(z) - 8);
    for (int64_t i = 0; i < G; ++i) values[b * G + i] = static_cast<int8_t>(code_at(blk + 8, i) - 8);
  }
}

void pack_int4_words(const int8_t* values, int64_t n, int32_t* words) noexcept {
  for (int64_t w = 0; w < n / 8; ++w) {
    uint32_t u = 0;
    for (int k = 0; k < 8; ++k) u |= static_cast<uint32_t>((values[8 * w + k] + 8) & 15) << (4 * k);
    std::memcpy(&words[w], &u, 4);
  }
}

void unpack_int4_words(const int32_t* words, int64_t n, int8_t* values) noexcept {
  for (int64_t w = 0; w < n / 8; ++w) {
    uint32_t u;
    std::memcpy(&u, &words[w], 4);
    for (int k = 0; k < 8; ++k) values[8 * w + k] = static_cast<int8_t>(static_cast<int>((u >> (4 * k)) & 15) - 8);
  }
}

}  // namespace infer
