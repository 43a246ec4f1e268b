// Helpers for the dequantization, dot and matmul tests: random but valid weight rows of every
// computable type, their scale and min parts, and a sweep over the CPU ISAs this machine supports.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/cpu_features.hpp"
#include "core/dtype.hpp"
#include "core/half.hpp"
#include "quant/fp8_rows.hpp"
#include "kernels/cpu/dtype_traits.hpp"

namespace infer::test {


// Every GGUF type can_dequantize() accepts (the row-scaled I8_ROW has its own tests:
// test_int8_rows.cpp).
inline const std::vector<DType>& computable_types() {
  static const std::vector<DType> types = {DType::f32,  DType::f16,  DType::bf16, DType::q8_0, DType::q4_0,
                                           DType::q4_1, DType::q5_0, DType::q5_1, DType::q2_k, DType::q3_k,
                                           DType::q4_k, DType::q5_k, DType::q6_k};
  return types;
}

// Byte offsets of the F16 scale fields in one block (from ggml-common.h, written out here on
// their own so that the tests do not lean on src/quant/block_formats.hpp).
inline std::vector<int> f16_field_offsets(DType t) {
  switch (t) {
    case DType::q4_0: case DType::q5_0: case DType::q8_0: return {0};
    case DType::q4_1: case DType::q5_1: case DType::q4_k: case DType::q5_k: return {0, 2};
    case DType::q2_k: return {80, 82};
    case DType::q3_k: return {108};
    case DType::q6_k: return {208};
    default: return {};
  }
}

// Magnitudes of the random scales (and of F16/BF16 elements): binary exponents in [lo, hi].
struct ExponentRange {
  int lo;
  int hi;
};
inline constexpr ExponentRange kAnyFiniteHalf{-24, 15};  // F16 subnormals up to the largest half
inline constexpr ExponentRange kTypicalScale{-12, -2};    // what quantized weights look like

// A finite, nonzero half with random sign and mantissa and an exponent in the range.
inline uint16_t random_half(std::mt19937_64& rng, ExponentRange r) {
  const int e = r.lo + static_cast<int>(rng() % static_cast<uint64_t>(r.hi - r.lo + 1));
  const uint16_t sign = (rng() & 1) ? 0x8000 : 0;
  const uint16_t mant = static_cast<uint16_t>(rng() & 0x3ff);
  if (e < -14) {  // subnormal: value = mant * 2^-24; keep it nonzero
    const int shift = -14 - e;  // 1..10
    return static_cast<uint16_t>(sign | std::max<uint16_t>(1, static_cast<uint16_t>((0x400 | mant) >> shift)));
  }
  return static_cast<uint16_t>(sign | (e + 15) << 10 | mant);
}

inline uint16_t random_bf16(std::mt19937_64& rng, ExponentRange r) {
  const int e = r.lo + static_cast<int>(rng() % static_cast<uint64_t>(r.hi - r.lo + 1));
  const uint16_t sign = (rng() & 1) ? 0x8000 : 0;
  return static_cast<uint16_t>(sign | (e + 127) << 7 | (rng() & 0x7f));
}

// n_rows rows of n_in elements of type t, contiguous: random quant bits, scales drawn from
// `scales`. F32 elements are uniform in [-1, 1]. I8_ROW (and I8_W8A16) rows get their Σ q (the
// W8A8 kernels read it).
inline std::vector<uint8_t> random_weights(DType t, int64_t n_rows, int64_t n_in, uint64_t seed,
                                           ExponentRange scales = kTypicalScale) {
  const auto* tr = dtype_traits(t);
  if (t == DType::i8_row || t == DType::i8_w8a16) {
    std::mt19937_64 rng(seed);
    const int64_t row_bytes = n_in + 8;
    std::vector<uint8_t> bytes(static_cast<size_t>(n_rows * row_bytes));
    for (int64_t r = 0; r < n_rows; ++r) {
      uint8_t* row = bytes.data() + r * row_bytes;
      int32_t sum = 0;
      for (int64_t i = 0; i < n_in; ++i) {
        const auto q = static_cast<int8_t>(rng());
        row[i] = static_cast<uint8_t>(q);
        sum += q;
      }
      const float s = std::fabs(f16_to_f32(random_half(rng, scales)));
      std::memcpy(row + n_in, &s, 4);
      std::memcpy(row + n_in + 4, &sum, 4);
    }
    return bytes;
  }
  if (t == DType::f8_row || t == DType::f8_tensor || t == DType::f8_w8a8) {
    // Valid rows (no NaN codes, a finite scale): quantized from floats whose magnitude varies by row.
    std::mt19937_64 rng(seed);
    const int64_t row_bytes = n_in + tr->row_extra_bytes;
    std::vector<uint8_t> bytes(static_cast<size_t>(n_rows * row_bytes));
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(n_in));
    for (int64_t r = 0; r < n_rows; ++r) {
      const float scale = std::fabs(f16_to_f32(random_half(rng, scales)));
      for (auto& v : x) v = scale * u(rng);
      quantize_row_f8_row(x.data(), bytes.data() + r * row_bytes, n_in);
    }
    return bytes;
  }
  const int64_t n_blocks = n_rows * n_in / tr->block_size;
  std::vector<uint8_t> bytes(static_cast<size_t>(n_blocks * tr->block_bytes));
  std::mt19937_64 rng(seed);
  if (t == DType::f32) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (size_t i = 0; i < bytes.size(); i += 4) {
      const float f = u(rng);
      std::memcpy(&bytes[i], &f, 4);
    }
    return bytes;
  }
  if (t == DType::f16 || t == DType::bf16) {
    for (size_t i = 0; i < bytes.size(); i += 2) {
      const uint16_t h = t == DType::f16 ? random_half(rng, scales) : random_bf16(rng, scales);
      std::memcpy(&bytes[i], &h, 2);
    }
    return bytes;
  }
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  if (t == DType::i4_g32 || t == DType::i4_g64 || t == DType::i4_g128) {
    // Per group: an f32 scale d > 0 and an integer zero point z in 0..15, then random codes.
    for (int64_t blk = 0; blk < n_blocks; ++blk) {
      const float d = std::fabs(f16_to_f32(random_half(rng, scales))), z = static_cast<float>(rng() % 16);
      std::memcpy(&bytes[static_cast<size_t>(blk * tr->block_bytes)], &d, 4);
      std::memcpy(&bytes[static_cast<size_t>(blk * tr->block_bytes + 4)], &z, 4);
    }
    return bytes;
  }
  const auto offsets = f16_field_offsets(t);
  for (int64_t blk = 0; blk < n_blocks; ++blk)
    for (int off : offsets) {
      const uint16_t h = random_half(rng, scales);
      std::memcpy(&bytes[static_cast<size_t>(blk * tr->block_bytes + off)], &h, 2);
    }
  return bytes;
}

