// The CPU's table of element types: for each type it computes with, how a row turns into F32
// and back, which type the activations take to meet its rows in a matmul (ggml's vec_dot_type),
// and its kernels per ISA. Every choice CPU code makes by DType is one lookup here, made once per
// row or per matmul call, never per element; a new weight type is one entry plus its kernels.
// (Name, block size and bytes are the storage traits of core/dtype.hpp.)
//
//  type        to_float    from_float         from_float_activation   vec_dot_type  dot       gemm
//  F32         copy        copy               copy                    F32           dot.hpp   -
//  F16, BF16   ref, avx2   round              round                   itself        ref, avx2 avx2**,
//                                                                                             avx512*
//  Q8_0        ref, avx2   llama-quantize     ggml-cpu quantize_row   Q8_0          ref, avx2 avx2**,
//                                                                                             avx512*
//  Q4_0        ref, avx2   llama-quantize     -                       Q8_0          ref, avx2 avx2**,
//                                                                                             avx512*
//  Q5_0        ref, avx2   llama-quantize     -                       Q8_0          ref, avx2 avx2**,
//                                                                                             avx512*
//  Q4_1        ref, avx2   llama-quantize     -                       Q8_1          ref, avx2 avx2**,
//                                                                                             avx512*
//  Q5_1        ref, avx2   llama-quantize     -                       Q8_1          ref, avx2 avx2**,
//                                                                                             avx512*
//  Q2_K-Q6_K   ref, avx2   llama-quantize     -                       Q8_K          ref, avx2 avx2**,
//                                                                                             avx512*
//  Q8_1, Q8_K  -           -                  ggml-cpu quantize_row   -             -         -
//  I8_ROW      ref         per-channel        per-token (int8_rows)   I8_ROW        ref, avx2 avx512
//                                                                                   avx512
//  F8E4M3_ROW  ref         per-channel        copy                    F32           ref, avx2 -
//  F8E4M3_TENSOR                                                                    avx512
//  F8E4M3_W8A8 ref         per-channel        -                       F8E4M3_ACT    ref, avx2 -
//                                                                                   avx512
//  F8E4M3_ACT  -           -                  per-token (fp8_rows)    -             -         -
//  I4_G32      ref         group search       copy                    F32           ref, avx2 -
//  I4_G64,                 (int4_groups)                                            avx512
//  I4_G128
//  I8_G32      ref         max / 127 per group copy                    F32           ref, avx2 -
//  I8_G64,                 (int8_groups)                                            avx512
//  I8_G128
//
// (*: repacked at load into the gemm kernel's layout where the CPU has AVX-512. **: and where it
// has AVX2 only, into the same layout (kernels/cpu/qgemm_layouts.hpp; F16 and BF16:
// qgemm_half_impl.hpp), which AVX2 kernels read (load_packing_avx2); the other AVX2 tiles pack per
// call. The quantized types have AVX-VNNI variants of their AVX2 kernels too.)
//
// from_float writes what llama-quantize writes (reference quantizers, no importance matrix: load-
// time conversion, model files); from_float_activation converts activation rows as llama.cpp's
// CPU backend does before a mul_mat, which rounds differently (quant/quantize_activations.hpp).
#pragma once

#include <cstdint>
#include <span>

#include "core/cpu_features.hpp"
#include "core/dtype.hpp"
#include "core/tensor.hpp"
#include "kernels/cpu/qdot.hpp"
#include "kernels/cpu/qgemm.hpp"

namespace infer {

// A row of n elements (n a multiple of the type's block size) to n floats, and back.
using RowToFloat = void (*)(const void* src, float* dst, int64_t n) noexcept;
using RowFromFloat = void (*)(const float* src, void* dst, int64_t n) noexcept;

struct CpuTypeTraits {
  DType type;
  RowToFloat to_float_ref;               // scalar reference; nullptr: not a weight type (Q8_1, Q8_K)
  RowToFloat to_float_avx2;              // bit-identical to to_float_ref
  RowFromFloat from_float;               // llama-quantize's rows; nullptr: not a conversion target
  RowFromFloat from_float_activation;    // nullptr: never an activation type
  DType vec_dot_type;                    // the activations' type in a matmul with rows of this type
  QDotFn dot_ref;                        // nullptr for F32 (kernels/cpu/dot.hpp) and Q8_1, Q8_K
  QDotFn dot_avx2;                       // bit-identical to dot_ref
  QDotFn dot_avx512 = nullptr;           // bit-identical to dot_ref; nullptr: dot_avx2 serves AVX-512
  QDotRowsFn dot_rows_avx2 = nullptr;    // several weight rows against one activation row (decode)
  QDotRowsFn dot_rows_avx512 = nullptr;
  const QGemmKernel* gemm_avx2;          // tiled kernels (kernels/cpu/qgemm.hpp), nullptr: none
  const QGemmKernel* gemm_avx512;
  // The tiled kernel whose layout the CPU backend repacks this type's weights into at load
  // (Layout::cpu_packed, on CPUs with that kernel's ISA: AVX-512); nullptr: read in place.
  const QGemmKernel* load_packing;
  // The AVX2 kernel over the same layout (kernels/cpu/qgemm_layouts.hpp: every quantized type;
  // qgemm_half_impl.hpp: F16, BF16), which packs on CPUs with AVX2 but not AVX-512 and multiplies
  // a packed weight below AVX-512; nullptr: below AVX-512 the type stays in its file's layout.
  const QGemmKernel* load_packing_avx2 = nullptr;
  // With AVX-VNNI (CpuIsa::avxvnni only): kernels over the same layouts as load_packing_avx2 and
  // gemm_avx2; nullptr: those serve.
  const QGemmKernel* load_packing_avxvnni = nullptr;
  const QGemmKernel* gemm_avxvnni = nullptr;

