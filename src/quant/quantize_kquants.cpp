// The K-quant reference quantizers (quantize.hpp). Each follows ggml's reference operation for
// operation: the scale searches below compare float sums whose every rounding must match ggml's,
// so expressions keep ggml's order and grouping, products of a float and an int convert the int
// first, and rounding goes through round_half_even (ggml's nearest_int).
#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

#include "core/half.hpp"
#include "quant/block_formats.hpp"
#include "quant/quantize.hpp"

namespace infer {

using namespace quant;

namespace {

// Below this a group counts as all zero (ggml's GROUP_MAX_EPS).
constexpr float kGroupMaxEps = 1e-15f;

// Round to nearest, ties to even, for |x| < 2^22: adding 1.5 * 2^23 leaves the rounded integer
// in the low mantissa bits. ggml rounds this way, which differs from std::round on ties.
inline int round_half_even(float x) {
  const float v = x + 12582912.0f;
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return static_cast<int>(bits & 0x007fffffu) - 0x00400000;
}

// The first element of largest magnitude of a group, signed, and that magnitude.
struct Extreme {
  float value;
  float magnitude;
};
Extreme group_extreme(int n, const float* x) {
  Extreme e{0.0f, 0.0f};
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > e.magnitude) e = {x[i], ax};
  }
  return e;
}

int symmetric_level(float v, int nmax) { return std::max(-nmax, std::min(nmax - 1, round_half_even(v))); }

// The levels of x * iscale in -nmax..nmax-1 with their sums weighted by qw (null: x^2): sum w x l
// and sum w l^2, accumulated in element order. Stores level + offset into L unless L is null.
struct LevelSums {
  float sumlx;
  float suml2;
};
LevelSums symmetric_sums(int n, int nmax, const float* x, float iscale, int8_t* L, int offset, const float* qw = nullptr) {
  LevelSums s{0.0f, 0.0f};
  for (int i = 0; i < n; ++i) {
    const int l = symmetric_level(iscale * x[i], nmax);
    if (L) L[i] = static_cast<int8_t>(l + offset);
    const float w = qw ? qw[i] : x[i] * x[i];
    s.sumlx += w * x[i] * static_cast<float>(l);
    s.suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  return s;
}

// Scale and levels L[i] in 0..2*nmax-1 (value (L - nmax) * scale) for a symmetric group of n,
// weights qw (null: x^2): start from the scale that maps the extreme to -nmax, then try 18 nearby
// scales and keep the least-squares one that most reduces the weighted error (ggml's
// make_qx_quants). Q6_K's groups; with importance weights also Q3_K's, Q4_0's and Q5_0's.
float fit_symmetric(int n, int nmax, const float* x, int8_t* L, const float* qw = nullptr) {
  const Extreme e = group_extreme(n, x);
  if (e.magnitude < kGroupMaxEps) {
    std::memset(L, 0, static_cast<size_t>(n));
    return 0.0f;
  }
  LevelSums s = symmetric_sums(n, nmax, x, static_cast<float>(-nmax) / e.value, L, nmax, qw);
  float scale = s.suml2 != 0.0f ? s.sumlx / s.suml2 : 0.0f;
  float best = scale * s.sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    const float iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / e.value;
    s = symmetric_sums(n, nmax, x, iscale, nullptr, 0, qw);
    if (s.suml2 > 0.0f && s.sumlx * s.sumlx > best * s.suml2) {
      for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(nmax + symmetric_level(iscale * x[i], nmax));
      scale = s.sumlx / s.suml2;
      best = scale * s.sumlx;
    }
  }
  return scale;
}

// Q3_K's groups: levels L in 0..2*nmax-1 as fit_symmetric, weights x^2, refined by up to five
// passes that move single elements to the level the current least-squares scale prefers.
float fit_symmetric_refined(int n, int nmax, const float* x, int8_t* L) {
  const Extreme e = group_extreme(n, x);
  if (e.magnitude < kGroupMaxEps) {
    std::memset(L, 0, static_cast<size_t>(n));
    return 0.0f;
  }
  const LevelSums s = symmetric_sums(n, nmax, x, static_cast<float>(-nmax) / e.value, L, 0);
  float sumlx = s.sumlx;
  float suml2 = s.suml2;
  for (int pass = 0; pass < 5; ++pass) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      const float li = static_cast<float>(L[i]);
      float slx = sumlx - w * x[i] * li;
      if (slx > 0.0f) {
        float sl2 = suml2 - w * li * li;
        const int new_l = symmetric_level(x[i] * sl2 / slx, nmax);
        if (new_l != L[i]) {
          slx += w * x[i] * static_cast<float>(new_l);
          sl2 += w * static_cast<float>(new_l) * static_cast<float>(new_l);
          if (sl2 > 0.0f && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<int8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++changed;
          }
        }
      }
    }
    if (changed == 0) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Scale and min (value scale * L - min, L in 0..nmax, min >= 0 returned in *neg_min) for a group
