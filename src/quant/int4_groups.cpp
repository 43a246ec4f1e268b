#include "quant/int4_groups.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>

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

// The codes of a group for scale d and zero point z: clamp(round(x / d) + z, 0, 15).
inline int code_of(float x, float d, float z) noexcept {
  const float q = std::nearbyint(x / d) + z;
  return static_cast<int>(std::clamp(q, 0.0f, 15.0f));
}

struct Choice {
  float d = 0.0f, z = 8.0f;
  double err = 0.0;
};

// Error of (d, z) on the group with codes re-chosen for d.
double group_error(const float* x, const float* imp, int64_t g, float d, float z) noexcept {
  double e = 0.0;
  for (int64_t i = 0; i < g; ++i) {
    const double r = static_cast<double>(x[i]) - static_cast<double>(d) * (code_of(x[i], d, z) - z);
    e += (imp ? imp[i] : 1.0) * r * r;
  }
  return e;
}

// A candidate scale d0 with zero point z: codes for d0, the least-squares scale on them, rounded to
// the storage precision; its error with codes re-chosen for that scale.
Choice candidate(const float* x, const float* imp, int64_t g, float d0, float z, ScalePrecision p) noexcept {
  double num = 0.0, den = 0.0;
  for (int64_t i = 0; i < g; ++i) {
    const double c = code_of(x[i], d0, z) - z, w = imp ? imp[i] : 1.0;
    num += w * x[i] * c;
    den += w * c * c;
  }
  float d = den > 0.0 && num > 0.0 ? static_cast<float>(num / den) : d0;
  d = round_scale(d, p);
  if (!(d > 0.0f) || !std::isfinite(d)) d = round_scale(d0, p);
  Choice c{d, z, 0.0};
  c.err = d > 0.0f ? group_error(x, imp, g, d, z) : 1e300;
  return c;
}

// The best (d, z) for a group of g values.
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
      const Choice c = candidate(x, imp, g, amax / (6.0f + 0.25f * static_cast<float>(k)), 8.0f, p);
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
    const Choice c = candidate(x, imp, g, d0, z, p);
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
  return {c.d, c.z};
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
