// The attention kernels' code, compiled once per ISA (core/isa_variants.hpp): included by
// attention_ref.cpp, attention_avx2.cpp and attention_avx512.cpp inside namespace
// infer::INFER_ISA_NS; attention.cpp dispatches. Contract in attention.hpp.
// No include guard: each variant's file includes it once.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#if (defined(__F16C__) && defined(__AVX__)) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "core/half.hpp"
#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/dtype_traits.hpp"
#include "kernels/cpu/exp_approx.hpp"
#include "kernels/cpu/simd_lanes_impl.hpp"
#include "quant/block_formats.hpp"
#include "quant/fp8_rows.hpp"
#include "quant/quantize_activations.hpp"

namespace infer::INFER_ISA_NS {

// This ISA's Walsh-Hadamard butterflies (kernels/cpu/ops_impl.hpp; hadamard_blocks' bits, in
// registers): the rotated cache's rows, queries and outputs.
void hadamard_inplace(float* x, int64_t len, int n) noexcept;

namespace {

constexpr int kTile = kAttentionTile;
// Query heads (of one row, sharing a KV head) whose dots and values one pass over a tile
// computes together: their accumulators take 16 of AVX-512's 32 registers; 8 of AVX2's 16.
#if defined(__AVX512F__)
constexpr int kMaxStates = 4;
#else
constexpr int kMaxStates = 2;
#endif
// f(std::integral_constant<int, ns>{}) for 1 <= ns <= kMaxStates.
template <class F>
inline void with_states(int ns, F&& f) {
  switch (ns) {
#if defined(__AVX512F__)
    case 4: return f(std::integral_constant<int, 4>{});
    case 3: return f(std::integral_constant<int, 3>{});
#endif
    case 2: return f(std::integral_constant<int, 2>{});
    default: return f(std::integral_constant<int, 1>{});
  }
}

// Loads head_dim elements of a cache row as floats (F16 and BF16 convert exactly, so the F16C
// instruction or a shift, where the build has them, gives the same values as the scalar
// conversion; Q8_0 rows dequantize as dequantize_row does, one product a value, on every ISA;
// E4M3 codes decode exactly through a table).
inline void load_row(const KvView& kv, const uint8_t* row, float* dst) noexcept {
  if (kv.kv_type == DType::f32) {
    std::memcpy(dst, row, static_cast<size_t>(kv.head_dim) * 4);
  } else if (kv.kv_type == DType::f16) {
    const auto* h = reinterpret_cast<const uint16_t*>(row);
    int i = 0;
#if defined(__F16C__) && defined(__AVX__)
    for (; i + 8 <= kv.head_dim; i += 8)
      _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
#endif
    for (; i < kv.head_dim; ++i) dst[i] = f16_to_f32(h[i]);
  } else if (kv.kv_type == DType::f8_e4m3) {
    for (int i = 0; i < kv.head_dim; ++i) dst[i] = e4m3_to_f32(row[i]);  // exact
#if defined(__AVX2__)
  } else if (kv.kv_type == DType::bf16) {
    // The BF16 bits as a float's upper half: exact, as dequantize_row's conversion.
    const auto* h = reinterpret_cast<const uint16_t*>(row);
    int i = 0;
    for (; i + 8 <= kv.head_dim; i += 8) {
      const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i)));
      _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
    }
    for (; i < kv.head_dim; ++i) dst[i] = bf16_to_f32(h[i]);
  } else if (kv.kv_type == DType::q8_0) {
    // dequantize_row's one product float(q) * d per element, inline: a prefill tile loads a row
    // per position for every 16 query rows, and the call and its dispatch cost as much as this.
    for (int b = 0; b < kv.head_dim / 32; ++b, row += sizeof(quant::BlockQ8_0), dst += 32) {
      uint16_t dh;
      std::memcpy(&dh, row, 2);
      const float d = f16_to_f32(dh);
#if defined(__AVX512F__)
      for (int k = 0; k < 2; ++k) {
        const __m512i q = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 + 16 * k)));
        _mm512_storeu_ps(dst + 16 * k, _mm512_mul_ps(_mm512_cvtepi32_ps(q), _mm512_set1_ps(d)));
      }