  // The kernel that packs and multiplies this type's weights at load on an ISA, or nullptr.
  const QGemmKernel* load_packing_for(CpuIsa isa) const noexcept {
    if (isa >= CpuIsa::avx512) return load_packing;
    if (isa == CpuIsa::avxvnni && load_packing_avxvnni) return load_packing_avxvnni;
    return isa >= CpuIsa::avx2 ? load_packing_avx2 : nullptr;
  }

  // The variants for an ISA (the scalar one below AVX2).
  RowToFloat to_float(CpuIsa isa) const noexcept { return isa >= CpuIsa::avx2 ? to_float_avx2 : to_float_ref; }
  QDotFn dot(CpuIsa isa) const noexcept {
    if (isa >= CpuIsa::avx512 && dot_avx512) return dot_avx512;
    return isa >= CpuIsa::avx2 ? dot_avx2 : dot_ref;
  }
  // The several-rows kernel for an ISA, or nullptr.
  QDotRowsFn dot_rows(CpuIsa isa) const noexcept {
    if (isa >= CpuIsa::avx512 && dot_rows_avx512) return dot_rows_avx512;
    return isa >= CpuIsa::avx2 ? dot_rows_avx2 : nullptr;
  }
  // The best tiled kernel the ISA runs (an AVX-512 one where the type has it, else AVX-VNNI's or
  // AVX2's), or nullptr.
  const QGemmKernel* gemm(CpuIsa isa) const noexcept {
    if (isa >= CpuIsa::avx512 && gemm_avx512) return gemm_avx512;
    if (isa == CpuIsa::avxvnni && gemm_avxvnni) return gemm_avxvnni;
    return isa >= CpuIsa::avx2 ? gemm_avx2 : nullptr;
  }
  const DTypeTraits& storage() const noexcept { return *dtype_traits(type); }
};

// The entry of a type, or nullptr for a type the CPU does not compute with.
const CpuTypeTraits* cpu_type_traits(DType t) noexcept;
// Every entry, in DType id order.
std::span<const CpuTypeTraits> all_cpu_types() noexcept;

// Shorthands over the table.

// A type whose rows the CPU turns into floats: exactly the types core/dtype.hpp marks computable.
bool can_dequantize(DType t) noexcept;
// One row to floats with the variant for active_isa() (or the scalar reference). Preconditions,
// asserted: can_dequantize(t); n >= 0 a multiple of t's block size; src holds the row, dst n floats.
void dequantize_row(DType t, const void* src, float* dst, int64_t n) noexcept;
void dequantize_row_ref(DType t, const void* src, float* dst, int64_t n) noexcept;
// ggml's vec_dot_type of a weight type. Precondition: can_dequantize(weight).
DType activation_type(DType weight) noexcept;
// An F32 activation row converted to `type` (Q8_0, Q8_1, Q8_K, F16, BF16; F32 is copied), as
// quant/quantize_activations.hpp states. Precondition: type is some weight type's activation_type.
void prepare_activations(DType type, const float* x, void* dst, int64_t n) noexcept;
// The dot kernel of a weight type for an ISA. Precondition: can_dequantize(weight), weight != F32.
QDotFn qdot_kernel(DType weight, CpuIsa isa) noexcept;


// Weights repacked at load (Layout::cpu_packed; the CPU backend does it, backend/backend.hpp).
// The kernel that packs weight w for the active ISA, or nullptr when w stays as it is (not a
// row-layout 2-D matrix of a type with a load-packing kernel for that ISA).
const QGemmKernel* load_packing_for(const TensorView& w) noexcept;
// Bytes of w packed by k: one packed group per group_rows rows, the last one padded.
int64_t packed_weight_bytes(const QGemmKernel& k, const TensorView& w) noexcept;
// Packs groups [g0, g1) of w into dst (packed_weight_bytes(k, w) bytes; groups are independent,
// so threads may pack disjoint ranges).
void pack_weight_groups(const QGemmKernel& k, const TensorView& w, int64_t g0, int64_t g1, void* dst) noexcept;
// Row o of a packed weight, restored into `row` (w.row_bytes() bytes) in its type's block
// layout, byte for byte as in the file. Precondition: w.layout == Layout::cpu_packed.
void unpack_row(const TensorView& w, int64_t o, void* row) noexcept;

}  // namespace infer
