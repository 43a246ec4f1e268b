// The INT8 row-scaled kernels with AVX-512 VNNI (quant/int8_rows.hpp states the arithmetic; both
// are bit-identical to qdot_i8_row_ref since the integer sum is exact). vpdpbusd multiplies
// unsigned by signed bytes: the activation quant a (-127..127) is read as a + 128 (a ^ 0x80), and
// the weight row's stored Σ w takes the offset off again: Σ a w = Σ (a + 128) w - 128 Σ w. The
// int32 lanes may wrap on the way; the final sum is exact because the true one fits (n <= 2^17).
//
//   qdot_i8_row_avx512   one weight row against 1..n activation rows (decode: the matmul's
//                        row-by-row path), 64 products per dpbusd per activation row
//   qgemm_i8_row_avx512  tiles for prefill: 16 weight rows in the 16 int32 lanes, 4 activation
//                        rows at a time, no horizontal sums (layout below)
#include "kernels/cpu/qgemm_avx512_util.hpp"

#include <cassert>
#include <cstring>

#include "kernels/cpu/qdot.hpp"
#include "kernels/cpu/qgemm.hpp"
#include "quant/int8_rows.hpp"

namespace infer {
namespace {

using namespace avx512_tiles;

// -128 Σ w modulo 2^32 (Σ w = -2^24 at n = 2^17 would overflow int32).
inline uint32_t offset_of(const void* w, int64_t n) { return 0u - 128u * static_cast<uint32_t>(i8_row_sum(w, n)); }

// The lanes' sum modulo 2^32. (GCC's _mm512_reduce_add_epi32 adds in int, which is undefined on
// the wrap-around these sums rely on before the offset brings them back into range; UBSan flags it.)
inline uint32_t reduce_add_wrapping(__m512i v) {
  const __m256i s = _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
  __m128i t = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
  t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4E));
  t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xB1));
  return static_cast<uint32_t>(_mm_cvtsi128_si32(t));
}

template <int R>
void rows_dot(const int8_t* w, int64_t n, const uint8_t* a, int64_t as, float* y, int64_t ys) {
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512i acc[R], acc2[R];  // two chains per row (the integer sum is the same in any grouping)
  for (int r = 0; r < R; ++r) acc[r] = acc2[r] = _mm512_setzero_si512();
  int64_t i = 0;
  for (; i + 128 <= n; i += 128) {
    const __m512i w0 = _mm512_loadu_si512(w + i), w1 = _mm512_loadu_si512(w + i + 64);
    for (int r = 0; r < R; ++r) {
      acc[r] = _mm512_dpbusd_epi32(acc[r], _mm512_xor_si512(_mm512_loadu_si512(a + r * as + i), flip), w0);
      acc2[r] = _mm512_dpbusd_epi32(acc2[r], _mm512_xor_si512(_mm512_loadu_si512(a + r * as + i + 64), flip), w1);
    }
  }
  for (; i + 64 <= n; i += 64) {
    const __m512i wv = _mm512_loadu_si512(w + i);
    for (int r = 0; r < R; ++r)
      acc[r] = _mm512_dpbusd_epi32(acc[r], _mm512_xor_si512(_mm512_loadu_si512(a + r * as + i), flip), wv);
  }
  if (i < n) {  // the last 32 (n is a multiple of 32): zero weights in the upper half
    const __mmask64 low = 0xFFFFFFFFull;
    const __m512i wv = _mm512_maskz_loadu_epi8(low, w + i);
    for (int r = 0; r < R; ++r)
      acc[r] = _mm512_dpbusd_epi32(acc[r], _mm512_xor_si512(_mm512_maskz_loadu_epi8(low, a + r * as + i), flip), wv);
  }
  const uint32_t offset = offset_of(w, n);
  const float sw = i8_row_scale(w, n);
  for (int r = 0; r < R; ++r) {
    const auto sum = static_cast<int32_t>(reduce_add_wrapping(_mm512_add_epi32(acc[r], acc2[r])) + offset);
    y[r * ys] = static_cast<float>(sum) * (sw * i8_row_scale(a + r * as, n));
  }
}

// ---- tiles ----
//
// Packed group of 16 weight rows of n elements (16 n + 128 bytes, per call in thread scratch):
//   q     i8[n/4][64]   vector k, lane j: row j's quants 4k..4k+3 (zeros for rows past count)
//   off   i32[16]       lane j: -128 Σ w of row j
//   s     f32[16]       lane j: row j's scale
// Side data of an activation row: its quants + 128 as bytes (n, rounded up to 64).
int64_t side_bytes(int64_t n) noexcept { return round64(n); }

void prepare_side(const void* a, void* side, int64_t n) noexcept {
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  const auto* src = static_cast<const uint8_t*>(a);
  auto* dst = static_cast<uint8_t*>(side);
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) _mm512_storeu_si512(dst + i, _mm512_xor_si512(_mm512_loadu_si512(src + i), flip));
  for (; i < n; ++i) dst[i] = src[i] ^ 0x80;
}

int64_t packed_bytes(int64_t n) noexcept { return 16 * n + 128; }