#else
      for (int k = 0; k < 4; ++k) {
        const __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + 2 + 8 * k)));
        _mm256_storeu_ps(dst + 8 * k, _mm256_mul_ps(_mm256_cvtepi32_ps(q), _mm256_set1_ps(d)));
      }
#endif
    }
#endif
  } else {
    dequantize_row(kv.kv_type, row, dst, kv.head_dim);
  }
}

// An fp8 cache row: each element to the nearest e4m3fn number (ties to even), saturating at ±448,
// unscaled; a NaN stays NaN.
inline void store_row_e4m3(const float* src, uint8_t* row, int n) noexcept {
  for (int i = 0; i < n; ++i) row[i] = std::isnan(src[i]) ? uint8_t{0x7F} : f32_to_e4m3(src[i]);
}

// Stores n elements as llama.cpp's CPU backend writes its cache (ggml's from_float of the type;
// fp8, which llama.cpp lacks, as torch's float8_e4m3fn conversion after a clamp to ±448).
inline void store_row(DType type, uint8_t* row, const float* src, int n) noexcept {
  switch (type) {
    case DType::f32: std::memcpy(row, src, static_cast<size_t>(n) * 4); return;
    case DType::bf16: round_activations_bf16(src, row, n); return;
    case DType::q8_0: quantize_activations_q8_0(src, row, n); return;
    case DType::f8_e4m3: store_row_e4m3(src, row, n); return;
    default: round_activations_f16(src, row, n); return;  // f32_to_f16's bits, vectorized
  }
}

// Stores one head's row of a K (rotation = kv.k_rotation) or V (kv.v_rotation) cache: as it is,
// or rotated block by block (a block of n >= 64 elements is whole blocks of every cache type, so
// it is stored on its own at its share of the row's bytes).
inline void store_head(const KvView& kv, uint8_t* row, const float* src, int rotation) noexcept {
  if (rotation == 0) return store_row(kv.kv_type, row, src, kv.head_dim);
  float block[kMaxKvRotation];
  const uint64_t block_bytes = kv.row_bytes / static_cast<uint64_t>(kv.head_dim / rotation);
  for (int i = 0; i < kv.head_dim; i += rotation) {
    std::copy(src + i, src + i + rotation, block);
    hadamard_inplace(block, rotation, rotation);
    store_row(kv.kv_type, row + static_cast<uint64_t>(i / rotation) * block_bytes, block, rotation);
  }
}

// 16 floats and the operations the tiles need, in this ISA's registers: one zmm, two ymm, or
// scalars (the reference). fma16 is a fused multiply-add in every lane, so every variant computes
// the same bits.
#if defined(__AVX512F__)
struct V16 {
  __m512 v;
};
inline V16 load16(const float* p) noexcept { return {_mm512_loadu_ps(p)}; }
inline void store16(float* p, V16 a) noexcept { _mm512_storeu_ps(p, a.v); }
inline V16 set16(float x) noexcept { return {_mm512_set1_ps(x)}; }
inline V16 fma16(V16 a, V16 b, V16 c) noexcept { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
#elif defined(__AVX2__) && defined(__FMA__)
struct V16 {
  __m256 lo, hi;
};
inline V16 load16(const float* p) noexcept { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
inline void store16(float* p, V16 a) noexcept { _mm256_storeu_ps(p, a.lo), _mm256_storeu_ps(p + 8, a.hi); }
inline V16 set16(float x) noexcept { return {_mm256_set1_ps(x), _mm256_set1_ps(x)}; }
inline V16 fma16(V16 a, V16 b, V16 c) noexcept { return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)}; }
#else
struct V16 {
  float f[16];
};
inline V16 load16(const float* p) noexcept {
  V16 a;
  std::memcpy(a.f, p, sizeof a.f);
  return a;
}
inline void store16(float* p, V16 a) noexcept { std::memcpy(p, a.f, sizeof a.f); }
inline V16 set16(float x) noexcept {
  V16 a;
  std::fill(a.f, a.f + 16, x);
  return a;
}
inline V16 fma16(V16 a, V16 b, V16 c) noexcept {
  for (int i = 0; i < 16; ++i) c.f[i] = std::fma(a.f[i], b.f[i], c.f[i]);
  return c;
}
#endif

