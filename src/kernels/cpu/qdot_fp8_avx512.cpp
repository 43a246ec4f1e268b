// The FP8 E4M3 weight-only dot with AVX-512 (arithmetic in quant/fp8_rows.hpp; bit-identical to
// qdot_f8_row_ref): the 16 lanes in one register, codes decoded through their F16 bits as in
// qdot_fp8_avx2.cpp. Decode: 4 activation rows per pass over the weight row; prefill: the tiled
// kernel below, 8 rows per pass over blocks of K (each decoded run serves them all). INT8
// weight-only rows (W8A16, i8_row's layout) run the same code with their codes widened and
// converted exactly (bit-identical to qdot_i8_w8a16_ref).
#include "kernels/cpu/qgemm_avx512_util.hpp"

#include <algorithm>
#include <cassert>
#include <cstring>

#include "kernels/cpu/qdot.hpp"
#include "kernels/cpu/qgemm.hpp"
#include "quant/fp8_rows.hpp"

namespace infer {
namespace {

enum class Codes { e4m3, i8 };

template <Codes kCodes>
inline __m512 decode16(const uint8_t* q) {
  if constexpr (kCodes == Codes::i8) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q))));
  } else {
    const __m256i b = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q)));
    const __m256i h = _mm256_or_si256(_mm256_slli_epi16(_mm256_and_si256(b, _mm256_set1_epi16(0x80)), 8),
                                      _mm256_slli_epi16(_mm256_and_si256(b, _mm256_set1_epi16(0x7F)), 7));
    return _mm512_mul_ps(_mm512_cvtph_ps(h), _mm512_set1_ps(256.0f));
  }
}

inline float finish(__m512 acc, float s) {
  const __m256 t = _mm256_add_ps(_mm512_castps512_ps256(acc), _mm512_extractf32x8_ps(acc, 1));
  const __m128 u = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
  const __m128 v = _mm_add_ps(u, _mm_movehl_ps(u, u));
  return (_mm_cvtss_f32(v) + _mm_cvtss_f32(_mm_shuffle_ps(v, v, 1))) * s;
}

// ---- The blocked chains: the per-row dot (decode) and the tiled kernel (prefill) ----
//
// As qdot_int4_avx512.cpp's: the tiled kernel (QGemmKernel) takes a group of 16 weight rows and
// walks K in blocks of kKBlock elements; per block, 8 activation rows at a time meet each row,
// whose 16 decoded codes feed 8 fmas; between blocks a pair's chain waits in scratch as floats.
// The per-row dot runs the same block_tile over the whole row, so every (weight row, activation
// row) pair takes the same operations in the same order whatever the batch. The scale is the
// row's (weight-only) or its product with the activation row's (W8A8).
// Packed group: the rows as in the file, one after another (n codes and the 8-byte trailer each).
constexpr int64_t kGroupRows = 16;
constexpr int64_t kKBlock = 512;
constexpr int64_t kRowExtra = 8;  // DType::f8_row's row_extra_bytes

// Elements [k0, k0 + len) of one weight row (q: its codes, sw its scale) against R activation
// rows (a: row 0, rows as bytes apart); chains from and to state (R x 16 floats) unless first /
// last, when they start at zero / end in y[r * ys].
template <bool kW8A8, Codes kCodes, int R>
void block_tile(const uint8_t* q, float sw, int64_t k0, int64_t len, const uint8_t* a, int64_t as, int64_t n, float* state,
                bool first, bool last, float* y, int64_t ys) {
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(state + 16 * r);
  for (int64_t i = k0; i < k0 + len; i += 16) {
    const __m512 wv = decode16<kCodes>(q + i);
    for (int r = 0; r < R; ++r)
      acc[r] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(reinterpret_cast<const float*>(a + r * as) + i), acc[r]);
  }
  for (int r = 0; r < R; ++r) {
    if (last)
      y[r * ys] = finish(acc[r], kW8A8 ? sw * f8_act_scale(a + r * as, n) : sw);
    else
      _mm512_storeu_ps(state + 16 * r, acc[r]);
  }
}

