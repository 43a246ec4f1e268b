// Scalar reference dot products (float steps documented in qdot.hpp).
//
// Each kernel unpacks a weight block into signed integer quants in element order, takes exact
// integer dot products with the activation quants, and combines them with the block scales in the
// float steps of the ggml path it mirrors; std::fma marks every fused step, and -ffp-contract=off
// keeps everything else unfused.
#include "kernels/cpu/qdot.hpp"

#include <cassert>
#include <cmath>
#include <cstring>

#include "core/half.hpp"
#include "quant/block_formats.hpp"

namespace infer {
namespace {

using namespace quant;

float lane_tree(const float* s) { return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7])); }

int32_t idot(const int8_t* w, const int8_t* a, int n) {
  int32_t s = 0;
  for (int i = 0; i < n; ++i) s += static_cast<int32_t>(w[i]) * a[i];
  return s;
}

uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);  // little-endian host (x86)
  return v;
}

// ---- legacy 32-element blocks: quants in element order, offsets applied ----

void unpack(const BlockQ4_0& b, int8_t* q) {
  for (int j = 0; j < kQK / 2; ++j) {
    q[j] = static_cast<int8_t>((b.qs[j] & 0x0F) - 8);
    q[j + kQK / 2] = static_cast<int8_t>((b.qs[j] >> 4) - 8);
  }
}
void unpack(const BlockQ4_1& b, int8_t* q) {
  for (int j = 0; j < kQK / 2; ++j) {
    q[j] = static_cast<int8_t>(b.qs[j] & 0x0F);
    q[j + kQK / 2] = static_cast<int8_t>(b.qs[j] >> 4);
  }
}
void unpack_q5(const uint8_t* qh_bytes, const uint8_t* qs, int offset, int8_t* q) {
  const uint32_t qh = load_u32(qh_bytes);
  for (int j = 0; j < kQK / 2; ++j) {
    q[j] = static_cast<int8_t>(((qs[j] & 0x0F) | static_cast<int>((qh >> j) & 1) << 4) - offset);
    q[j + kQK / 2] = static_cast<int8_t>(((qs[j] >> 4) | static_cast<int>((qh >> (j + 16)) & 1) << 4) - offset);
  }
}
void unpack(const BlockQ5_0& b, int8_t* q) { unpack_q5(b.qh, b.qs, 16, q); }
void unpack(const BlockQ5_1& b, int8_t* q) { unpack_q5(b.qh, b.qs, 0, q); }
void unpack(const BlockQ8_0& b, int8_t* q) { std::memcpy(q, b.qs, kQK); }

// tinyBLAS (Q8_0, Q5_0) and vec_dot (Q4_1, Q5_1): lane p accumulates elements 4p..4p+3.
void lane_step(const int8_t* q, const int8_t* a, float dd, float* s) {
  for (int p = 0; p < 8; ++p) s[p] = std::fma(dd, static_cast<float>(idot(q + 4 * p, a + 4 * p, 4)), s[p]);
}

template <class Block>
float dot_lanes_q8_0(const void* w, const void* a, int64_t n) noexcept {
  assert(n >= 0 && n % kQK == 0);
  const auto* wb = static_cast<const Block*>(w);
  const auto* ab = static_cast<const BlockQ8_0*>(a);
  float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int8_t q[kQK];
  for (int64_t i = 0; i < n / kQK; ++i) {
    unpack(wb[i], q);
    lane_step(q, ab[i].qs, f16_to_f32(wb[i].d) * f16_to_f32(ab[i].d), s);
  }
  return lane_tree(s);
}

template <class Block>
float dot_lanes_q8_1(const void* w, const void* a, int64_t n) noexcept {
  assert(n >= 0 && n % kQK == 0);
  const auto* wb = static_cast<const Block*>(w);
  const auto* ab = static_cast<const BlockQ8_1*>(a);
  float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  float mins = 0.0f;
  int8_t q[kQK];
  for (int64_t i = 0; i < n / kQK; ++i) {
    unpack(wb[i], q);
    mins = std::fma(f16_to_f32(wb[i].m), f16_to_f32(ab[i].s), mins);
    lane_step(q, ab[i].qs, f16_to_f32(wb[i].d) * f16_to_f32(ab[i].d), s);
  }
  return lane_tree(s) + mins;
}

