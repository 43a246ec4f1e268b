#include "quant/quantize.hpp"

#include <algorithm>
#include <cassert>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "core/half.hpp"
#include "quant/block_formats.hpp"

namespace infer {

using namespace quant;

namespace {

// Smallest and largest value of a block of 32.
struct MinMax {
  float min;
  float max;
};
MinMax block_min_max(const float* x) {
  MinMax r{FLT_MAX, -FLT_MAX};
  for (int j = 0; j < kQK; ++j) {
    if (x[j] < r.min) r.min = x[j];
    if (x[j] > r.max) r.max = x[j];
  }
  return r;
}

// The signed value of the first element of largest magnitude (0 for an all-zero block).
float block_extreme(const float* x) {
  float amax = 0.0f;
  float extreme = 0.0f;
  for (int j = 0; j < kQK; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      extreme = x[j];
    }
  }
  return extreme;
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
    // A negative step makes the extreme land exactly on q = 0 (value -8 d), the end of the range
    // with one more level.
    const float d = block_extreme(x) / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b->d = f32_to_f16(d);
    int q[kQK];
    // x * id lies in [-8, 8]; + 8.5 then truncation is round-half-up onto 0..16, clipped at 15.
    for (int j = 0; j < kQK; ++j) q[j] = std::min(15, static_cast<int>(x[j] * id + 8.5f));
    put_nibbles(b->qs, q);
  }
}

void quantize_row_q4_1_ref(const float* x, void* dst, int64_t n) noexcept {
  assert(n >= 0 && n % kQK == 0);
  auto* b = static_cast<BlockQ4_1*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, ++b, x += kQK) {
    const MinMax r = block_min_max(x);
    const float d = (r.max - r.min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b->d = f32_to_f16(d);
    b->m = f32_to_f16(r.min);
    int q[kQK];
    for (int j = 0; j < kQK; ++j) q[j] = std::min(15, static_cast<int>((x[j] - r.min) * id + 0.5f));
    put_nibbles(b->qs, q);
  }
}

void quantize_row_q5_0_ref(const float* x, void* dst, int64_t n) noexcept {
  assert(n >= 0 && n % kQK == 0);
  auto* b = static_cast<BlockQ5_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, ++b, x += kQK) {
    const float d = block_extreme(x) / -16.0f;  // as Q4_0: the extreme lands on q = 0
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b->d = f32_to_f16(d);
    int q[kQK];
    for (int j = 0; j < kQK; ++j) q[j] = std::min(31, static_cast<int>(x[j] * id + 16.5f));
    put_nibbles(b->qs, q);
    put_fifth_bits(b->qh, q);
  }
}

void quantize_row_q5_1_ref(const float* x, void* dst, int64_t n) noexcept {
  assert(n >= 0 && n % kQK == 0);
  auto* b = static_cast<BlockQ5_1*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, ++b, x += kQK) {
    const MinMax r = block_min_max(x);
    const float d = (r.max - r.min) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b->d = f32_to_f16(d);
    b->m = f32_to_f16(r.min);
    int q[kQK];
    // No clip at 31, as in ggml: the maximum lands on 31 + 0.5 at most, truncated to 31.
    for (int j = 0; j < kQK; ++j) q[j] = static_cast<int>((x[j] - r.min) * id + 0.5f);
    put_nibbles(b->qs, q);
    put_fifth_bits(b->qh, q);
  }
}

}  // namespace infer