// of n with weights: start from the range, then try nstep + 1 level counts nmax + rmin + k*rdelta
// and keep the weighted least-squares fit of lowest error (absolute error when use_mad).
// Q2_K, Q4_K and Q5_K's groups. aux holds n scratch levels.
float fit_affine(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* neg_min, uint8_t* aux,
                 float rmin, float rdelta, int nstep, bool use_mad) {
  float min = x[0];
  float max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0.0f) min = 0.0f;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *neg_min = -min;
    return 0.0f;
  }
  const auto level = [nmax](float v) { return std::max(0, std::min(nmax, round_half_even(v))); };
  const auto error = [use_mad](float diff) { return use_mad ? std::fabs(diff) : diff * diff; };
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1.0f / iscale;
  float best_error = 0.0f;
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<uint8_t>(level(iscale * (x[i] - min)));
    best_error += weights[i] * error(scale * static_cast<float>(L[i]) + min - x[i]);
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0.0f;
    float sum_l2 = 0.0f;
    float sum_xl = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = level(iscale * (x[i] - min));
      aux[i] = static_cast<uint8_t>(l);
      const float w = weights[i];
      const float lf = static_cast<float>(l);
      sum_l += w * lf;
      sum_l2 += w * lf * lf;
      sum_xl += w * lf * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0.0f) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0.0f) {
        this_min = 0.0f;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0.0f;
      for (int i = 0; i < n; ++i)
        cur_error += weights[i] * error(this_scale * static_cast<float>(aux[i]) + this_min - x[i]);
      if (cur_error < best_error) {
        std::memcpy(L, aux, static_cast<size_t>(n));
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *neg_min = -min;
  return scale;
}

// Elements e, e+32, e+64, e+96 of each 128-element half as the 2-bit fields of qs byte e
// (block_formats.hpp); L holds 256 levels in 0..3.
void pack_2bit(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < kQKK; j += 128)
    for (int l = 0; l < 32; ++l)
      qs[j / 4 + l] = static_cast<uint8_t>(L[j + l] | L[j + l + 32] << 2 | L[j + l + 64] << 4 | L[j + l + 96] << 6);
}

// Q4_K / Q5_K: the eight sub-block fits of a super-block, their scales and mins quantized to
// 6 bits against F16 factors d and dmin, then every element re-rounded to 0..nmax against the
// stored values. Returns the levels in L.
template <class Block>
void quantize_super_block_k(const float* x, Block* b, int nmax, float rmin, int nstep, uint8_t* L) {
  float scales[8];
  float mins[8];
  float weights[32];
  uint8_t aux[32];
  float max_scale = 0.0f;
  float max_min = 0.0f;
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    float sum_x2 = 0.0f;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    const float av_x = std::sqrt(sum_x2 / 32.0f);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xs[l]);
    scales[j] = fit_affine(32, nmax, xs, weights, L + 32 * j, &mins[j], aux, rmin, 0.1f, nstep, false);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
  uint8_t sc[8];
  uint8_t m[8];
  for (int j = 0; j < 8; ++j) {
    // The uint8 conversion before the clip is ggml's.
    sc[j] = std::min<uint8_t>(63, static_cast<uint8_t>(round_half_even(inv_scale * scales[j])));
    m[j] = std::min<uint8_t>(63, static_cast<uint8_t>(round_half_even(inv_min * mins[j])));
  }
  kquant_pack_scale_mins(sc, m, b->scales);
  b->d = f32_to_f16(max_scale / 63.0f);
  b->dmin = f32_to_f16(max_min / 63.0f);
  for (int j = 0; j < 8; ++j) {
    const ScaleMin s = kquant_scale_min(b->scales, j);
    const float d = f16_to_f32(b->d) * static_cast<float>(s.sc);
    if (d == 0.0f) continue;
    const float dm = f16_to_f32(b->dmin) * static_cast<float>(s.m);
    for (int i = 0; i < 32; ++i)
      L[32 * j + i] = static_cast<uint8_t>(std::max(0, std::min(nmax, round_half_even((x[32 * j + i] + dm) / d))));
  }
}

