#include "kernels/cpu/dtype_traits.hpp"

#include <algorithm>
#include <array>
#include <cassert>
#include <iterator>

#include "quant/dequantize.hpp"
#include "quant/fp8_rows.hpp"
#include "quant/int4_groups.hpp"
#include "quant/int8_groups.hpp"
#include "quant/int8_rows.hpp"
#include "quant/quantize.hpp"
#include "quant/quantize_activations.hpp"

namespace infer {
namespace {

// In DType id order (all_cpu_types() promises it; tests/unit/test_dtype_traits.cpp checks it).
// Members left out are nullptr.
constexpr CpuTypeTraits kTable[] = {
    {.type = DType::f32, .to_float_ref = dequantize_f32, .to_float_avx2 = dequantize_f32,
     .from_float = copy_activations_f32, .from_float_activation = copy_activations_f32, .vec_dot_type = DType::f32},
    {.type = DType::f16, .to_float_ref = dequantize_f16_ref, .to_float_avx2 = dequantize_f16_avx2,
     .from_float = round_activations_f16, .from_float_activation = round_activations_f16, .vec_dot_type = DType::f16,
     .dot_ref = qdot_f16_ref, .dot_avx2 = qdot_f16_avx2, .dot_rows_avx2 = qdot_rows_f16_avx2, .gemm_avx2 = &qgemm_f16_avx2,
     .gemm_avx512 = &qgemm_f16_avx512, .load_packing = &qgemm_f16_pairs_avx512,
     .load_packing_avx2 = &qgemm_f16_pairs_avx2},
    {.type = DType::q4_0, .to_float_ref = dequantize_q4_0_ref, .to_float_avx2 = dequantize_q4_0_avx2,
     .from_float = quantize_row_q4_0_ref, .vec_dot_type = DType::q8_0, .dot_ref = qdot_q4_0_ref,
     .dot_avx2 = qdot_q4_0_avx2, .dot_rows_avx2 = qdot_rows_q4_0_avx2, .gemm_avx2 = &qgemm_q4_0_avx2,
     .gemm_avx512 = &qgemm_q4_0_avx512, .load_packing = &qgemm_q4_0_avx512, .load_packing_avx2 = &qgemm_q4_0_avx2,
     .load_packing_avxvnni = &qgemm_q4_0_avxvnni, .gemm_avxvnni = &qgemm_q4_0_avxvnni},
    {.type = DType::q4_1, .to_float_ref = dequantize_q4_1_ref, .to_float_avx2 = dequantize_q4_1_avx2,
     .from_float = quantize_row_q4_1_ref, .vec_dot_type = DType::q8_1, .dot_ref = qdot_q4_1_ref, .dot_avx2 = qdot_q4_1_avx2,
     .dot_rows_avx2 = qdot_rows_q4_1_avx2, .dot_rows_avx512 = qdot_rows_q4_1_avx512,
     .gemm_avx2 = &qgemm_q4_1_avx2, .gemm_avx512 = &qgemm_q4_1_avx512, .load_packing = &qgemm_q4_1_lanes_avx512,
     .load_packing_avx2 = &qgemm_q4_1_loaded_avx2,
     .load_packing_avxvnni = &qgemm_q4_1_loaded_avxvnni, .gemm_avxvnni = &qgemm_q4_1_avxvnni},
    {.type = DType::q5_0, .to_float_ref = dequantize_q5_0_ref, .to_float_avx2 = dequantize_q5_0_avx2,
     .from_float = quantize_row_q5_0_ref, .vec_dot_type = DType::q8_0, .dot_ref = qdot_q5_0_ref, .dot_avx2 = qdot_q5_0_avx2,
     .dot_rows_avx2 = qdot_rows_q5_0_avx2, .dot_rows_avx512 = qdot_rows_q5_0_avx512,
     .gemm_avx2 = &qgemm_q5_0_avx2, .gemm_avx512 = &qgemm_q5_0_avx512, .load_packing = &qgemm_q5_0_lanes_avx512,
     .load_packing_avx2 = &qgemm_q5_0_loaded_avx2,
     .load_packing_avxvnni = &qgemm_q5_0_loaded_avxvnni, .gemm_avxvnni = &qgemm_q5_0_avxvnni},
    {.type = DType::q5_1, .to_float_ref = dequantize_q5_1_ref, .to_float_avx2 = dequantize_q5_1_avx2,
     .from_float = quantize_row_q5_1_ref, .vec_dot_type = DType::q8_1, .dot_ref = qdot_q5_1_ref, .dot_avx2 = qdot_q5_1_avx2,
     .dot_rows_avx2 = qdot_rows_q5_1_avx2, .dot_rows_avx512 = qdot_rows_q5_1_avx512,
     .gemm_avx2 = &qgemm_q5_1_avx2, .gemm_avx512 = &qgemm_q5_1_avx512, .load_packing = &qgemm_q5_1_lanes_avx512,
     .load_packing_avx2 = &qgemm_q5_1_loaded_avx2,
     .load_packing_avxvnni = &qgemm_q5_1_loaded_avxvnni, .gemm_avxvnni = &qgemm_q5_1_avxvnni},
    {.type = DType::q8_0, .to_float_ref = dequantize_q8_0_ref, .to_float_avx2 = dequantize_q8_0_avx2,
     .from_float = quantize_row_q8_0_ref, .from_float_activation = quantize_activations_q8_0,
     .vec_dot_type = DType::q8_0, .dot_ref = qdot_q8_0_ref, .dot_avx2 = qdot_q8_0_avx2, .dot_rows_avx2 = qdot_rows_q8_0_avx2,
     .dot_rows_avx512 = qdot_rows_q8_0_avx512, .gemm_avx2 = &qgemm_q8_0_avx2, .gemm_avx512 = &qgemm_q8_0_avx512,
     .load_packing = &qgemm_q8_0_lanes_avx512, .load_packing_avx2 = &qgemm_q8_0_loaded_avx2,
     .load_packing_avxvnni = &qgemm_q8_0_loaded_avxvnni, .gemm_avxvnni = &qgemm_q8_0_avxvnni},
    {.type = DType::q8_1, .from_float_activation = quantize_activations_q8_1, .vec_dot_type = DType::q8_1},
    {.type = DType::q2_k, .to_float_ref = dequantize_q2_k_ref, .to_float_avx2 = dequantize_q2_k_avx2,
     .from_float = quantize_row_q2_k_ref, .vec_dot_type = DType::q8_k, .dot_ref = qdot_q2_k_ref, .dot_avx2 = qdot_q2_k_avx2,
     .gemm_avx2 = &qgemm_q2_k_avx2, .gemm_avx512 = &qgemm_q2_k_avx512, .load_packing = &qgemm_q2_k_avx512,
     .load_packing_avx2 = &qgemm_q2_k_loaded_avx2,
     .load_packing_avxvnni = &qgemm_q2_k_loaded_avxvnni, .gemm_avxvnni = &qgemm_q2_k_avxvnni},
    {.type = DType::q3_k, .to_float_ref = dequantize_q3_k_ref, .to_float_avx2 = dequantize_q3_k_avx2,
     .from_float = quantize_row_q3_k_ref, .vec_dot_type = DType::q8_k, .dot_ref = qdot_q3_k_ref, .dot_avx2 = qdot_q3_k_avx2,
     .gemm_avx2 = &qgemm_q3_k_avx2, .gemm_avx512 = &qgemm_q3_k_avx512, .load_packing = &qgemm_q3_k_avx512,
     .load_packing_avx2 = &qgemm_q3_k_loaded_avx2,
     .load_packing_avxvnni = &qgemm_q3_k_loaded_avxvnni, .gemm_avxvnni = &qgemm_q3_k_avxvnni},
    {.type = DType::q4_k, .to_float_ref = dequantize_q4_k_ref, .to_float_avx2 = dequantize_q4_k_avx2,
     .from_float = quantize_row_q4_k_ref, .vec_dot_type = DType::q8_k, .dot_ref = qdot_q4_k_ref, .dot_avx2 = qdot_q4_k_avx2,
     .gemm_avx2 = &qgemm_q4_k_avx2, .gemm_avx512 = &qgemm_q4_k_avx512, .load_packing = &qgemm_q4_k_avx512,
     .load_packing_avx2 = &qgemm_q4_k_loaded_avx2,
     .load_packing_avxvnni = &qgemm_q4_k_loaded_avxvnni, .gemm_avxvnni = &qgemm_q4_k_avxvnni},
    {.type = DType::q5_k, .to_float_ref = dequantize_q5_k_ref, .to_float_avx2 = dequantize_q5_k_avx2,
     .from_float = quantize_row_q5_k_ref, .vec_dot_type = DType::q8_k, .dot_ref = qdot_q5_k_ref, .dot_avx2 = qdot_q5_k_avx2,
     .gemm_avx2 = &qgemm_q5_k_avx2, .gemm_avx512 = &qgemm_q5_k_avx512, .load_packing = &qgemm_q5_k_avx512,
     .load_packing_avx2 = &qgemm_q5_k_loaded_avx2,
     .load_packing_avxvnni = &qgemm_q5_k_loaded_avxvnni, .gemm_avxvnni = &qgemm_q5_k_avxvnni},
    {.type = DType::q6_k, .to_float_ref = dequantize_q6_k_ref, .to_float_avx2 = dequantize_q6_k_avx2,
     .from_float = quantize_row_q6_k_ref, .vec_dot_type = DType::q8_k, .dot_ref = qdot_q6_k_ref, .dot_avx2 = qdot_q6_k_avx2,
     .gemm_avx2 = &qgemm_q6_k_avx2, .gemm_avx512 = &qgemm_q6_k_avx512, .load_packing = &qgemm_q6_k_avx512,
     .load_packing_avx2 = &qgemm_q6_k_loaded_avx2,
     .load_packing_avxvnni = &qgemm_q6_k_loaded_avxvnni, .gemm_avxvnni = &qgemm_q6_k_avxvnni},
    {.type = DType::q8_k, .from_float_activation = quantize_activations_q8_k, .vec_dot_type = DType::q8_k},
    {.type = DType::bf16, .to_float_ref = dequantize_bf16_ref, .to_float_avx2 = dequantize_bf16_avx2,
     .from_float = round_activations_bf16, .from_float_activation = round_activations_bf16,
     .vec_dot_type = DType::bf16, .dot_ref = qdot_bf16_ref, .dot_avx2 = qdot_bf16_avx2,
     .dot_rows_avx2 = qdot_rows_bf16_avx2, .gemm_avx2 = &qgemm_bf16_avx2,
     .gemm_avx512 = &qgemm_bf16_avx512, .load_packing = &qgemm_bf16_pairs_avx512,
     .load_packing_avx2 = &qgemm_bf16_pairs_avx2},
    {.type = DType::i8_row, .to_float_ref = dequantize_i8_row, .to_float_avx2 = dequantize_i8_row,
     .from_float = quantize_row_i8_row, .from_float_activation = quantize_activations_i8_row,
     .vec_dot_type = DType::i8_row, .dot_ref = qdot_i8_row_ref, .dot_avx2 = qdot_i8_row_avx2,
     .dot_avx512 = qdot_i8_row_avx512, .gemm_avx512 = &qgemm_i8_row_avx512},
    // A lone row's from_float is its own tensor: the per-matrix scale is the WeightBinder's.
    {.type = DType::f8_row, .to_float_ref = dequantize_f8_row, .to_float_avx2 = dequantize_f8_row,
     .from_float = quantize_row_f8_row, .vec_dot_type = DType::f32, .dot_ref = qdot_f8_row_ref,
     .dot_avx2 = qdot_f8_row_avx2, .dot_avx512 = qdot_f8_row_avx512,
     .gemm_avx512 = &qgemm_f8_row_avx512},
    {.type = DType::f8_tensor, .to_float_ref = dequantize_f8_row, .to_float_avx2 = dequantize_f8_row,
     .from_float = quantize_row_f8_row, .vec_dot_type = DType::f32, .dot_ref = qdot_f8_row_ref,
     .dot_avx2 = qdot_f8_row_avx2, .dot_avx512 = qdot_f8_row_avx512,
     .gemm_avx512 = &qgemm_f8_row_avx512},
    {.type = DType::i4_g32, .to_float_ref = dequantize_i4_g32, .to_float_avx2 = dequantize_i4_g32,
     .from_float = quantize_row_i4_g32, .vec_dot_type = DType::f32, .dot_ref = qdot_i4_g32_ref,
     .dot_avx2 = qdot_i4_g32_avx2, .dot_avx512 = qdot_i4_g32_avx512,
     .gemm_avx512 = &qgemm_i4_g32_avx512},
    {.type = DType::i4_g64, .to_float_ref = dequantize_i4_g64, .to_float_avx2 = dequantize_i4_g64,
     .from_float = quantize_row_i4_g64, .vec_dot_type = DType::f32, .dot_ref = qdot_i4_g64_ref,
     .dot_avx2 = qdot_i4_g64_avx2, .dot_avx512 = qdot_i4_g64_avx512,
     .gemm_avx512 = &qgemm_i4_g64_avx512},
    {.type = DType::i4_g128, .to_float_ref = dequantize_i4_g128, .to_float_avx2 = dequantize_i4_g128,
     .from_float = quantize_row_i4_g128, .vec_dot_type = DType::f32, .dot_ref = qdot_i4_g128_ref,
     .dot_avx2 = qdot_i4_g128_avx2, .dot_avx512 = qdot_i4_g128_avx512,
     .gemm_avx512 = &qgemm_i4_g128_avx512},
    {.type = DType::f8_w8a8, .to_float_ref = dequantize_f8_row, .to_float_avx2 = dequantize_f8_row,
     .from_float = quantize_row_f8_row, .vec_dot_type = DType::f8_act, .dot_ref = qdot_f8_w8a8_ref,
     .dot_avx2 = qdot_f8_w8a8_avx2, .dot_avx512 = qdot_f8_w8a8_avx512,
     .gemm_avx512 = &qgemm_f8_w8a8_avx512},
    {.type = DType::f8_act, .from_float_activation = quantize_activations_f8},
    {.type = DType::i8_w8a16, .to_float_ref = dequantize_i8_row, .to_float_avx2 = dequantize_i8_row,
     .from_float = quantize_row_i8_row, .vec_dot_type = DType::f32, .dot_ref = qdot_i8_w8a16_ref,
     .dot_avx2 = qdot_i8_w8a16_avx2, .dot_avx512 = qdot_i8_w8a16_avx512,
     .gemm_avx512 = &qgemm_i8_w8a16_avx512},
    {.type = DType::i8_g32, .to_float_ref = dequantize_i8_g32, .to_float_avx2 = dequantize_i8_g32,
     .from_float = quantize_row_i8_g32, .vec_dot_type = DType::f32, .dot_ref = qdot_i8_g32_ref,
     .dot_avx2 = qdot_i8_g32_avx2, .dot_avx512 = qdot_i8_g32_avx512,
     .gemm_avx512 = &qgemm_i8_g32_avx512},
    {.type = DType::i8_g64, .to_float_ref = dequantize_i8_g64, .to_float_avx2 = dequantize_i8_g64,
     .from_float = quantize_row_i8_g64, .vec_dot_type = DType::f32, .dot_ref = qdot_i8_g64_ref,
     .dot_avx2 = qdot_i8_g64_avx2, .dot_avx512 = qdot_i8_g64_avx512,
     .gemm_avx512 = &qgemm_i8_g64_avx512},
    {.type = DType::i8_g128, .to_float_ref = dequantize_i8_g128, .to_float_avx2 = dequantize_i8_g128,
     .from_float = quantize_row_i8_g128, .vec_dot_type = DType::f32, .dot_ref = qdot_i8_g128_ref,
     .dot_avx2 = qdot_i8_g128_avx2, .dot_avx512 = qdot_i8_g128_avx512,
     .gemm_avx512 = &qgemm_i8_g128_avx512},
};

constexpr std::array<int8_t, kMaxDTypeId + 1> make_index() {
  std::array<int8_t, kMaxDTypeId + 1> index{};
  for (auto& i : index) i = -1;
  for (size_t i = 0; i < std::size(kTable); ++i) index[static_cast<uint32_t>(kTable[i].type)] = static_cast<int8_t>(i);
  return index;
}
constexpr auto kIndex = make_index();

}  // namespace

const CpuTypeTraits* cpu_type_traits(DType t) noexcept {
  const auto id = static_cast<uint32_t>(t);
  if (id > kMaxDTypeId || kIndex[id] < 0) return nullptr;
  return &kTable[static_cast<size_t>(kIndex[id])];
}

std::span<const CpuTypeTraits> all_cpu_types() noexcept { return kTable; }

bool can_dequantize(DType t) noexcept {
  const CpuTypeTraits* e = cpu_type_traits(t);
  return e && e->to_float_ref;
}

void dequantize_row(DType t, const void* src, float* dst, int64_t n) noexcept {
  assert(can_dequantize(t) && n >= 0 && n % dtype_traits(t)->block_size == 0);
  // active_isa() is one relaxed atomic load; reading it per call keeps set_active_isa() effective.
  cpu_type_traits(t)->to_float(active_isa())(src, dst, n);
}

void dequantize_row_ref(DType t, const void* src, float* dst, int64_t n) noexcept {
  assert(can_dequantize(t) && n >= 0 && n % dtype_traits(t)->block_size == 0);
  cpu_type_traits(t)->to_float_ref(src, dst, n);
}

DType activation_type(DType weight) noexcept {
  assert(can_dequantize(weight));
  return cpu_type_traits(weight)->vec_dot_type;
}

void prepare_activations(DType type, const float* x, void* dst, int64_t n) noexcept {
  const CpuTypeTraits* e = cpu_type_traits(type);
  assert(e && e->from_float_activation && "not an activation type");
  e->from_float_activation(x, dst, n);
}

QDotFn qdot_kernel(DType weight, CpuIsa isa) noexcept {
  const CpuTypeTraits* e = cpu_type_traits(weight);
  assert(e && e->dot_ref && "no quantized dot for this type");
  return e->dot(isa);
}

const QGemmKernel* load_packing_for(const TensorView& w) noexcept {
  if (w.layout != Layout::rows || w.device != Device::cpu || w.n_dims != 2) return nullptr;
  const CpuTypeTraits* e = cpu_type_traits(w.dtype);
  return e ? e->load_packing_for(active_isa()) : nullptr;
}

int64_t packed_weight_bytes(const QGemmKernel& k, const TensorView& w) noexcept {
  return (w.shape[1] + k.group_rows - 1) / k.group_rows * k.packed_bytes(w.shape[0]);
}

void pack_weight_groups(const QGemmKernel& k, const TensorView& w, int64_t g0, int64_t g1, void* dst) noexcept {
  const int64_t n_in = w.shape[0], n_out = w.shape[1], group_bytes = k.packed_bytes(n_in);
  for (int64_t g = g0; g < g1; ++g) {
    const int64_t o0 = g * k.group_rows;
    k.pack(w.row(o0), static_cast<int64_t>(w.row_bytes()), std::min(k.group_rows, n_out - o0), n_in,
           static_cast<uint8_t*>(dst) + g * group_bytes);
  }
}

void unpack_row(const TensorView& w, int64_t o, void* row) noexcept {
  assert(w.layout == Layout::cpu_packed);
  // Every load-packing kernel of a type shares its layout: unpack with one this CPU runs.
  const QGemmKernel& k = *cpu_type_traits(w.dtype)->load_packing_for(detected_isa());
  const int64_t n_in = w.shape[0];
  k.unpack(static_cast<const uint8_t*>(w.data) + o / k.group_rows * k.packed_bytes(n_in), o % k.group_rows, n_in, row);
}

}  // namespace infer