// One weight row against n_a activation rows (decode, and batches below the tiled kernel's
// min_rows): the whole row in one block, 4 activation rows per pass.
template <bool kW8A8, Codes kCodes = Codes::e4m3>
void dot(const void* w, const void* a, int64_t a_stride, int64_t n_a, int64_t n, float* y, int64_t y_stride) noexcept {
  assert(n >= 0 && n % kF8RowBlock == 0);
  const auto* q = static_cast<const uint8_t*>(w);
  const auto* ab = static_cast<const uint8_t*>(a);
  by_fours(n_a, [&]<int R>(int64_t r) {
    block_tile<kW8A8, kCodes, R>(q, f8_row_scale(w, n), 0, n, ab + r * a_stride, a_stride, n, nullptr, true, true, y + r * y_stride,
                         y_stride);
  });
}

int64_t packed_bytes(int64_t n) noexcept { return kGroupRows * (n + kRowExtra); }

void pack(const void* w, int64_t ws, int64_t count, int64_t n, void* packed) noexcept {
  assert(count >= 1 && count <= kGroupRows && n % kF8RowBlock == 0);
  for (int64_t j = 0; j < count; ++j)
    std::memcpy(static_cast<uint8_t*>(packed) + j * (n + kRowExtra), static_cast<const uint8_t*>(w) + j * ws,
                static_cast<size_t>(n + kRowExtra));
}

template <bool kW8A8, Codes kCodes = Codes::e4m3>
void multiply(const void* packed, int64_t count, const void* a, int64_t as, const void*, int64_t, int64_t n_a, int64_t n,
              float* y, int64_t ys) {
  const auto* pk = static_cast<const uint8_t*>(packed);
  const auto* act = static_cast<const uint8_t*>(a);
  float* state = avx512_tiles::chain_scratch(static_cast<size_t>(count * n_a * 16));
  for (int64_t k0 = 0; k0 < n; k0 += kKBlock) {
    const int64_t len = std::min(kKBlock, n - k0);
    const bool first = k0 == 0, last = k0 + len == n;
    avx512_tiles::by_eights(n_a, [&]<int R>(int64_t r0) {
      for (int64_t j = 0; j < count; ++j) {
        const uint8_t* row = pk + j * (n + kRowExtra);
        block_tile<kW8A8, kCodes, R>(row, f8_row_scale(row, n), k0, len, act + r0 * as, as, n, state + (j * n_a + r0) * 16, first,
                             last, y + r0 * ys + j, ys);
      }
    });
  }
}

}  // namespace

const QGemmKernel qgemm_f8_row_avx512{8, kGroupRows, avx512_tiles::no_side_bytes, avx512_tiles::no_prepare_side, packed_bytes,
                                      pack, multiply<false>, nullptr};
const QGemmKernel qgemm_f8_w8a8_avx512{8, kGroupRows, avx512_tiles::no_side_bytes, avx512_tiles::no_prepare_side, packed_bytes,
                                       pack, multiply<true>, nullptr};
const QGemmKernel qgemm_i8_w8a16_avx512{8, kGroupRows, avx512_tiles::no_side_bytes, avx512_tiles::no_prepare_side, packed_bytes,
                                        pack, multiply<false, Codes::i8>, nullptr};

void qdot_f8_row_avx512(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  dot<false>(w, a, as, n_a, n, y, ys);
}
void qdot_f8_w8a8_avx512(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  dot<true>(w, a, as, n_a, n, y, ys);
}
void qdot_i8_w8a16_avx512(const void* w, const void* a, int64_t as, int64_t n_a, int64_t n, float* y, int64_t ys) noexcept {
  dot<false, Codes::i8>(w, a, as, n_a, n, y, ys);
}

}  // namespace infer
