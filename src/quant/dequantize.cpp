// Scalar reference dequantization.
//
// Each element is computed as the ggml reference formula states it, one float operation at a time
// (the build compiles with -ffp-contract=off, so nothing is fused): an integer quant is converted
// to float exactly, multiplied by a scale, and a min is then subtracted or added. The SIMD variants
// reproduce these operations lane by lane, which is what makes them bit-identical.
//
// The result is also robust to operation order: an F16 scale has 11 significant bits, sub-block
// scales at most 8 and quants at most 6, so scale products are exact in float or one rounding of
// the exact product whichever way they are grouped; only the min costs a second rounding.
#include "quant/dequantize.hpp"

#include <cassert>
#include <cstring>

#include "core/half.hpp"
#include "quant/block_formats.hpp"

namespace infer {
namespace {

using namespace quant;

void ref_q4_0(const BlockQ4_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, ++b, y += kQK) {
    const float d = f16_to_f32(b->d);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>((b->qs[j] & 0x0F) - 8) * d;
      y[j + kQK / 2] = static_cast<float>((b->qs[j] >> 4) - 8) * d;
    }
  }
}

void ref_q4_1(const BlockQ4_1* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, ++b, y += kQK) {
    const float d = f16_to_f32(b->d);
    const float m = f16_to_f32(b->m);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>(b->qs[j] & 0x0F) * d + m;
      y[j + kQK / 2] = static_cast<float>(b->qs[j] >> 4) * d + m;
    }
  }
}

uint32_t load_u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}

// The 5-bit quants of a Q5_0/Q5_1 block, unsigned (0..31).
void unpack_q5(const uint8_t* qh_bytes, const uint8_t* qs, int q[kQK]) {
  const uint32_t qh = load_u32(qh_bytes);
  for (int j = 0; j < kQK / 2; ++j) {
    q[j] = (qs[j] & 0x0F) | static_cast<int>((qh >> j) & 1) << 4;
    q[j + kQK / 2] = (qs[j] >> 4) | static_cast<int>((qh >> (j + kQK / 2)) & 1) << 4;
  }
}

void ref_q5_0(const BlockQ5_0* b, float* y, int64_t nb) {
  int q[kQK];
  for (int64_t i = 0; i < nb; ++i, ++b, y += kQK) {
    const float d = f16_to_f32(b->d);
    unpack_q5(b->qh, b->qs, q);
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(q[j] - 16) * d;
  }
}

void ref_q5_1(const BlockQ5_1* b, float* y, int64_t nb) {
  int q[kQK];
  for (int64_t i = 0; i < nb; ++i, ++b, y += kQK) {
    const float d = f16_to_f32(b->d);
    const float m = f16_to_f32(b->m);
    unpack_q5(b->qh, b->qs, q);
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(q[j]) * d + m;
  }
}

void ref_q8_0(const BlockQ8_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, ++b, y += kQK) {
    const float d = f16_to_f32(b->d);
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(b->qs[j]) * d;
  }
}

void ref_q2_k(const BlockQ2_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, ++b, y += kQKK) {
    const float d = f16_to_f32(b->d);
    const float dmin = f16_to_f32(b->dmin);
    for (int e = 0; e < kQKK; ++e) {
      const uint8_t sc = b->scales[e / 16];
      const float dl = d * static_cast<float>(sc & 0x0F);
      const float ml = dmin * static_cast<float>(sc >> 4);
      const int q = (b->qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
      y[e] = dl * static_cast<float>(q) - ml;
    }
  }
}

void ref_q3_k(const BlockQ3_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, ++b, y += kQKK) {
    const float d = f16_to_f32(b->d);
    for (int e = 0; e < kQKK; ++e) {
      const float dl = d * static_cast<float>(q3k_scale(b->scales, e / 16));
      const int low = (b->qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
      const bool high = (b->hmask[e % 32] >> (e / 32)) & 1;
      y[e] = dl * static_cast<float>(low - (high ? 0 : 4));
    }
  }
}

void ref_q4_k(const BlockQ4_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, ++b, y += kQKK) {
    const float d = f16_to_f32(b->d);
    const float dmin = f16_to_f32(b->dmin);
    for (int e = 0; e < kQKK; ++e) {
      const int sub = e / 32;
      const ScaleMin sm = kquant_scale_min(b->scales, sub);
      const float dl = d * static_cast<float>(sm.sc);
      const float ml = dmin * static_cast<float>(sm.m);
      const uint8_t byte = b->qs[32 * (sub / 2) + e % 32];
      const int q = (sub % 2) ? (byte >> 4) : (byte & 0x0F);
      y[e] = dl * static_cast<float>(q) - ml;
    }
  }
}