// Levels L in 0..nmax for non-negative values (a super-block's sub-block scales or mins), weights
// qw: the scale that maps the largest to nmax and eight nearby ones, the least weighted error
// kept, then up to five passes moving single levels as the least-squares scale prefers; returns
// that scale (ggml's make_qp_quants).
float fit_positive(int n, int nmax, const float* x, uint8_t* L, const float* qw) {
  float max = 0.0f;
  for (int i = 0; i < n; ++i) max = std::max(max, x[i]);
  if (max < kGroupMaxEps) {
    std::memset(L, 0, static_cast<size_t>(n));
    return 0.0f;
  }
  float iscale = static_cast<float>(nmax) / max;
  for (int i = 0; i < n; ++i) L[i] = static_cast<uint8_t>(round_half_even(iscale * x[i]));
  const float scale = 1.0f / iscale;
  float best_mse = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float diff = x[i] - scale * static_cast<float>(L[i]);
    best_mse += qw[i] * diff * diff;
  }
  for (int is = -4; is <= 4; ++is) {
    if (is == 0) continue;
    const float iscale_is = (0.1f * static_cast<float>(is) + static_cast<float>(nmax)) / max;
    const float scale_is = 1.0f / iscale_is;
    float mse = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = std::min(nmax, round_half_even(iscale_is * x[i]));
      const float diff = x[i] - scale_is * static_cast<float>(l);
      mse += qw[i] * diff * diff;
    }
    if (mse < best_mse) {
      best_mse = mse;
      iscale = iscale_is;
    }
  }
  float sumlx = 0.0f;
  float suml2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = std::min(nmax, round_half_even(iscale * x[i]));
    L[i] = static_cast<uint8_t>(l);
    const float w = qw[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  for (int pass = 0; pass < 5; ++pass) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = qw[i];
      const float li = static_cast<float>(L[i]);
      float slx = sumlx - w * x[i] * li;
      float sl2 = suml2 - w * li * li;
      if (slx > 0.0f && sl2 > 0.0f) {
        const int new_l = std::min(nmax, round_half_even(x[i] * sl2 / slx));
        if (new_l != L[i]) {
          slx += w * x[i] * static_cast<float>(new_l);
          sl2 += w * static_cast<float>(new_l) * static_cast<float>(new_l);
          if (slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<uint8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++changed;
          }
        }
      }
    }
    if (changed == 0) break;
  }
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Σ x² over n elements, in order.
float sum_squares(const float* x, int64_t n) {
  float s = 0.0f;
  for (int64_t j = 0; j < n; ++j) s += x[j] * x[j];
  return s;
}

// The importance of each element of a group as ggml weighs it: qw · sqrt(sigma2 + x²).
void importance_weights(int n, const float* x, const float* qw, float sigma2, float* weights) {
  for (int l = 0; l < n; ++l) weights[l] = qw[l] * std::sqrt(sigma2 + x[l] * x[l]);
}

// Q4_K / Q5_K with importance: the eight sub-block fits under the weights, the scales and mins
// fitted by fit_positive against their summed weights, then every element re-rounded against the
// stored values. Returns the levels in L.
template <class Block>
void quantize_super_block_k_weighted(const float* x, const float* qw, Block* b, int nmax, uint8_t* L) {
  float scales[8];
  float mins[8];
  float sw[8];
  float weights[32];
  uint8_t aux[32];
  const float sigma2 = 2 * sum_squares(x, kQKK) / kQKK;
  for (int j = 0; j < 8; ++j) {
    importance_weights(32, x + 32 * j, qw + 32 * j, sigma2, weights);
    float sumw = 0.0f;
    for (int l = 0; l < 32; ++l) sumw += weights[l];
    sw[j] = sumw;
    scales[j] = fit_affine(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], aux, -0.9f, 0.05f, 36, false);
  }
  uint8_t sc[8];
  uint8_t m[8];
  const float d_block = fit_positive(8, 63, scales, sc, sw);
  const float m_block = fit_positive(8, 63, mins, m, sw);
  kquant_pack_scale_mins(sc, m, b->scales);
  b->d = f32_to_f16(d_block);
  b->dmin = f32_to_f16(m_block);
  for (int j = 0; j < 8; ++j) {
    const ScaleMin s = kquant_scale_min(b->scales, j);
    const float d = f16_to_f32(b->d) * static_cast<float>(s.sc);
    if (d == 0.0f) continue;
    const float dm = f16_to_f32(b->dmin) * static_cast<float>(s.m);
    for (int i = 0; i < 32; ++i)
      L[32 * j + i] = static_cast<uint8_t>(std::max(0, std::min(nmax, round_half_even((x[32 * j + i] + dm) / d))));
  }
}