// The raw dots q_s · k_t of NS queries (query s at q[s]) over the tile's 64 positions (kt
// transposed: kt[i * kTile + t]) into p[s][t]: one fused chain per score over the head dimension
// in index order, the 64 x NS chains held in registers.
template <int NS>
inline void tile_dots(const float* const* q, const float* kt, int hd, float* const* p) noexcept {
  static_assert(kTile == 64);
  V16 acc[NS][4];
  for (int s = 0; s < NS; ++s)
    for (int c = 0; c < 4; ++c) acc[s][c] = set16(0.0f);
  for (int i = 0; i < hd; ++i) {
    const V16 k[4] = {load16(kt + i * kTile), load16(kt + i * kTile + 16), load16(kt + i * kTile + 32), load16(kt + i * kTile + 48)};
    for (int s = 0; s < NS; ++s) {
      const V16 b = set16(q[s][i]);
      for (int c = 0; c < 4; ++c) acc[s][c] = fma16(b, k[c], acc[s][c]);
    }
  }
  for (int s = 0; s < NS; ++s)
    for (int c = 0; c < 4; ++c) store16(p[s] + 16 * c, acc[s][c]);
}

// One tile's online-softmax step for one state, on its raw dots p[0..63] (visible positions
// [lo, n)): p[t] = scale * p[t]; m_new = max(m, max_t p[t]); if m_new > m, acc and sum are scaled
// by std::exp(m - m_new); p[t] = exp_ggml(p[t] - m_new) where visible, else 0; sum += the
// tile's Σp in float64, 8 at a time through the lane tree ((p0+p4)+(p2+p6))+((p1+p5)+(p3+p7)).
// The AVX2 and AVX-512 variants compute the same values W at a time (kernels/cpu/simd_lanes_impl.hpp):
// the products, the maximum and the trees are exact or the same single roundings, and exp_lanes
// runs exp_ggml's operations lane by lane.
inline void tile_softmax(float* p, int lo, int n, float scale, float& m, float& sum, float* acc, int hd) noexcept {
  static_assert(kTile == 64);
#if defined(__AVX2__) && defined(__FMA__)
  using S = SimdLanes;
  constexpr int kVectors = kTile / S::W;
  // Bit t: position t is visible.
  const uint64_t vis = (n >= 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1) & ~((uint64_t{1} << lo) - 1);
  S::F v[kVectors];
  S::F mx = S::set(-INFINITY);
  for (int c = 0; c < kVectors; ++c) {
    v[c] = S::mul(S::load(p + S::W * c), S::set(scale));
    mx = S::max_in(mx, S::lanes(vis >> (S::W * c)), v[c]);
  }
  const float tile_max = S::max_of(mx);
#else
  float tile_max = -INFINITY;
  for (int t = lo; t < n; ++t) {
    p[t] *= scale;
    tile_max = std::max(tile_max, p[t]);
  }
#endif
  const float m_new = std::fmax(m, tile_max);
  if (m_new > m) {
    const float rescale = std::exp(m - m_new);
    for (int i = 0; i < hd; ++i) acc[i] *= rescale;
    sum *= rescale;
  }
  m = m_new;
  double tile_sum = 0.0;
#if defined(__AVX2__) && defined(__FMA__)
  for (int c = 0; c < kVectors; ++c) {
    const S::Mask valid = S::lanes(vis >> (S::W * c));
    const S::F e = S::only(valid, exp_lanes(S::sub(v[c], S::set(m_new)), valid));
    S::store(p + S::W * c, e);
    S::add_trees(e, tile_sum);
  }
#else
  // Positions past n or before lo are masked: probability exactly 0, which adds nothing.
  for (int t = 0; t < kTile; ++t) p[t] = t >= lo && t < n ? exp_ggml(p[t] - m_new) : 0.0f;
  for (int g = 0; g < kTile; g += 8) {
    const float* l = p + g;
    tile_sum += static_cast<double>(((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7])));
  }
