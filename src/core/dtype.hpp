// The element types of tensors: every GGUF tensor type, with its block layout.
//
// Values equal the GGUF/ggml type ids (they are what a GGUF file stores), so a DType read from a
// file is valid exactly when dtype_traits() knows it. Quantized types pack `block_size` elements
// into `block_bytes` bytes; a row's length must be a multiple of the block size.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace infer {

enum class DType : uint32_t {
  f32 = 0, f16 = 1, q4_0 = 2, q4_1 = 3,
  // 4, 5: Q4_2 and Q4_3, removed from ggml
  q5_0 = 6, q5_1 = 7, q8_0 = 8, q8_1 = 9,
  q2_k = 10, q3_k = 11, q4_k = 12, q5_k = 13, q6_k = 14, q8_k = 15,
  iq2_xxs = 16, iq2_xs = 17, iq3_xxs = 18, iq1_s = 19, iq4_nl = 20, iq3_s = 21, iq2_s = 22,
  iq4_xs = 23,
  i8 = 24, i16 = 25, i32 = 26, i64 = 27, f64 = 28,
  iq1_m = 29, bf16 = 30,
  // 31-33: Q4_0_4_4, Q4_0_4_8, Q4_0_8_8 (repacked layouts, no longer stored in files)
  tq1_0 = 34, tq2_0 = 35,
  // 36-38: IQ4_NL_4_4, IQ4_NL_4_8, IQ4_NL_8_8 (likewise)
  mxfp4 = 39, nvfp4 = 40, q1_0 = 41, q2_0 = 42,
  // libinfer's own types, never read from or written to a GGUF file (DTypeTraits::internal): weights
  // converted at load (quant/int8_rows.hpp, quant/fp8_rows.hpp).
  i8_row = 200,     // INT8, one f32 scale per row (per output channel; per token for activations)
  f8_row = 201,     // FP8 E4M3 (e4m3fn), one f32 scale per row (quant/fp8_rows.hpp)
  f8_tensor = 202,  // the same rows, quantized with one scale for the whole matrix
  f8_e4m3 = 203,    // FP8 E4M3 (e4m3fn) numbers, unscaled: the elements of the fp8 KV cache
  i4_g32 = 204,     // INT4 with an f32 scale and zero point per group of 32, 64, 128 (quant/int4_groups.hpp)
  i4_g64 = 205,
  i4_g128 = 206,
  i4_packed = 207,  // compressed-tensors' INT4 words, as read (8 per int32): converted at load, never computed
  f8_w8a8 = 208,    // FP8 E4M3 weight rows as f8_row, computed with FP8 activations (W8A8-FP8)
  f8_act = 209,     // activations quantized to E4M3 per token, held decoded (quant/fp8_rows.hpp)
  i8_w8a16 = 210,   // INT8 weight rows as i8_row, computed with F32 activations (W8A16: weight-only)
  i8_g32 = 211,     // INT8 with an f32 scale per group of 32, 64, 128, F32 activations (quant/int8_groups.hpp)
  i8_g64 = 212,
  i8_g128 = 213,
};
// The largest id above (tables indexed by id have kMaxDTypeId + 1 slots).
inline constexpr uint32_t kMaxDTypeId = 213;

struct DTypeTraits {
  DType type;
  const char* name;      // as llama.cpp prints it: "F32", "Q4_K", "IQ2_XXS"
  uint32_t block_size;   // elements per block (1 for plain types)
  uint32_t block_bytes;  // bytes per block
  bool quantized;        // block-quantized (not a plain number type)
  bool computable;       // libinfer has kernels for it (dequantize, matmul); false: readable only
  // Bytes every row carries after its blocks (the per-row scale of the row-scaled types), 0 for
  // GGUF's types: a row of n elements takes n / block_size * block_bytes + row_extra_bytes.
  uint32_t row_extra_bytes = 0;
  bool internal = false;  // libinfer's own type: not a GGUF tensor type (readers reject it)
};

// Traits of a type id, or nullptr for an id that is not a known type.
const DTypeTraits* dtype_traits(uint32_t id) noexcept;
inline const DTypeTraits* dtype_traits(DType t) noexcept { return dtype_traits(static_cast<uint32_t>(t)); }

// All known types, in id order.
std::span<const DTypeTraits> all_dtypes() noexcept;

// "Q4_K" for a known type, "type#<id>" otherwise (never null; the pointer stays valid).
std::string_view dtype_name(DType t) noexcept;

// Case-insensitive lookup by name ("q8_0", "BF16").
std::optional<DType> dtype_from_name(std::string_view name) noexcept;

// Bytes of `n_elements` elements laid out as one row (row_extra_bytes included); nullopt when
// n_elements is not a multiple of the block size or the size overflows.
std::optional<uint64_t> dtype_row_bytes(DType t, uint64_t n_elements) noexcept;

}  // namespace infer