// Repacked Q4_0 gemm: one chain over blocks.
float dot_q4_0(const void* w, const void* a, int64_t n) noexcept {
  assert(n >= 0 && n % kQK == 0);
  const auto* wb = static_cast<const BlockQ4_0*>(w);
  const auto* ab = static_cast<const BlockQ8_0*>(a);
  float acc = 0.0f;
  int8_t q[kQK];
  for (int64_t i = 0; i < n / kQK; ++i) {
    unpack(wb[i], q);
    const float dd = f16_to_f32(wb[i].d) * f16_to_f32(ab[i].d);
    acc = std::fma(static_cast<float>(idot(q, ab[i].qs, kQK)), dd, acc);
  }
  return acc;
}

// ---- K-quant super-blocks: quants in element order (offsets applied), sub-block scales ----

struct SuperBlock {
  int8_t q[kQKK];
  int sc[16];  // per sub-block (16 of 16 elements, or 8 of 32)
  int m[16];   // mins, for the types that have them
};

void unpack(const BlockQ2_K& b, SuperBlock& u) {
  for (int e = 0; e < kQKK; ++e) u.q[e] = static_cast<int8_t>((b.qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3);
  for (int s = 0; s < 16; ++s) {
    u.sc[s] = b.scales[s] & 0x0F;
    u.m[s] = b.scales[s] >> 4;
  }
}
void unpack(const BlockQ3_K& b, SuperBlock& u) {
  for (int e = 0; e < kQKK; ++e) {
    const int low = (b.qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
    const bool high = (b.hmask[e % 32] >> (e / 32)) & 1;
    u.q[e] = static_cast<int8_t>(low - (high ? 0 : 4));
  }
  for (int s = 0; s < 16; ++s) u.sc[s] = q3k_scale(b.scales, s);
}
template <class Block>
void unpack_q45k(const Block& b, const uint8_t* qh, SuperBlock& u) {
  for (int e = 0; e < kQKK; ++e) {
    const int sub = e / 32;
    const uint8_t byte = b.qs[32 * (sub / 2) + e % 32];
    const int high = qh ? ((qh[e % 32] >> sub) & 1) << 4 : 0;
    u.q[e] = static_cast<int8_t>(((sub % 2) ? (byte >> 4) : (byte & 0x0F)) | high);
  }
  for (int j = 0; j < 8; ++j) {
    const ScaleMin sm = kquant_scale_min(b.scales, j);
    u.sc[j] = sm.sc;
    u.m[j] = sm.m;
  }
}
void unpack(const BlockQ4_K& b, SuperBlock& u) { unpack_q45k(b, nullptr, u); }
void unpack(const BlockQ5_K& b, SuperBlock& u) { unpack_q45k(b, b.qh, u); }
void unpack(const BlockQ6_K& b, SuperBlock& u) {
  for (int e = 0; e < kQKK; ++e) {
    const int half = e / 128, k = (e % 128) / 32, l = e % 32;
    const uint8_t lbyte = b.ql[64 * half + 32 * (k % 2) + l];
    const int low = (k < 2) ? (lbyte & 0x0F) : (lbyte >> 4);
    const int high = (b.qh[32 * half + l] >> (2 * k)) & 3;
    u.q[e] = static_cast<int8_t>((low | high << 4) - 32);
  }
  for (int s = 0; s < 16; ++s) u.sc[s] = b.scales[s];
}

// S = Σ_j sc_j I_j over sub-blocks of `len` elements.
int32_t scaled_sum(const SuperBlock& u, const int8_t* a, int len) {
  int32_t s = 0;
  for (int j = 0; j < kQKK / len; ++j) s += u.sc[j] * idot(u.q + len * j, a + len * j, len);
  return s;
}
// M = Σ_j m_j B_j, B_j the activation sum of sub-block j (len / 16 bsums each).
int32_t min_sum(const SuperBlock& u, const int16_t* bsums, int len) {
  int32_t s = 0;
  for (int j = 0; j < kQKK / len; ++j) {
    int32_t b = 0;
    for (int k = 0; k < len / 16; ++k) b += bsums[len / 16 * j + k];
    s += u.m[j] * b;
  }
  return s;
}

// ggml's tiled kernel; kSub: sub-block length, kMin: the type has mins.
template <class Block, int kSub, bool kMin>
float dot_tiled(const void* w, const void* a, int64_t n) noexcept {
  assert(n >= 0 && n % kQKK == 0);
  const auto* wb = static_cast<const Block*>(w);
  const auto* ab = static_cast<const BlockQ8_K*>(a);
  float acc = 0.0f;
  SuperBlock u;
  for (int64_t i = 0; i < n / kQKK; ++i) {
    unpack(wb[i], u);
    float r = f16_to_f32(wb[i].d) * static_cast<float>(scaled_sum(u, ab[i].qs, kSub));
    if constexpr (kMin) r = std::fma(-f16_to_f32(wb[i].dmin), static_cast<float>(min_sum(u, ab[i].bsums, kSub)), r);
    acc = std::fma(r, ab[i].d, acc);
  }
  return acc;
}

// Repacked Q4_K gemm: a chain for the scales and one for the mins, 64 elements per step.
float dot_q4_k(const void* w, const void* a, int64_t n) noexcept {
  assert(n >= 0 && n % kQKK == 0);
  const auto* wb = static_cast<const BlockQ4_K*>(w);
  const auto* ab = static_cast<const BlockQ8_K*>(a);
  float acc = 0.0f, accm = 0.0f;
  SuperBlock u;
  for (int64_t i = 0; i < n / kQKK; ++i) {
    unpack(wb[i], u);
    const float dd = f16_to_f32(wb[i].d) * ab[i].d;
    const float dm = f16_to_f32(wb[i].dmin) * ab[i].d;
    for (int j = 0; j < 8; j += 2) {
      const int32_t s = u.sc[j] * idot(u.q + 32 * j, ab[i].qs + 32 * j, 32) +
                        u.sc[j + 1] * idot(u.q + 32 * (j + 1), ab[i].qs + 32 * (j + 1), 32);
      const int32_t m = u.m[j] * (ab[i].bsums[2 * j] + ab[i].bsums[2 * j + 1]) +
                        u.m[j + 1] * (ab[i].bsums[2 * j + 2] + ab[i].bsums[2 * j + 3]);
      acc = std::fma(static_cast<float>(s), dd, acc);
      accm = std::fma(static_cast<float>(m), dm, accm);
    }
  }
  return acc - accm;
}

// ---- F16 / BF16: exact products, 8 lanes ----

template <float (*kToF32)(uint16_t)>
float dot_half(const void* w, const void* a, int64_t n) noexcept {
  assert(n >= 0);
  const auto* wh = static_cast<const uint16_t*>(w);
  const auto* ah = static_cast<const uint16_t*>(a);
  float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t i = 0; i < n; ++i) s[i % 8] = std::fma(kToF32(wh[i]), kToF32(ah[i]), s[i % 8]);
  return lane_tree(s);
}

// The scalar kernels compute one row at a time.
template <float (*kDot)(const void*, const void*, int64_t) noexcept>
void rows(const void* w, const void* a, int64_t a_stride, int64_t n_a, int64_t n, float* y, int64_t y_stride) noexcept {
  for (int64_t r = 0; r < n_a; ++r) y[r * y_stride] = kDot(w, static_cast<const uint8_t*>(a) + r * a_stride, n);
}

}  // namespace