#endif
  sum = static_cast<float>(static_cast<double>(sum) + tile_sum);
}

// kt[i * kTile + t] = rows[t * hd + i]: the tile's 64 rows of hd floats, transposed.
#if defined(__AVX512F__)
// 16 rows of 16 floats (src, ss apart) to 16 columns (dst, ds apart).
inline void transpose16(const float* src, int64_t ss, float* dst, int64_t ds) noexcept {
  __m512 r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * ss);
  for (int k = 0; k < 8; ++k) {  // per 128-bit lane L: [a(4L) b(4L) a(4L+1) b(4L+1)], [a(4L+2) ...]
    t[2 * k] = _mm512_unpacklo_ps(r[2 * k], r[2 * k + 1]);
    t[2 * k + 1] = _mm512_unpackhi_ps(r[2 * k], r[2 * k + 1]);
  }
  for (int k = 0; k < 4; ++k) {  // r[4k + j], lane L: column 4L + j of rows 4k..4k+3
    const auto pd = [](__m512 x) { return _mm512_castps_pd(x); };
    r[4 * k] = _mm512_castpd_ps(_mm512_unpacklo_pd(pd(t[4 * k]), pd(t[4 * k + 2])));
    r[4 * k + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(pd(t[4 * k]), pd(t[4 * k + 2])));
    r[4 * k + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(pd(t[4 * k + 1]), pd(t[4 * k + 3])));
    r[4 * k + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(pd(t[4 * k + 1]), pd(t[4 * k + 3])));
  }
  for (int j = 0; j < 4; ++j) {  // column 4L + j: lane L of r[j], r[4 + j], r[8 + j], r[12 + j]
    const __m512 s0 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x88), s1 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xDD);
    const __m512 s2 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x88), s3 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xDD);
    _mm512_storeu_ps(dst + j * ds, _mm512_shuffle_f32x4(s0, s2, 0x88));
    _mm512_storeu_ps(dst + (8 + j) * ds, _mm512_shuffle_f32x4(s0, s2, 0xDD));
    _mm512_storeu_ps(dst + (4 + j) * ds, _mm512_shuffle_f32x4(s1, s3, 0x88));
    _mm512_storeu_ps(dst + (12 + j) * ds, _mm512_shuffle_f32x4(s1, s3, 0xDD));
  }
}
constexpr int kTransposeBlock = 16;
#elif defined(__AVX2__)
// 8 rows of 8 floats (src, ss apart) to 8 columns (dst, ds apart).
inline void transpose8(const float* src, int64_t ss, float* dst, int64_t ds) noexcept {
  __m256 v[8];
  for (int i = 0; i < 8; ++i) v[i] = _mm256_loadu_ps(src + i * ss);
  transpose8x8(v);
  for (int j = 0; j < 8; ++j) _mm256_storeu_ps(dst + j * ds, v[j]);
}
constexpr int kTransposeBlock = 8;
#else
constexpr int kTransposeBlock = 0;
#endif

inline void transpose_tile(const float* rows, int hd, float* kt) noexcept {
  int i0 = 0;
  if constexpr (kTransposeBlock > 0) {
    for (; i0 + kTransposeBlock <= hd; i0 += kTransposeBlock)
      for (int t0 = 0; t0 < kTile; t0 += kTransposeBlock) {
#if defined(__AVX512F__)
        transpose16(rows + static_cast<int64_t>(t0) * hd + i0, hd, kt + static_cast<int64_t>(i0) * kTile + t0, kTile);
#elif defined(__AVX2__)
        transpose8(rows + static_cast<int64_t>(t0) * hd + i0, hd, kt + static_cast<int64_t>(i0) * kTile + t0, kTile);
#endif
      }
  }
  for (int i = i0; i < hd; ++i)
    for (int t = 0; t < kTile; ++t) kt[static_cast<int64_t>(i) * kTile + t] = rows[static_cast<int64_t>(t) * hd + i];
}

