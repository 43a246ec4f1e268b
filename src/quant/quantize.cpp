#include "quant/quantize.hpp"

#include <algorithm>
#include <cassert>
#include <cfloat>
#include <cmath>

#include "core/half.hpp"
#include "quant/block_formats.hpp"

namespace infer {

using namespace quant;

namespace {

// Q4_0 / Q5_0 with n_levels 16 / 32: d = extreme / -(n_levels / 2), where the extreme is the
// first element of largest magnitude, and q = min(n_levels - 1, trunc(x / d + n_levels / 2 + 0.5)).
// The negative step makes the extreme land exactly on q = 0 (value -n_levels/2 d), the end of the
// range with one more level; x / d lies in [-n/2, n/2], so the addition then truncation is
// round-half-up onto 0..n_levels, clipped. Returns d.
float centered_levels(const float* x, int n_levels, int* q) {
  float amax = 0.0f;
  float extreme = 0.0f;
  for (int j = 0; j < kQK; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      extreme = x[j];
    }
  }
  const float half = static_cast<float>(n_levels / 2);
  const float d = extreme / -half;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < kQK; ++j) q[j] = std::min(n_levels - 1, static_cast<int>(x[j] * id + (half + 0.5f)));
  return d;
}

// Q4_1 / Q5_1 with n_levels 16 / 32: m = min x, d = (max - m) / (n_levels - 1),
// q = trunc((x - m) / d + 0.5). ggml clips Q4_1 at 15 and not Q5_1; the maximum maps to
// n_levels - 1 + 0.5 at most, so the clip never changes a level and both take it.
struct Affine {
  float d;
  float m;
};
Affine affine_levels(const float* x, int n_levels, int* q) {
  float min = FLT_MAX;
  float max = -FLT_MAX;
  for (int j = 0; j < kQK; ++j) {
    if (x[j] < min) min = x[j];
    if (x[j] > max) max = x[j];
  }
  const float d = (max - min) / static_cast<float>(n_levels - 1);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < kQK; ++j) q[j] = std::min(n_levels - 1, static_cast<int>((x[j] - min) * id + 0.5f));
  return {d, min};
}

// Low nibbles of elements j and j + 16 into byte j.
void put_nibbles(uint8_t* qs, const int* q) {
  for (int j = 0; j < kQK / 2; ++j) qs[j] = static_cast<uint8_t>((q[j] & 0x0F) | (q[j + kQK / 2] & 0x0F) << 4);
}

// Element j's fifth bit into bit j of the 32-bit little-endian qh of Q5_0 / Q5_1.
void put_fifth_bits(uint8_t* qh, const int* q) {
  uint32_t bits = 0;
  for (int j = 0; j < kQK; ++j) bits |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
  for (int k = 0; k < 4; ++k) qh[k] = static_cast<uint8_t>(bits >> (8 * k));
}

}  // namespace

void quantize_row_q8_0_ref(const float* x, void* dst, int64_t n) noexcept {
  assert(n >= 0 && n % kQK == 0);
  auto* b = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, ++b, x += kQK) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    // The quants use the exact inverse of the F32 scale, not of its F16 rounding, as ggml does.
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b->d = f32_to_f16(d);
    for (int j = 0; j < kQK; ++j) b->qs[j] = static_cast<int8_t>(std::round(x[j] * id));
  }
}

void quantize_row_q4_0_ref(const float* x, void* dst, int64_t n) noexcept {
  assert(n >= 0 && n % kQK == 0);
  auto* b = static_cast<BlockQ4_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, ++b, x += kQK) {
    int q[kQK];
    b->d = f32_to_f16(centered_levels(x, 16, q));
    put_nibbles(b->qs, q);
  }
}

void quantize_row_q4_1_ref(const float* x, void* dst, int64_t n) noexcept {
  assert(n >= 0 && n % kQK == 0);
  auto* b = static_cast<BlockQ4_1*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, ++b, x += kQK) {
    int q[kQK];
    const Affine a = affine_levels(x, 16, q);
    b->d = f32_to_f16(a.d);
    b->m = f32_to_f16(a.m);
    put_nibbles(b->qs, q);
  }
}

void quantize_row_q5_0_ref(const float* x, void* dst, int64_t n) noexcept {
  assert(n >= 0 && n % kQK == 0);
  auto* b = static_cast<BlockQ5_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, ++b, x += kQK) {
    int q[kQK];
    b->d = f32_to_f16(centered_levels(x, 32, q));
    put_nibbles(b->qs, q);
    put_fifth_bits(b->qh, q);
  }
}

void quantize_row_q5_1_ref(const float* x, void* dst, int64_t n) noexcept {
  assert(n >= 0 && n % kQK == 0);
  auto* b = static_cast<BlockQ5_1*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, ++b, x += kQK) {
    int q[kQK];
    const Affine a = affine_levels(x, 32, q);
    b->d = f32_to_f16(a.d);
    b->m = f32_to_f16(a.m);
    put_nibbles(b->qs, q);
    put_fifth_bits(b->qh, q);
  }
}

RowQuantizerWeighted weighted_quantizer(DType type) noexcept {
  switch (type) {
    case DType::q4_0: return quantize_row_q4_0_imatrix;
    case DType::q4_1: return quantize_row_q4_1_imatrix;
    case DType::q5_0: return quantize_row_q5_0_imatrix;
    case DType::q5_1: return quantize_row_q5_1_imatrix;
    case DType::q2_k: return quantize_row_q2_k_imatrix;
    case DType::q3_k: return quantize_row_q3_k_imatrix;
    case DType::q4_k: return quantize_row_q4_k_imatrix;
    case DType::q5_k: return quantize_row_q5_k_imatrix;
    case DType::q6_k: return quantize_row_q6_k_imatrix;
    default: return nullptr;
  }
}

}  // namespace infer