inline std::vector<float> random_floats(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& f : v) f = u(rng);
  return v;
}

// Activation rows with per-32 magnitudes from 1e-3 to 1e3, and runs of +-amax only (every quant
// +-127: the integer sums at their largest).
inline std::vector<float> activation_floats(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t b = 0; b < n; b += 32) {
    const float scale = std::pow(10.0f, -3.0f + 6.0f * static_cast<float>(rng() % 1000) / 1000.0f);
    const bool extreme = rng() % 5 == 0;
    for (int64_t i = b; i < std::min(n, b + 32); ++i) {
      const float v = uniform(rng);
      x[static_cast<size_t>(i)] = scale * (extreme ? (v < 0 ? -1.0f : 1.0f) : v);
    }
  }
  return x;
}

// The ISAs this CPU can run, scalar first.
inline std::vector<CpuIsa> supported_isas() {
  std::vector<CpuIsa> isas;
  for (int i = 0; i <= static_cast<int>(detected_isa()); ++i)
    if (isa_supported(static_cast<CpuIsa>(i))) isas.push_back(static_cast<CpuIsa>(i));
  return isas;
}

// Selects an ISA for the lifetime of the object, then restores the previous one.
class IsaScope {
 public:
  explicit IsaScope(CpuIsa isa) : previous_(active_isa()) { set_active_isa(isa); }
  ~IsaScope() { set_active_isa(previous_); }
  IsaScope(const IsaScope&) = delete;
  IsaScope& operator=(const IsaScope&) = delete;

 private:
  CpuIsa previous_;
};

// Types whose elements carry a min (d*sc*q - dmin*m, or d*q + m).
inline bool has_min(DType t) {
  return t == DType::q4_1 || t == DType::q5_1 || t == DType::q2_k || t == DType::q4_k || t == DType::q5_k;
}

// A weight row's elements split into the scale part (d*sc*q) and the min part (-dmin*m, or +m),
// each found by dequantizing the row with the other F16 field of every block set to zero; the min
// part is zero for types without one. Either part is exact in float.
struct WeightParts {
  std::vector<float> scale, min;
};
inline WeightParts weight_parts(DType t, const uint8_t* row, int64_t n) {
  const auto* tr = dtype_traits(t);
  const size_t bytes = static_cast<size_t>(n / tr->block_size) * tr->block_bytes;
  auto zeroed = [&](int field) {
    std::vector<uint8_t> copy(row, row + bytes);
    const auto off = static_cast<size_t>(f16_field_offsets(t)[static_cast<size_t>(field)]);
    for (size_t b = 0; b < bytes; b += tr->block_bytes) copy[b + off] = copy[b + off + 1] = 0;
    std::vector<float> out(static_cast<size_t>(n));
    dequantize_row_ref(t, copy.data(), out.data(), n);
    return out;
  };
  if (!has_min(t)) {
    std::vector<float> all(static_cast<size_t>(n));
    dequantize_row_ref(t, row, all.data(), n);
    return {all, std::vector<float>(static_cast<size_t>(n), 0.0f)};
  }
  return {zeroed(1), zeroed(0)};
}

// Elements per row that exercise several blocks of the type (and a tail for plain types).
inline int64_t several_blocks(DType t) {
  const auto bs = dtype_traits(t)->block_size;
  return bs == 1 ? 1003 : bs == 32 ? 32 * 37 : 256 * 5;
}

}  // namespace infer::test