void qdot_f16_ref(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  rows<dot_half<f16_to_f32>>(w, a, as, n_a, n, y, ys);
}
void qdot_bf16_ref(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  rows<dot_half<bf16_to_f32>>(w, a, as, n_a, n, y, ys);
}
void qdot_q8_0_ref(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  rows<dot_lanes_q8_0<BlockQ8_0>>(w, a, as, n_a, n, y, ys);
}
void qdot_q5_0_ref(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  rows<dot_lanes_q8_0<BlockQ5_0>>(w, a, as, n_a, n, y, ys);
}
void qdot_q4_0_ref(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  rows<dot_q4_0>(w, a, as, n_a, n, y, ys);
}
void qdot_q4_1_ref(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  rows<dot_lanes_q8_1<BlockQ4_1>>(w, a, as, n_a, n, y, ys);
}
void qdot_q5_1_ref(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  rows<dot_lanes_q8_1<BlockQ5_1>>(w, a, as, n_a, n, y, ys);
}
void qdot_q2_k_ref(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  rows<dot_tiled<BlockQ2_K, 16, true>>(w, a, as, n_a, n, y, ys);
}
void qdot_q3_k_ref(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  rows<dot_tiled<BlockQ3_K, 16, false>>(w, a, as, n_a, n, y, ys);
}
void qdot_q4_k_ref(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  rows<dot_q4_k>(w, a, as, n_a, n, y, ys);
}
void qdot_q5_k_ref(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  rows<dot_tiled<BlockQ5_K, 32, true>>(w, a, as, n_a, n, y, ys);
}
void qdot_q6_k_ref(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  rows<dot_tiled<BlockQ6_K, 16, false>>(w, a, as, n_a, n, y, ys);
}

}  // namespace infer