// Low nibbles of levels j and j + 16 into byte j (Q4_0 .. Q5_1); the fifth bits into qh (Q5_*).
void put_nibbles32(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>((L[j] & 0x0F) | (L[j + 16] & 0x0F) << 4);
}
void put_fifth_bits32(const uint8_t* L, uint8_t* qh) {
  uint32_t bits = 0;
  for (int j = 0; j < 32; ++j) bits |= static_cast<uint32_t>((L[j] >> 4) & 1) << j;
  for (int k = 0; k < 4; ++k) qh[k] = static_cast<uint8_t>(bits >> (8 * k));
}

}  // namespace

void quantize_row_q2_k_ref(const float* x, void* dst, int64_t n) noexcept {
  assert(n >= 0 && n % kQKK == 0);
  auto* b = static_cast<BlockQ2_K*>(dst);
  constexpr float kQ4Scale = 15.0f;
  for (int64_t i = 0; i < n / kQKK; ++i, ++b, x += kQKK) {
    uint8_t L[kQKK];
    uint8_t aux[16];
    float weights[16];
    float scales[16];
    float mins[16];
    float max_scale = 0.0f;
    float max_min = 0.0f;
    for (int j = 0; j < 16; ++j) {
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
      scales[j] = fit_affine(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], aux, -0.5f, 0.1f, 15, true);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    if (max_scale > 0.0f) {
      const float iscale = kQ4Scale / max_scale;
      for (int j = 0; j < 16; ++j) b->scales[j] = static_cast<uint8_t>(round_half_even(iscale * scales[j]));
      b->d = f32_to_f16(max_scale / kQ4Scale);
    } else {
      for (int j = 0; j < 16; ++j) b->scales[j] = 0;
      b->d = f32_to_f16(0.0f);
    }
    if (max_min > 0.0f) {
      const float iscale = kQ4Scale / max_min;
      for (int j = 0; j < 16; ++j)
        b->scales[j] = static_cast<uint8_t>(b->scales[j] | round_half_even(iscale * mins[j]) << 4);
      b->dmin = f32_to_f16(max_min / kQ4Scale);
    } else {
      b->dmin = f32_to_f16(0.0f);
    }
    for (int j = 0; j < 16; ++j) {
      const float d = f16_to_f32(b->d) * static_cast<float>(b->scales[j] & 0xF);
      if (d == 0.0f) continue;
      const float dm = f16_to_f32(b->dmin) * static_cast<float>(b->scales[j] >> 4);
      for (int l = 0; l < 16; ++l)
        L[16 * j + l] = static_cast<uint8_t>(std::max(0, std::min(3, round_half_even((x[16 * j + l] + dm) / d))));
    }
    pack_2bit(L, b->qs);
  }
}

namespace {

// The last step of both Q3_K quantizers, once d and the scales are set: each element's level
// (0..7) under its sub-block's scale, levels 4..7 setting the element's bit in hmask, the low two
// bits packed into qs. L is scratch of kQKK levels.
void q3k_quantize_and_pack(const float* x, int8_t* L, BlockQ3_K* b) {
  for (int j = 0; j < 16; ++j) {
    const float d = f16_to_f32(b->d) * static_cast<float>(q3k_scale(b->scales, j));
    if (d == 0.0f) continue;
    for (int l = 0; l < 16; ++l)
      L[16 * j + l] = static_cast<int8_t>(std::max(-4, std::min(3, round_half_even(x[16 * j + l] / d))) + 4);
  }
  // Levels 4..7 set the element's bit in hmask and keep their low two bits.
  std::memset(b->hmask, 0, sizeof b->hmask);
  uint8_t low[kQKK];
  for (int e = 0; e < kQKK; ++e) {
    if (L[e] > 3) b->hmask[e % 32] = static_cast<uint8_t>(b->hmask[e % 32] | 1 << (e / 32));
    low[e] = static_cast<uint8_t>(L[e] & 3);
  }
  pack_2bit(low, b->qs);
}

}  // namespace