// acc[s][i] = fma(vt[t * hd + i], p[s][t], acc[s][i]) for t = lo..n-1 in order and i in
// [i0, i0 + 16 NV): NS states' accumulators held in registers across the positions.
template <int NS, int NV>
inline void tile_values_block(const float* vt, int hd, int i0, int lo, int n, const float* const* p, float* const* acc) noexcept {
  V16 a[NS][NV];
  for (int s = 0; s < NS; ++s)
    for (int c = 0; c < NV; ++c) a[s][c] = load16(acc[s] + i0 + 16 * c);
  for (int t = lo; t < n; ++t) {
    V16 v[NV];
    for (int c = 0; c < NV; ++c) v[c] = load16(vt + static_cast<int64_t>(t) * hd + i0 + 16 * c);
    for (int s = 0; s < NS; ++s) {
      const V16 w = set16(p[s][t]);
      for (int c = 0; c < NV; ++c) a[s][c] = fma16(v[c], w, a[s][c]);
    }
  }
  for (int s = 0; s < NS; ++s)
    for (int c = 0; c < NV; ++c) store16(acc[s] + i0 + 16 * c, a[s][c]);
}

// The values of positions [lo, n) of a tile (vt: its V rows as floats, hd apart) added into NS
// states' accumulators, each element's chain in position order.
template <int NS>
inline void tile_values(const float* vt, int hd, int lo, int n, const float* const* p, float* const* acc) noexcept {
  int i0 = 0;
  for (; i0 + 64 <= hd; i0 += 64) tile_values_block<NS, 4>(vt, hd, i0, lo, n, p, acc);
  switch ((hd - i0) / 16) {
    case 3: tile_values_block<NS, 3>(vt, hd, i0, lo, n, p, acc); break;
    case 2: tile_values_block<NS, 2>(vt, hd, i0, lo, n, p, acc); break;
    case 1: tile_values_block<NS, 1>(vt, hd, i0, lo, n, p, acc); break;
    default: break;
  }
  for (int i = hd / 16 * 16; i < hd; ++i)
    for (int s = 0; s < NS; ++s)
      for (int t = lo; t < n; ++t) acc[s][i] = std::fma(vt[static_cast<int64_t>(t) * hd + i], p[s][t], acc[s][i]);
}

// Folds a chunk's online-softmax state (m, sum, acc) into the running one (fm, fsum, facc), in
// ggml_flash_attn_ext_reduce_partials' arithmetic: a chunk that saw nothing (sum 0) adds nothing,
// and the first one that saw something is taken as it is.
inline void fold_chunk(float m, float sum, const float* acc, int hd, float& fm, float& fsum, float* facc) noexcept {
  if (sum == 0.0f) return;
  if (fsum == 0.0f) {
    fm = m;
    fsum = sum;
    std::copy(acc, acc + hd, facc);
    return;
  }
  const float m_new = std::fmax(fm, m);
  const float scale_old = std::exp(fm - m_new), scale_new = std::exp(m - m_new);
  for (int i = 0; i < hd; ++i) facc[i] = facc[i] * scale_old + acc[i] * scale_new;
  fsum = fsum * scale_old + sum * scale_new;
  fm = m_new;
}

// out = facc / fsum (0 when nothing was visible), rotated back when the V rows are rotated.
inline void write_normalized(const KvView& kv, const float* facc, float fsum, int hd, float* out) noexcept {
  const float inv = fsum == 0.0f ? 0.0f : 1.0f / fsum;
  for (int i = 0; i < hd; ++i) out[i] = facc[i] * inv;
  if (kv.v_rotation > 0) hadamard_inplace(out, hd, kv.v_rotation);
}

// Head h's query: q itself, or its rotation (into `rotated`) when the K rows are rotated.
inline const float* query(const KvView& kv, const float* q, int hd, float* rotated) noexcept {
  if (kv.k_rotation == 0) return q;
  std::copy(q, q + hd, rotated);
  hadamard_inplace(rotated, hd, kv.k_rotation);
  return rotated;
}

}  // namespace