void ref_q5_k(const BlockQ5_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, ++b, y += kQKK) {
    const float d = f16_to_f32(b->d);
    const float dmin = f16_to_f32(b->dmin);
    for (int e = 0; e < kQKK; ++e) {
      const int sub = e / 32;
      const ScaleMin sm = kquant_scale_min(b->scales, sub);
      const float dl = d * static_cast<float>(sm.sc);
      const float ml = dmin * static_cast<float>(sm.m);
      const uint8_t byte = b->qs[32 * (sub / 2) + e % 32];
      const int low = (sub % 2) ? (byte >> 4) : (byte & 0x0F);
      const int high = (b->qh[e % 32] >> sub) & 1;
      y[e] = dl * static_cast<float>(low | high << 4) - ml;
    }
  }
}

void ref_q6_k(const BlockQ6_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, ++b, y += kQKK) {
    const float d = f16_to_f32(b->d);
    for (int e = 0; e < kQKK; ++e) {
      const int half = e / 128;
      const int k = (e % 128) / 32;  // which 32-element slice of the half
      const int l = e % 32;
      const uint8_t lbyte = b->ql[64 * half + 32 * (k % 2) + l];
      const int low = (k < 2) ? (lbyte & 0x0F) : (lbyte >> 4);
      const int high = (b->qh[32 * half + l] >> (2 * k)) & 3;
      const float dl = d * static_cast<float>(b->scales[e / 16]);
      y[e] = dl * static_cast<float>((low | high << 4) - 32);
    }
  }
}

// n elements of blocks -> the typed block loop.
template <class Block, void (*kLoop)(const Block*, float*, int64_t), int kBlock>
void blocks(const void* src, float* dst, int64_t n) noexcept {
  assert(n >= 0 && n % kBlock == 0);
  kLoop(static_cast<const Block*>(src), dst, n / kBlock);
}

}  // namespace

void dequantize_f32(const void* src, float* dst, int64_t n) noexcept {
  assert(n >= 0);
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void dequantize_f16_ref(const void* src, float* dst, int64_t n) noexcept {
  assert(n >= 0);
  const auto* h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(h[i]);
}

void dequantize_bf16_ref(const void* src, float* dst, int64_t n) noexcept {
  assert(n >= 0);
  const auto* h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(h[i]);
}

void dequantize_q4_0_ref(const void* src, float* dst, int64_t n) noexcept { blocks<BlockQ4_0, ref_q4_0, kQK>(src, dst, n); }
void dequantize_q4_1_ref(const void* src, float* dst, int64_t n) noexcept { blocks<BlockQ4_1, ref_q4_1, kQK>(src, dst, n); }
void dequantize_q5_0_ref(const void* src, float* dst, int64_t n) noexcept { blocks<BlockQ5_0, ref_q5_0, kQK>(src, dst, n); }
void dequantize_q5_1_ref(const void* src, float* dst, int64_t n) noexcept { blocks<BlockQ5_1, ref_q5_1, kQK>(src, dst, n); }
void dequantize_q8_0_ref(const void* src, float* dst, int64_t n) noexcept { blocks<BlockQ8_0, ref_q8_0, kQK>(src, dst, n); }
void dequantize_q2_k_ref(const void* src, float* dst, int64_t n) noexcept { blocks<BlockQ2_K, ref_q2_k, kQKK>(src, dst, n); }
void dequantize_q3_k_ref(const void* src, float* dst, int64_t n) noexcept { blocks<BlockQ3_K, ref_q3_k, kQKK>(src, dst, n); }
void dequantize_q4_k_ref(const void* src, float* dst, int64_t n) noexcept { blocks<BlockQ4_K, ref_q4_k, kQKK>(src, dst, n); }
void dequantize_q5_k_ref(const void* src, float* dst, int64_t n) noexcept { blocks<BlockQ5_K, ref_q5_k, kQKK>(src, dst, n); }
void dequantize_q6_k_ref(const void* src, float* dst, int64_t n) noexcept { blocks<BlockQ6_K, ref_q6_k, kQKK>(src, dst, n); }

}  // namespace infer