void quantize_row_q3_k_ref(const float* x, void* dst, int64_t n) noexcept {
  assert(n >= 0 && n % kQKK == 0);
  auto* b = static_cast<BlockQ3_K*>(dst);
  for (int64_t i = 0; i < n / kQKK; ++i, ++b, x += kQKK) {
    int8_t L[kQKK];
    float scales[16];
    for (int j = 0; j < 16; ++j) scales[j] = fit_symmetric_refined(16, 4, x + 16 * j, L + 16 * j);
    const float max_scale = group_extreme(16, scales).value;
    if (max_scale != 0.0f) {
      const float iscale = -32.0f / max_scale;
      int q[16];
      for (int j = 0; j < 16; ++j) q[j] = std::max(-32, std::min(31, round_half_even(iscale * scales[j])));
      q3k_pack_scales(q, b->scales);
      b->d = f32_to_f16(1.0f / iscale);
    } else {
      std::memset(b->scales, 0, sizeof b->scales);
      b->d = f32_to_f16(0.0f);
    }
    q3k_quantize_and_pack(x, L, b);
  }
}

void quantize_row_q4_k_ref(const float* x, void* dst, int64_t n) noexcept {
  assert(n >= 0 && n % kQKK == 0);
  auto* b = static_cast<BlockQ4_K*>(dst);
  for (int64_t i = 0; i < n / kQKK; ++i, ++b, x += kQKK) {
    uint8_t L[kQKK];
    quantize_super_block_k(x, b, 15, -1.0f, 20, L);
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l) b->qs[32 * c + l] = static_cast<uint8_t>(L[64 * c + l] | L[64 * c + l + 32] << 4);
  }
}

void quantize_row_q5_k_ref(const float* x, void* dst, int64_t n) noexcept {
  assert(n >= 0 && n % kQKK == 0);
  auto* b = static_cast<BlockQ5_K*>(dst);
  for (int64_t i = 0; i < n / kQKK; ++i, ++b, x += kQKK) {
    uint8_t L[kQKK];
    quantize_super_block_k(x, b, 31, -0.5f, 15, L);
    std::memset(b->qh, 0, sizeof b->qh);
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        const int lo = L[64 * c + l];
        const int hi = L[64 * c + l + 32];
        b->qh[l] = static_cast<uint8_t>(b->qh[l] | (lo >> 4) << (2 * c) | (hi >> 4) << (2 * c + 1));
        b->qs[32 * c + l] = static_cast<uint8_t>((lo & 0x0F) | (hi & 0x0F) << 4);
      }
    }
  }
}

namespace {

// Q6_K: the groups fitted with weights qw (the importance, without ggml's sigma term) or, null, x².
void quantize_row_q6_k_weighted(const float* x, void* dst, int64_t n, const float* qw) noexcept {
  assert(n >= 0 && n % kQKK == 0);
  auto* b = static_cast<BlockQ6_K*>(dst);
  for (int64_t i = 0; i < n / kQKK; ++i, ++b, x += kQKK, qw = qw ? qw + kQKK : nullptr) {
    int8_t L[kQKK];
    float scales[16];
    for (int j = 0; j < 16; ++j) scales[j] = fit_symmetric(16, 32, x + 16 * j, L + 16 * j, qw ? qw + 16 * j : nullptr);
    const Extreme e = group_extreme(16, scales);
    const float max_scale = e.value;
    if (e.magnitude < kGroupMaxEps) {
      std::memset(b, 0, sizeof *b);
      continue;
    }
    const float iscale = -128.0f / max_scale;
    b->d = f32_to_f16(1.0f / iscale);
    for (int j = 0; j < 16; ++j) b->scales[j] = static_cast<int8_t>(std::min(127, round_half_even(iscale * scales[j])));
    for (int j = 0; j < 16; ++j) {
      const float d = f16_to_f32(b->d) * static_cast<float>(b->scales[j]);
      if (d == 0.0f) continue;
      for (int l = 0; l < 16; ++l)
        L[16 * j + l] = static_cast<int8_t>(std::max(-32, std::min(31, round_half_even(x[16 * j + l] / d))) + 32);
    }
    for (int h = 0; h < 2; ++h) {
      const int8_t* Lh = L + 128 * h;
      uint8_t* ql = b->ql + 64 * h;
      uint8_t* qh = b->qh + 32 * h;
      for (int l = 0; l < 32; ++l) {
        ql[l] = static_cast<uint8_t>((Lh[l] & 0xF) | (Lh[l + 64] & 0xF) << 4);
        ql[l + 32] = static_cast<uint8_t>((Lh[l + 32] & 0xF) | (Lh[l + 96] & 0xF) << 4);
        qh[l] = static_cast<uint8_t>((Lh[l] >> 4) | (Lh[l + 32] >> 4) << 2 | (Lh[l + 64] >> 4) << 4 | (Lh[l + 96] >> 4) << 6);
      }
    }
  }
}

}  // namespace

