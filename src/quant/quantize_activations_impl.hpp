// The activation converters' code, compiled once per ISA (core/isa_variants.hpp): included by
// quantize_activations_{ref,avx2,avx512}.cpp inside namespace infer::INFER_ISA_NS;
// quantize_activations.cpp dispatches. Contract in quantize_activations.hpp. No include guard.
#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

#include "core/half.hpp"
#include "quant/block_formats.hpp"
#include "quant/quantize_activations.hpp"

namespace infer::INFER_ISA_NS {
namespace {

using namespace quant;

// nearbyint rounds half to even in the default rounding mode, as ggml's _mm256_round_ps and its
// nearest_int() do; -ffp-contract=off keeps the product rounded before it is rounded to an integer.
inline int round_even(float v) { return static_cast<int>(std::nearbyint(v)); }

// Q8_0 and Q8_1 share the block prefix; returns d (unrounded) and writes the quants.
float quantize_block_32(const float* x, int8_t* qs) {
  float amax = 0.0f;
  for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  for (int j = 0; j < kQK; ++j) qs[j] = static_cast<int8_t>(round_even(x[j] * id));
  return amax / 127.0f;
}

// f32_to_f16 (core/half.hpp) without branches: every case is computed and the right one selected,
// so the compiler vectorizes a row's conversion (F16 prefill converts every activation row of
// every matmul; the branchy scalar version took 7% of it). Same bits for every input, NaN payloads
// included (tests/unit/test_quantize_activations.cpp compares them).
inline uint16_t f32_to_f16_select(float f) {
  const uint32_t u = f32_bits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t abs = u & 0x7fffffffu;
  // Normal: rebias the exponent, round the mantissa to 10 bits (nearest even; a carry into the
  // exponent is right, up to infinity).
  const uint32_t v = abs - 0x38000000u;
  const uint32_t normal = (v + 0x0fffu + ((v >> 13) & 1u)) >> 13;
  // Subnormal or zero: the significand shifted right by 14..24 bits, nearest even (further: 0).
  const uint32_t shift = std::min(126u - (abs >> 23), 31u);
  const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
  const uint32_t subnormal = (mant + ((1u << shift) >> 1) - 1u + ((mant >> shift) & 1u)) >> shift;
  const uint32_t nan = 0x7e00u | ((abs >> 13) & 0x3ffu);
  const uint32_t r = abs > 0x7f800000u ? nan : abs >= 0x477ff000u ? 0x7c00u : abs < 0x38800000u ? subnormal : normal;
  return static_cast<uint16_t>(sign | r);
}

}  // namespace

void quantize_activations_q8_0(const float* x, void* dst, int64_t n) noexcept {
  assert(n >= 0 && n % kQK == 0);
  auto* b = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, ++b, x += kQK) b->d = f32_to_f16(quantize_block_32(x, b->qs));
}

void quantize_activations_q8_1(const float* x, void* dst, int64_t n) noexcept {
  assert(n >= 0 && n % kQK == 0);
  auto* b = static_cast<BlockQ8_1*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, ++b, x += kQK) {
    const float d = quantize_block_32(x, b->qs);
    int sum = 0;
    for (int j = 0; j < kQK; ++j) sum += b->qs[j];
    b->d = f32_to_f16(d);
    b->s = f32_to_f16(d * static_cast<float>(sum));
  }
}

void quantize_activations_q8_k(const float* x, void* dst, int64_t n) noexcept {
  assert(n >= 0 && n % kQKK == 0);
  auto* b = static_cast<BlockQ8_K*>(dst);
  for (int64_t i = 0; i < n / kQKK; ++i, ++b, x += kQKK) {
    float amax = 0.0f;
    float extreme = 0.0f;  // the first element of largest magnitude, with its sign
    for (int j = 0; j < kQKK; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        extreme = x[j];
      }
    }
    if (amax == 0.0f) {
      std::memset(static_cast<void*>(b), 0, sizeof *b);
      continue;
    }
    const float iscale = -127.0f / extreme;
    for (int j = 0; j < kQKK; ++j) b->qs[j] = static_cast<int8_t>(std::min(127, round_even(iscale * x[j])));
    for (int s = 0; s < kQKK / 16; ++s) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += b->qs[16 * s + j];
      b->bsums[s] = static_cast<int16_t>(sum);
    }
    b->d = 1.0f / iscale;
  }
}

void round_activations_f16(const float* x, void* dst, int64_t n) noexcept {
  assert(n >= 0);
  auto* h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = f32_to_f16_select(x[i]);
}

void round_activations_bf16(const float* x, void* dst, int64_t n) noexcept {
  assert(n >= 0);
  auto* h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = f32_to_bf16(x[i]);
}


}  // namespace infer::INFER_ISA_NS