void kv_store(const KvView& kv, int layer, std::span<const int32_t> blocks, int32_t pos, const float* k,
              const float* v) noexcept {
  const int32_t block = blocks[static_cast<size_t>(pos / kv.block_size)];
  const int32_t slot = pos % kv.block_size;
  const uint64_t row_bytes = kv.row_bytes;
  for (int h = 0; h < kv.n_kv_heads; ++h) {
    store_head(kv, kv.k_block(layer, block, h) + slot * row_bytes, k + static_cast<int64_t>(h) * kv.head_dim, kv.k_rotation);
    store_head(kv, kv.v_block(layer, block, h) + slot * row_bytes, v + static_cast<int64_t>(h) * kv.head_dim, kv.v_rotation);
  }
}

void attention_row(const float* q, const AttentionShape& shape, const KvView& kv, int layer,
                   std::span<const int32_t> blocks, int32_t n_ctx, float* out, float* scratch,
                   int32_t first) noexcept {
  const int hd = shape.head_dim;
  const int group = shape.n_head / shape.n_kv_heads;
  const uint64_t row_bytes = kv.row_bytes;
  float* kt = scratch;              // the tile's keys, transposed: kt[i * kTile + t]
  float* p = kt + kTile * hd;       // scores, then probabilities
  float* row = p + kTile;           // one K or V row
  float* acc = row + hd;
  float* facc = acc + hd;           // the chunks folded so far
  float* qrot = facc + hd;          // the rotated query (a rotated cache)
  // The K (or V, `value`) row of position pos, as floats in row.
  auto cache_row = [&](bool value, int kvh, int32_t pos) {
    const int64_t b = blocks[static_cast<size_t>(pos / kv.block_size)];
    load_row(kv, (value ? kv.v_block(layer, b, kvh) : kv.k_block(layer, b, kvh)) + (pos % kv.block_size) * row_bytes, row);
  };
  for (int h = 0; h < shape.n_head; ++h) {
    const int kvh = h / group;
    const float* qh = query(kv, q + static_cast<int64_t>(h) * hd, hd, qrot);
    float m = -INFINITY, sum = 0.0f, fm = -INFINITY, fsum = 0.0f;
    for (int i = 0; i < hd; ++i) acc[i] = 0.0f;
    const int32_t start = first / kTile * kTile;
    for (int32_t t0 = start; t0 < n_ctx; t0 += kTile) {
      if (t0 % kAttentionChunk == 0 && t0 != start) {
        fold_chunk(m, sum, acc, hd, fm, fsum, facc);
        m = -INFINITY, sum = 0.0f;
        std::fill(acc, acc + hd, 0.0f);
      }
      const int n = std::min<int32_t>(kTile, n_ctx - t0);
      const int lo = std::max<int32_t>(0, first - t0);  // positions t0 + [lo, n) are visible
      for (int t = 0; t < kTile; ++t) {
        const bool visible = t >= lo && t < n;
        if (visible) cache_row(false, kvh, t0 + t);
        for (int i = 0; i < hd; ++i) kt[i * kTile + t] = visible ? row[i] : 0.0f;
      }
      tile_dots<1>(&qh, kt, hd, &p);
      tile_softmax(p, lo, n, shape.scale, m, sum, acc, hd);
      for (int t = lo; t < n; ++t) {
        cache_row(true, kvh, t0 + t);
        for (int i = 0; i < hd; ++i) acc[i] = std::fma(row[i], p[t], acc[i]);
      }
    }
    fold_chunk(m, sum, acc, hd, fm, fsum, facc);
    write_normalized(kv, facc, fsum, hd, out + static_cast<int64_t>(h) * hd);
  }
}