void quantize_row_q6_k_ref(const float* x, void* dst, int64_t n) noexcept { quantize_row_q6_k_weighted(x, dst, n, nullptr); }


// ---- With importance weights (llama-quantize --imatrix): ggml's quantize_row_*_impl. ----

namespace {

// Q4_0 / Q5_0: per block a symmetric fit under the weights; levels 0..2*nmax-1.
template <class Block>
void weighted_symmetric_32(const float* x, const float* qw, Block* b, int64_t n, int nmax) {
  const float sigma2 = sum_squares(x, n) / static_cast<float>(n);
  for (int64_t ib = 0; ib < n / kQK; ++ib, ++b) {
    const float* xb = x + kQK * ib;
    float weights[kQK];
    int8_t L[kQK];
    importance_weights(kQK, xb, qw + kQK * ib, sigma2, weights);
    b->d = f32_to_f16(fit_symmetric(kQK, nmax, xb, L, weights));
    put_nibbles32(reinterpret_cast<const uint8_t*>(L), b->qs);
    if constexpr (requires { b->qh; }) put_fifth_bits32(reinterpret_cast<const uint8_t*>(L), b->qh);
  }
}

// Q4_1 / Q5_1: per block an affine fit under the weights; levels 0..nmax.
template <class Block>
void weighted_affine_32(const float* x, const float* qw, Block* b, int64_t n, int nmax) {
  const float sigma2 = sum_squares(x, n) / static_cast<float>(n);
  for (int64_t ib = 0; ib < n / kQK; ++ib, ++b) {
    const float* xb = x + kQK * ib;
    float weights[kQK];
    uint8_t L[kQK];
    uint8_t aux[kQK];
    importance_weights(kQK, xb, qw + kQK * ib, sigma2, weights);
    float neg_min = 0.0f;
    const float d = fit_affine(kQK, nmax, xb, weights, L, &neg_min, aux, -0.9f, 0.05f, 36, false);
    b->d = f32_to_f16(d);
    b->m = f32_to_f16(-neg_min);
    put_nibbles32(L, b->qs);
    if constexpr (requires { b->qh; }) put_fifth_bits32(L, b->qh);
  }
}

}  // namespace

void quantize_row_q4_0_imatrix(const float* x, void* dst, int64_t n, const float* qw) noexcept {
  assert(n >= 0 && n % kQK == 0);
  weighted_symmetric_32(x, qw, static_cast<BlockQ4_0*>(dst), n, 8);
}

void quantize_row_q5_0_imatrix(const float* x, void* dst, int64_t n, const float* qw) noexcept {
  assert(n >= 0 && n % kQK == 0);
  weighted_symmetric_32(x, qw, static_cast<BlockQ5_0*>(dst), n, 16);
}

void quantize_row_q4_1_imatrix(const float* x, void* dst, int64_t n, const float* qw) noexcept {
  assert(n >= 0 && n % kQK == 0);
  weighted_affine_32(x, qw, static_cast<BlockQ4_1*>(dst), n, 15);
}

void quantize_row_q5_1_imatrix(const float* x, void* dst, int64_t n, const float* qw) noexcept {
  assert(n >= 0 && n % kQK == 0);
  weighted_affine_32(x, qw, static_cast<BlockQ5_1*>(dst), n, 31);
}