void pack(const void* w, int64_t ws, int64_t count, int64_t n, void* packed) noexcept {
  assert(count >= 1 && count <= kGroup && n % kI8RowBlock == 0);
  const auto* base = static_cast<const uint8_t*>(w);
  auto* q = static_cast<uint8_t*>(packed);
  if (count < kGroup) std::memset(q, 0, static_cast<size_t>(16 * n));
  // 16 rows x 16 bytes -> 4 vectors of 16 rows x 4 bytes: 4x4 dword transposes in each 128-bit lane.
  for (int64_t k = 0; k < n; k += 16) {
    __m512i v[4];
    for (int m = 0; m < 4; ++m) {
      // Lane g holds row 4g + m (gathered through memory: _mm512_inserti32x4 needs a constant lane,
      // which only an unrolled loop gives, and builds without full optimization do not unroll).
      alignas(64) uint8_t lanes[64] = {};
      for (int g = 0; g < 4; ++g) {
        const int64_t j = 4 * g + m;
        if (j < count) std::memcpy(lanes + 16 * g, base + j * ws + k, 16);
      }
      v[m] = _mm512_load_si512(lanes);
    }
    const __m512i a01 = _mm512_unpacklo_epi32(v[0], v[1]), b01 = _mm512_unpackhi_epi32(v[0], v[1]);
    const __m512i a23 = _mm512_unpacklo_epi32(v[2], v[3]), b23 = _mm512_unpackhi_epi32(v[2], v[3]);
    const __m512i t[4] = {_mm512_unpacklo_epi64(a01, a23), _mm512_unpackhi_epi64(a01, a23),
                          _mm512_unpacklo_epi64(b01, b23), _mm512_unpackhi_epi64(b01, b23)};
    for (int c = 0; c < 4; ++c) _mm512_storeu_si512(q + (k / 4 + c) * 64, t[c]);
  }
  uint32_t off[kGroup] = {};
  float s[kGroup] = {};
  for (int64_t j = 0; j < count; ++j) {
    off[j] = offset_of(base + j * ws, n);
    s[j] = i8_row_scale(base + j * ws, n);
  }
  std::memcpy(q + 16 * n, off, sizeof off);
  std::memcpy(q + 16 * n + 64, s, sizeof s);
}

// R activation rows against one packed group; two accumulators per row (even and odd k) so that
// 2R dpbusd chains are in flight.
template <int R>
void tile(const uint8_t* pk, int64_t count, const uint8_t* a, int64_t as, const uint8_t* side, int64_t ss, int64_t n,
          float* y, int64_t ys) {
  __m512i acc0[R], acc1[R];
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm512_setzero_si512();
  for (int64_t k = 0; k < n / 4; k += 2) {
    const __m512i w0 = _mm512_loadu_si512(pk + k * 64), w1 = _mm512_loadu_si512(pk + k * 64 + 64);
    for (int r = 0; r < R; ++r) {
      const uint8_t* s = side + r * ss + 4 * k;
      acc0[r] = _mm512_dpbusd_epi32(acc0[r], _mm512_set1_epi32(load_i32(s)), w0);
      acc1[r] = _mm512_dpbusd_epi32(acc1[r], _mm512_set1_epi32(load_i32(s + 4)), w1);
    }
  }
  const __m512i off = _mm512_loadu_si512(pk + 16 * n);
  const __m512 sw = _mm512_loadu_ps(reinterpret_cast<const float*>(pk + 16 * n + 64));
  const __mmask16 valid = lanes_below(count);
  for (int r = 0; r < R; ++r) {
    const __m512i sum = _mm512_add_epi32(_mm512_add_epi32(acc0[r], acc1[r]), off);
    const __m512 scale = _mm512_mul_ps(sw, _mm512_set1_ps(i8_row_scale(a + r * as, n)));
    _mm512_mask_storeu_ps(y + r * ys, valid, _mm512_mul_ps(_mm512_cvtepi32_ps(sum), scale));
  }
}

void multiply(const void* packed, int64_t count, const void* a, int64_t as, const void* side, int64_t ss, int64_t n_a,
              int64_t n, float* y, int64_t ys) noexcept {
  const auto* pk = static_cast<const uint8_t*>(packed);
  const auto* sb = static_cast<const uint8_t*>(side);
  const auto* ab = static_cast<const uint8_t*>(a);
  by_row_groups(n_a, [&](auto rows, int64_t r) {
    tile<decltype(rows)::value>(pk, count, ab + r * as, as, sb + r * ss, ss, n, y + r * ys, ys);
  });
}

}  // namespace

void qdot_i8_row_avx512(const void* w, const void* a, int64_t a_stride, int64_t n_a, int64_t n, float* y,
                        int64_t y_stride) noexcept {
  assert(n >= 0 && n % kI8RowBlock == 0);
  const auto* qw = static_cast<const int8_t*>(w);
  const auto* ab = static_cast<const uint8_t*>(a);
  int64_t r = 0;
  for (; r + 4 <= n_a; r += 4) rows_dot<4>(qw, n, ab + r * a_stride, a_stride, y + r * y_stride, y_stride);
  for (; r < n_a; ++r) rows_dot<1>(qw, n, ab + r * a_stride, a_stride, y + r * y_stride, y_stride);
}

const QGemmKernel qgemm_i8_row_avx512 = {
    .min_rows = 8,
    .group_rows = kGroup,
    .side_bytes = side_bytes,
    .prepare_side = prepare_side,
    .packed_bytes = packed_bytes,
    .pack = pack,
    .multiply = multiply,
    .unpack = nullptr,
};

}  // namespace infer