void attention_rows(const AttentionShape& shape, const KvView& kv, int layer, std::span<const int32_t> blocks,
                    const AttentionRows& rows, float* scratch, int head_begin, int head_end, int chunk,
                    float* partials) noexcept {
  const int hd = shape.head_dim;
  const int group = shape.n_head / shape.n_kv_heads;
  if (head_end < 0) head_end = shape.n_head;
  const int n_rows = rows.n_rows;
  const int n_states = n_rows * group;
  const uint64_t row_bytes = kv.row_bytes;
  float* kt = scratch;             // kt[i * kTile + t]
  float* vt = kt + kTile * hd;     // vt[t * hd + i]
  float* acc = vt + kTile * hd;    // [n_states][hd]: this chunk's
  float* prob = acc + static_cast<int64_t>(n_states) * hd;   // [n_states][kTile]
  float* m = prob + static_cast<int64_t>(n_states) * kTile;  // [n_states]
  float* sum = m + n_states;                                 // [n_states]
  float* facc = sum + n_states;                              // [n_states][hd]: the chunks folded so far
  float* fm = facc + static_cast<int64_t>(n_states) * hd;    // [n_states]
  float* fsum = fm + n_states;                               // [n_states]
  float* qrot = fsum + n_states;                             // [n_states][hd]: rotated queries (a rotated cache)
  // The K (or V, `value`) row of position pos, as floats in dst.
  auto load = [&](bool value, int kvh, int32_t pos, float* dst) {
    const int64_t b = blocks[static_cast<size_t>(pos / kv.block_size)];
    load_row(kv, (value ? kv.v_block(layer, b, kvh) : kv.k_block(layer, b, kvh)) + (pos % kv.block_size) * row_bytes, dst);
  };
  int32_t lo_all = INT32_MAX, hi_all = 0;  // positions some row sees
  for (int j = 0; j < n_rows; ++j) {
    lo_all = std::min(lo_all, rows.first[j]);
    hi_all = std::max(hi_all, rows.n_ctx[j]);
  }
  int32_t t_begin = lo_all / kTile * kTile, t_end = hi_all;
  if (chunk >= 0) {
    t_begin = std::max(t_begin, chunk * kAttentionChunk);
    t_end = std::min(t_end, (chunk + 1) * kAttentionChunk);
  }
  auto reset_chunk = [&] {
    for (int s = 0; s < n_states; ++s) {
      m[s] = -INFINITY;
      sum[s] = 0.0f;
      std::fill(acc + static_cast<int64_t>(s) * hd, acc + static_cast<int64_t>(s + 1) * hd, 0.0f);
    }
  };
  for (int kvh = head_begin / group; kvh * group < head_end; ++kvh) {
    // This KV head's query heads within [head_begin, head_end).
    const int g_lo = std::max(0, head_begin - kvh * group), g_hi = std::min(group, head_end - kvh * group);
    auto fold_all = [&] {
      for (int s = 0; s < n_states; ++s)
        fold_chunk(m[s], sum[s], acc + static_cast<int64_t>(s) * hd, hd, fm[s], fsum[s], facc + static_cast<int64_t>(s) * hd);
    };
    reset_chunk();
    for (int s = 0; s < n_states; ++s) fm[s] = -INFINITY, fsum[s] = 0.0f;
    // Each state's query: its part of q, or (a rotated cache) its rotation, computed once here.
    auto q_of = [&](int j, int g) {
      return rows.q + static_cast<int64_t>(rows.rows[j]) * rows.q_stride + static_cast<int64_t>(kvh * group + g) * hd;
    };
    if (kv.k_rotation > 0)
      for (int j = 0; j < n_rows; ++j)
        for (int g = g_lo; g < g_hi; ++g) query(kv, q_of(j, g), hd, qrot + static_cast<int64_t>(j * group + g) * hd);
    auto state_query = [&](int j, int g) { return kv.k_rotation > 0 ? qrot + static_cast<int64_t>(j * group + g) * hd : q_of(j, g); };
    for (int32_t t0 = t_begin; t0 < t_end; t0 += kTile) {
      if (t0 % kAttentionChunk == 0 && t0 != t_begin) {
        fold_all();
        reset_chunk();
      }
      // The tile's keys any row sees (others stay 0: every row masks them), staged as rows in vt
      // and transposed into kt; then the tile's values any row sees, as floats: vt[t * hd + i].
      const int n_all = std::min<int32_t>(kTile, hi_all - t0);
      const int lo_tile = std::max<int32_t>(0, lo_all - t0);
      for (int t = 0; t < kTile; ++t) {
        float* dst = vt + static_cast<int64_t>(t) * hd;
        if (t >= lo_tile && t < n_all)
          load(false, kvh, t0 + t, dst);
        else
          std::fill(dst, dst + hd, 0.0f);
      }
      transpose_tile(vt, hd, kt);
      for (int t = lo_tile; t < n_all; ++t) load(true, kvh, t0 + t, vt + static_cast<int64_t>(t) * hd);
      for (int j = 0; j < n_rows; ++j) {
        const int32_t first = rows.first[j], n_ctx = rows.n_ctx[j];
        if (t0 >= n_ctx || t0 + kTile <= first / kTile * kTile) continue;  // tile outside this row's range
        const int n = std::min<int32_t>(kTile, n_ctx - t0);
        const int lo = std::max<int32_t>(0, first - t0);
        // The row's query heads kMaxStates at a time (they share the K and V loads), then fewer.
        for (int g = g_lo; g < g_hi;) {
          const int ns = std::min(kMaxStates, g_hi - g);
          const float* qh[kMaxStates];
          float* p[kMaxStates];
          float* a[kMaxStates];
          for (int k = 0; k < ns; ++k) {
            const int s = j * group + g + k;
            qh[k] = state_query(j, g + k);
            p[k] = prob + static_cast<int64_t>(s) * kTile;
            a[k] = acc + static_cast<int64_t>(s) * hd;
          }
          with_states(ns, [&](auto c) { tile_dots<decltype(c)::value>(qh, kt, hd, p); });
          for (int k = 0; k < ns; ++k) {
            const int s = j * group + g + k;
            tile_softmax(p[k], lo, n, shape.scale, m[s], sum[s], a[k], hd);
          }
          // Values: each element's chain over the row's visible positions, in position order.
          with_states(ns, [&](auto c) { tile_values<decltype(c)::value>(vt, hd, lo, n, p, a); });
          g += ns;
        }
      }
    }
    for (int j = 0; j < n_rows; ++j)
      for (int g = g_lo; g < g_hi; ++g) {
        const int s = j * group + g, h = kvh * group + g;
        if (chunk >= 0) {
          // This chunk's state, for attention_combine.
          float* part = partials + (static_cast<int64_t>(j) * shape.n_head + h) * (hd + 2);
          part[0] = m[s];
          part[1] = sum[s];
          std::copy(acc + static_cast<int64_t>(s) * hd, acc + static_cast<int64_t>(s + 1) * hd, part + 2);
          continue;
        }
        fold_chunk(m[s], sum[s], acc + static_cast<int64_t>(s) * hd, hd, fm[s], fsum[s], facc + static_cast<int64_t>(s) * hd);
        write_normalized(kv, facc + static_cast<int64_t>(s) * hd, fsum[s], hd,
                         rows.out + static_cast<int64_t>(rows.rows[j]) * rows.out_stride + static_cast<int64_t>(h) * hd);
      }
  }
}

void attention_combine(const AttentionShape& shape, const KvView& kv, const AttentionRows& rows, const float* partials,
                       int n_chunks, int64_t chunk_stride, float* scratch, int head_begin, int head_end) noexcept {
  const int hd = shape.head_dim;
  if (head_end < 0) head_end = shape.n_head;
  for (int j = 0; j < rows.n_rows; ++j)
    for (int h = head_begin; h < head_end; ++h) {
      float fm = -INFINITY, fsum = 0.0f;
      for (int c = 0; c < n_chunks; ++c) {
        const float* part = partials + c * chunk_stride + (static_cast<int64_t>(j) * shape.n_head + h) * (hd + 2);
        fold_chunk(part[0], part[1], part + 2, hd, fm, fsum, scratch);
      }
      write_normalized(kv, scratch, fsum, hd, rows.out + static_cast<int64_t>(rows.rows[j]) * rows.out_stride + static_cast<int64_t>(h) * hd);
    }
}

}  // namespace infer::INFER_ISA_NS
