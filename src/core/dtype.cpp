#include "core/dtype.hpp"

#include <array>
#include <cctype>
#include <cstdio>

#include "core/checked_math.hpp"

namespace infer {
namespace {

// Block layouts follow ggml-common.h (the GGUF format's definition of each type).
// Sizes worked out per type: e.g. Q4_K = 2 half scales (4) + 12 packed 6-bit scales + 128 nibbles.
constexpr std::array kTraits{
    DTypeTraits{DType::f32, "F32", 1, 4, false, true},
    DTypeTraits{DType::f16, "F16", 1, 2, false, true},
    DTypeTraits{DType::q4_0, "Q4_0", 32, 18, true, true},
    DTypeTraits{DType::q4_1, "Q4_1", 32, 20, true, true},
    DTypeTraits{DType::q5_0, "Q5_0", 32, 22, true, true},
    DTypeTraits{DType::q5_1, "Q5_1", 32, 24, true, true},
    DTypeTraits{DType::q8_0, "Q8_0", 32, 34, true, true},
    DTypeTraits{DType::q8_1, "Q8_1", 32, 36, true, false},
    DTypeTraits{DType::q2_k, "Q2_K", 256, 84, true, true},
    DTypeTraits{DType::q3_k, "Q3_K", 256, 110, true, true},
    DTypeTraits{DType::q4_k, "Q4_K", 256, 144, true, true},
    DTypeTraits{DType::q5_k, "Q5_K", 256, 176, true, true},
    DTypeTraits{DType::q6_k, "Q6_K", 256, 210, true, true},
    DTypeTraits{DType::q8_k, "Q8_K", 256, 292, true, false},
    DTypeTraits{DType::iq2_xxs, "IQ2_XXS", 256, 66, true, false},
    DTypeTraits{DType::iq2_xs, "IQ2_XS", 256, 74, true, false},
    DTypeTraits{DType::iq3_xxs, "IQ3_XXS", 256, 98, true, false},
    DTypeTraits{DType::iq1_s, "IQ1_S", 256, 50, true, false},
    DTypeTraits{DType::iq4_nl, "IQ4_NL", 32, 18, true, false},
    DTypeTraits{DType::iq3_s, "IQ3_S", 256, 110, true, false},
    DTypeTraits{DType::iq2_s, "IQ2_S", 256, 82, true, false},
    DTypeTraits{DType::iq4_xs, "IQ4_XS", 256, 136, true, false},
    DTypeTraits{DType::i8, "I8", 1, 1, false, false},
    DTypeTraits{DType::i16, "I16", 1, 2, false, false},
    DTypeTraits{DType::i32, "I32", 1, 4, false, false},
    DTypeTraits{DType::i64, "I64", 1, 8, false, false},
    DTypeTraits{DType::f64, "F64", 1, 8, false, false},
    DTypeTraits{DType::iq1_m, "IQ1_M", 256, 56, true, false},
    DTypeTraits{DType::bf16, "BF16", 1, 2, false, true},
    DTypeTraits{DType::tq1_0, "TQ1_0", 256, 54, true, false},
    DTypeTraits{DType::tq2_0, "TQ2_0", 256, 66, true, false},
    DTypeTraits{DType::mxfp4, "MXFP4", 32, 17, true, false},
    DTypeTraits{DType::nvfp4, "NVFP4", 64, 36, true, false},
    DTypeTraits{DType::q1_0, "Q1_0", 128, 18, true, false},
    DTypeTraits{DType::q2_0, "Q2_0", 64, 18, true, false},
    // Row: n int8 quants, then f32 scale and int32 Σ quants (quant/int8_rows.hpp).
    DTypeTraits{DType::i8_row, "I8_ROW", 32, 32, true, true, 8, true},
    // Row: n e4m3 codes, then f32 scale and 4 zero bytes (quant/fp8_rows.hpp).
    DTypeTraits{DType::f8_row, "F8E4M3_ROW", 32, 32, true, true, 8, true},
    DTypeTraits{DType::f8_tensor, "F8E4M3_TENSOR", 32, 32, true, true, 8, true},
    // One e4m3fn code per element, no scale: the KV cache's fp8 type (read by attention only).
    DTypeTraits{DType::f8_e4m3, "F8_E4M3", 1, 1, false, false, 0, true},
    // Blocks of one group: f32 scale, f32 zero point, G / 2 bytes of codes (quant/int4_groups.hpp).
    DTypeTraits{DType::i4_g32, "I4_G32", 32, 24, true, true, 0, true},
    DTypeTraits{DType::i4_g64, "I4_G64", 64, 40, true, true, 0, true},
    DTypeTraits{DType::i4_g128, "I4_G128", 128, 72, true, true, 0, true},
    // compressed-tensors' weight_packed: 8 signed 4-bit values per little-endian int32, stored as v + 8.
    DTypeTraits{DType::i4_packed, "I4_PACKED", 8, 4, true, false, 0, true},
    // f8_row's rows, multiplied by FP8 activation rows; those: n decoded e4m3 values as f32, then
    // the f32 scale and 4 zero bytes (quant/fp8_rows.hpp).
    DTypeTraits{DType::f8_w8a8, "F8E4M3_W8A8", 32, 32, true, true, 8, true},
    DTypeTraits{DType::f8_act, "F8E4M3_ACT", 32, 128, true, false, 8, true},
    // i8_row's rows, multiplied by F32 activation rows (quant/int8_rows.hpp).
    DTypeTraits{DType::i8_w8a16, "I8_W8A16", 32, 32, true, true, 8, true},
    // Blocks of one group: f32 scale, G int8 codes (quant/int8_groups.hpp).
    DTypeTraits{DType::i8_g32, "I8_G32", 32, 36, true, true, 0, true},
    DTypeTraits{DType::i8_g64, "I8_G64", 64, 68, true, true, 0, true},
    DTypeTraits{DType::i8_g128, "I8_G128", 128, 132, true, true, 0, true},
};

constexpr std::array<int16_t, kMaxDTypeId + 1> make_index() {
  std::array<int16_t, kMaxDTypeId + 1> index{};
  for (auto& i : index) i = -1;
  for (size_t i = 0; i < kTraits.size(); ++i) index[static_cast<uint32_t>(kTraits[i].type)] = static_cast<int16_t>(i);
  return index;
}
constexpr auto kIndex = make_index();

}  // namespace

const DTypeTraits* dtype_traits(uint32_t id) noexcept {
  if (id > kMaxDTypeId || kIndex[id] < 0) return nullptr;
  return &kTraits[static_cast<size_t>(kIndex[id])];
}

std::span<const DTypeTraits> all_dtypes() noexcept { return kTraits; }

std::string_view dtype_name(DType t) noexcept {
  if (const auto* tr = dtype_traits(t)) return tr->name;
  // Unknown ids only come from files, which are rejected before a DType escapes the reader;
  // still, never return garbage.
  static thread_local char buf[24];
  std::snprintf(buf, sizeof buf, "type#%u", static_cast<unsigned>(t));
  return buf;
}

std::optional<DType> dtype_from_name(std::string_view name) noexcept {
  for (const auto& t : kTraits) {
    std::string_view n = t.name;
    if (n.size() != name.size()) continue;
    bool same = true;
    for (size_t i = 0; i < n.size() && same; ++i)
      same = std::toupper(static_cast<unsigned char>(name[i])) == n[i];
    if (same) return t.type;
  }
  return std::nullopt;
}

std::optional<uint64_t> dtype_row_bytes(DType t, uint64_t n_elements) noexcept {
  const auto* tr = dtype_traits(t);
  if (!tr || n_elements % tr->block_size != 0) return std::nullopt;
  const auto blocks = checked_mul(n_elements / tr->block_size, tr->block_bytes);
  if (!blocks) return std::nullopt;
  return checked_add(*blocks, uint64_t{tr->row_extra_bytes});
}

}  // namespace infer