void quantize_row_q2_k_imatrix(const float* x, void* dst, int64_t n, const float* qw) noexcept {
  assert(n >= 0 && n % kQKK == 0);
  auto* b = static_cast<BlockQ2_K*>(dst);
  for (int64_t i = 0; i < n / kQKK; ++i, ++b, x += kQKK, qw += kQKK) {
    uint8_t L[kQKK];
    uint8_t aux[16];
    float weights[16];
    float scales[16];
    float mins[16];
    float sw[16];
    const float sigma2 = sum_squares(x, kQKK) / kQKK;
    for (int j = 0; j < 16; ++j) {
      importance_weights(16, x + 16 * j, qw + 16 * j, sigma2, weights);
      float sumw = 0.0f;
      for (int l = 0; l < 16; ++l) sumw += weights[l];
      sw[j] = sumw;
      scales[j] = fit_affine(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], aux, -0.9f, 0.05f, 36, false);
    }
    uint8_t ls[16];
    uint8_t lm[16];
    const float dm = fit_positive(16, 15, scales, ls, sw);
    const float mm = fit_positive(16, 15, mins, lm, sw);
    b->d = f32_to_f16(dm);
    b->dmin = f32_to_f16(mm);
    for (int j = 0; j < 16; ++j) b->scales[j] = static_cast<uint8_t>(ls[j] | lm[j] << 4);
    for (int j = 0; j < 16; ++j) {
      const float d = f16_to_f32(b->d) * static_cast<float>(b->scales[j] & 0xF);
      if (d == 0.0f) continue;
      const float m = f16_to_f32(b->dmin) * static_cast<float>(b->scales[j] >> 4);
      for (int l = 0; l < 16; ++l)
        L[16 * j + l] = static_cast<uint8_t>(std::max(0, std::min(3, round_half_even((x[16 * j + l] + m) / d))));
    }
    pack_2bit(L, b->qs);
  }
}

void quantize_row_q3_k_imatrix(const float* x, void* dst, int64_t n, const float* qw) noexcept {
  assert(n >= 0 && n % kQKK == 0);
  auto* b = static_cast<BlockQ3_K*>(dst);
  for (int64_t i = 0; i < n / kQKK; ++i, ++b, x += kQKK, qw += kQKK) {
    int8_t L[kQKK];
    float scales[16];
    float weights[16];
    float sw[16];
    const float sigma2 = 2 * sum_squares(x, kQKK) / kQKK;
    for (int j = 0; j < 16; ++j) {
      importance_weights(16, x + 16 * j, qw + 16 * j, sigma2, weights);
      float sumw = 0.0f;
      for (int l = 0; l < 16; ++l) sumw += weights[l];
      sw[j] = sumw;
      scales[j] = fit_symmetric(16, 4, x + 16 * j, L + 16 * j, weights);
    }
    int8_t ls[16];
    const float d_block = fit_symmetric(16, 32, scales, ls, sw);
    int q[16];
    for (int j = 0; j < 16; ++j) q[j] = ls[j] - 32;
    q3k_pack_scales(q, b->scales);
    b->d = f32_to_f16(d_block);
    q3k_quantize_and_pack(x, L, b);
  }
}

void quantize_row_q4_k_imatrix(const float* x, void* dst, int64_t n, const float* qw) noexcept {
  assert(n >= 0 && n % kQKK == 0);
  auto* b = static_cast<BlockQ4_K*>(dst);
  for (int64_t i = 0; i < n / kQKK; ++i, ++b, x += kQKK, qw += kQKK) {
    uint8_t L[kQKK];
    quantize_super_block_k_weighted(x, qw, b, 15, L);
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l) b->qs[32 * c + l] = static_cast<uint8_t>(L[64 * c + l] | L[64 * c + l + 32] << 4);
  }
}

void quantize_row_q5_k_imatrix(const float* x, void* dst, int64_t n, const float* qw) noexcept {
  assert(n >= 0 && n % kQKK == 0);
  auto* b = static_cast<BlockQ5_K*>(dst);
  for (int64_t i = 0; i < n / kQKK; ++i, ++b, x += kQKK, qw += kQKK) {
    uint8_t L[kQKK];
    quantize_super_block_k_weighted(x, qw, b, 31, L);
    std::memset(b->qh, 0, sizeof b->qh);
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        const int lo = L[64 * c + l];
        const int hi = L[64 * c + l + 32];
        b->qh[l] = static_cast<uint8_t>(b->qh[l] | (lo >> 4) << (2 * c) | (hi >> 4) << (2 * c + 1));
        b->qs[32 * c + l] = static_cast<uint8_t>((lo & 0x0F) | (hi & 0x0F) << 4);
      }
    }
  }
}

void quantize_row_q6_k_imatrix(const float* x, void* dst, int64_t n, const float* qw) noexcept {
  quantize_row_q6_k_weighted(x, dst, n, qw);
}

}  // namespace infer
