// Tiled products for the batched matmul: a group of weight rows times many activation rows at
// once, where the per-row dots of kernels/cpu/qdot.hpp would unpack (or convert) each weight block
// again for every activation row and sum each block's products horizontally.
//
// Every result is bit-identical to the scalar qdot kernel's for the same weight row and activation
// row: integer sums are exact however they are grouped (VNNI dpbusd is not saturating), F16 and
// BF16 values convert to F32 exactly, and each (weight row, activation row) pair runs the float
// steps qdot.hpp lists for its weight type, in the same order, fused where the reference calls
// std::fma. A result therefore never depends on which other rows share its tile, nor on how many
// activation rows the call has (batch invariance).
//
// Use (kernels/cpu/matmul.cpp):
//   1. each activation row is converted as usual (to Q8_0 for the 8-bit-activation types, to
//      F16 / BF16 for those weights), and prepare_side() derives data from it once (scales as
//      floats, quant sums; for F16 / BF16 the row as F32);
//   2. per group of group_rows weight rows, the packed group: packed at load by the CPU backend
//      (backend/backend.hpp; the weight's Layout::cpu_packed, groups of packed_bytes(n) one after
//      another) or, for a weight in its file's layout, packed per call by pack() into thread-local
//      scratch; multiply() then writes the group's outputs for the activation rows it is given
//      (matmul.cpp hands them over in L2-sized chunks unless the kernel asks for whole_batch).
// A group the CPU backend packs at load takes exactly as many bytes as its rows do in the file
// (the same quants, the same F16 scales, transposed), so the packed weight replaces the mapped one
// at no cost in memory; unpack() restores any row, for the embedding and for the kernels of lower
// ISAs. Kernels that pack per call only may take more room in scratch: F16 / BF16 into F32 (twice
// the bytes), Q8_0 / Q5_0 / Q4_1 / Q5_1 with each pair's scales as floats, the AVX2 K-quant
// kernels with the quants decoded to bytes (2848 bytes per super-block of 8 rows) and the AVX2
// Q8_0 kernel widened to 16 bits; INT4 and FP8 copy the rows as they are.
#pragma once

#include <cstdint>

namespace infer {

struct QGemmKernel {
  int64_t min_rows;    // fewest activation rows for which packing per call beats the per-row qdot kernels
  int64_t group_rows;  // weight rows pack() takes at most (fewer in the last group)
  // Bytes of side data per activation row of n elements (a multiple of 64).
  int64_t (*side_bytes)(int64_t n) noexcept;
  // side <- per-block data of one converted activation row a (64-byte aligned side).
  void (*prepare_side)(const void* a, void* side, int64_t n) noexcept;
  // Bytes of one packed group for rows of n elements.
  int64_t (*packed_bytes)(int64_t n) noexcept;
  // packed (any alignment) <- weight rows 0..count-1 at w + j * w_stride bytes, 1 <= count <= group_rows.
  void (*pack)(const void* w, int64_t w_stride, int64_t count, int64_t n, void* packed) noexcept;
  // y[r * y_stride + j] = dot(weight row j, activation row r) for j < count, r < n_a; activation
  // row r at a + r * a_stride bytes, its side data at side + r * side_stride bytes. May throw
  // std::bad_alloc: some kernels grow a thread's scratch on first use (then reuse it), and a
  // failed allocation must reach the caller (the engine reports out of memory), not terminate.
  void (*multiply)(const void* packed, int64_t count, const void* a, int64_t a_stride, const void* side,
                   int64_t side_stride, int64_t n_a, int64_t n, float* y, int64_t y_stride);
  // row <- weight row j (< count) of a packed group, in the weight type's own block layout,
  // byte for byte as pack() read it. Present for the kernels a type names as its load_packing.
  void (*unpack)(const void* packed, int64_t j, int64_t n, void* row) noexcept;
  // multiply() blocks the activation rows itself and does per-call work on the group (the F16 /
  // BF16 kernels convert it to F32): the caller passes it all the rows at once. Otherwise the
  // caller (matmul.cpp) passes the rows in chunks that stay in L2 with a batch of groups.
  bool whole_batch = false;
  // For a weight the CPU backend packed at load into its type's layout (qgemm_layouts.hpp), which
  // another kernel reads in place: packed <- rows first..first+count-1 of that weight (at
  // `loaded`), as pack() gives them from the file's rows; nullptr: none. matmul.cpp takes this
  // kernel over the loaded layout's one from min_rows_loaded activation rows (the AVX2 K-quants,
  // whose per-call packing decodes every quant once for a whole batch).
  void (*pack_loaded)(const void* loaded, int64_t first, int64_t count, int64_t n, void* packed) noexcept = nullptr;
  int64_t min_rows_loaded = 0;
};

// The AVX-512 VNNI kernels for every quantized type (kernels/cpu/dtype_traits.hpp lists them per
// type): qgemm_avx512.cpp (32-element blocks) and qgemm_kquant_avx512.cpp (K-quants). Use only
// when the CPU has AVX-512 F, BW, VL, DQ and VNNI (CpuIsa::avx512).
extern const QGemmKernel qgemm_q4_0_avx512;
extern const QGemmKernel qgemm_q8_0_avx512;
// Q8_0 packed at load (16 rows in the lanes; the same bytes as the file's rows): every batch size.
extern const QGemmKernel qgemm_q8_0_lanes_avx512;
// Q5_0 packed at load (16 rows in the lanes, the fifth bits spread in the tile; the file's bytes).
extern const QGemmKernel qgemm_q5_0_lanes_avx512;
// Q4_1 and Q5_1 packed at load (the same lanes against Q8_1 rows, the mins chain in the lanes).
extern const QGemmKernel qgemm_q4_1_lanes_avx512;
extern const QGemmKernel qgemm_q5_1_lanes_avx512;
extern const QGemmKernel qgemm_q5_0_avx512;
extern const QGemmKernel qgemm_q4_1_avx512;
extern const QGemmKernel qgemm_q5_1_avx512;
extern const QGemmKernel qgemm_q2_k_avx512;
extern const QGemmKernel qgemm_q3_k_avx512;
extern const QGemmKernel qgemm_q4_k_avx512;
extern const QGemmKernel qgemm_q5_k_avx512;
extern const QGemmKernel qgemm_q6_k_avx512;
// INT8 rows (DType::i8_row) against INT8 per-token activations: qdot_int8_avx512.cpp.
extern const QGemmKernel qgemm_i8_row_avx512;
// INT4 groups (DType::i4_g32 / g64 / g128) against F32 activations: qdot_int4_avx512.cpp.
extern const QGemmKernel qgemm_i4_g32_avx512;
extern const QGemmKernel qgemm_i4_g64_avx512;
extern const QGemmKernel qgemm_i4_g128_avx512;
// INT8 groups (DType::i8_g32 / g64 / g128) against F32 activations: the same file.
extern const QGemmKernel qgemm_i8_g32_avx512;
extern const QGemmKernel qgemm_i8_g64_avx512;
extern const QGemmKernel qgemm_i8_g128_avx512;
// FP8 E4M3 rows (DType::f8_row, f8_tensor) against F32 activations, and W8A8-FP8 (f8_w8a8)
// against decoded FP8 activation rows: qdot_fp8_avx512.cpp.
extern const QGemmKernel qgemm_f8_row_avx512;
extern const QGemmKernel qgemm_f8_w8a8_avx512;
// INT8 rows against F32 activations (W8A16, DType::i8_w8a16): the same tiles, qdot_fp8_avx512.cpp.
extern const QGemmKernel qgemm_i8_w8a16_avx512;

// AVX2 kernels for quantized types, packed per call (for CPUs with AVX2, FMA and F16C):
// Q4_0 with 16 weight rows in two halves of 8 int32 lanes, in the layout packed at load
// (qgemm_avx2_impl.hpp, which also reads it in place); Q8_0, Q5_0, Q4_1 and Q5_1 with 2 x 4
// register tiles of 8-lane chains (qgemm_avx2_impl.hpp); the K-quants with 8 weight rows in the lanes and every
// quant decoded to a byte, from the file's rows or the loaded layout (qgemm_kquant_avx2_impl.hpp).
extern const QGemmKernel qgemm_q4_0_avx2;
extern const QGemmKernel qgemm_q8_0_avx2;
extern const QGemmKernel qgemm_q5_0_avx2;
extern const QGemmKernel qgemm_q4_1_avx2;
extern const QGemmKernel qgemm_q5_1_avx2;
extern const QGemmKernel qgemm_q2_k_avx2;
extern const QGemmKernel qgemm_q3_k_avx2;
extern const QGemmKernel qgemm_q4_k_avx2;
extern const QGemmKernel qgemm_q5_k_avx2;
extern const QGemmKernel qgemm_q6_k_avx2;

// AVX2 kernels for the K-quants over the layouts the CPU backend packs them into at load
// (qgemm_kquant_avx2_impl.hpp; the layouts in qgemm_layouts.hpp, shared with the AVX-512 kernels): a
// weight packed on either ISA runs on both. qgemm_q4_0_avx2 reads Q4_0's shared layout too.
extern const QGemmKernel qgemm_q2_k_loaded_avx2;
extern const QGemmKernel qgemm_q3_k_loaded_avx2;
extern const QGemmKernel qgemm_q4_k_loaded_avx2;
extern const QGemmKernel qgemm_q5_k_loaded_avx2;
extern const QGemmKernel qgemm_q6_k_loaded_avx2;
// Q8_0, Q4_1, Q5_0 and Q5_1 over their layouts packed at load (qgemm_avx2_impl.hpp): the chains
// in the lanes.
extern const QGemmKernel qgemm_q8_0_loaded_avx2;
extern const QGemmKernel qgemm_q4_1_loaded_avx2;
extern const QGemmKernel qgemm_q5_0_loaded_avx2;
extern const QGemmKernel qgemm_q5_1_loaded_avx2;

// The kernels of qgemm_avx2_impl.hpp compiled with AVX-VNNI too (qgemm_avxvnni.cpp), for
// CpuIsa::avxvnni: vpdpbusd multiplies the bytes (avx2_vnni.hpp); same layouts packed at load,
// same results.
extern const QGemmKernel qgemm_q4_0_avxvnni;
extern const QGemmKernel qgemm_q8_0_avxvnni;
extern const QGemmKernel qgemm_q5_0_avxvnni;
extern const QGemmKernel qgemm_q4_1_avxvnni;
extern const QGemmKernel qgemm_q5_1_avxvnni;
extern const QGemmKernel qgemm_q8_0_loaded_avxvnni;
extern const QGemmKernel qgemm_q4_1_loaded_avxvnni;
extern const QGemmKernel qgemm_q5_0_loaded_avxvnni;
extern const QGemmKernel qgemm_q5_1_loaded_avxvnni;
// And those of qgemm_kquant_avx2_impl.hpp (qgemm_kquant_avxvnni.cpp).
extern const QGemmKernel qgemm_q2_k_avxvnni;
extern const QGemmKernel qgemm_q3_k_avxvnni;
extern const QGemmKernel qgemm_q4_k_avxvnni;
extern const QGemmKernel qgemm_q5_k_avxvnni;
extern const QGemmKernel qgemm_q6_k_avxvnni;
extern const QGemmKernel qgemm_q2_k_loaded_avxvnni;
extern const QGemmKernel qgemm_q3_k_loaded_avxvnni;
extern const QGemmKernel qgemm_q4_k_loaded_avxvnni;
extern const QGemmKernel qgemm_q5_k_loaded_avxvnni;
extern const QGemmKernel qgemm_q6_k_loaded_avxvnni;

// F16 and BF16 weights: rows converted to F32 once per call, register tiles of 8-lane fma chains.
// The _avx2 ones need AVX2, FMA and F16C; the _avx512 ones CpuIsa::avx512.
extern const QGemmKernel qgemm_f16_avx2;
extern const QGemmKernel qgemm_bf16_avx2;
extern const QGemmKernel qgemm_f16_avx512;
extern const QGemmKernel qgemm_bf16_avx512;
// F16 and BF16 weights packed at load: rows interleaved by chunk, 4 at a time (qgemm_half_impl.hpp),
// one layout read by both ISAs' kernels.
extern const QGemmKernel qgemm_f16_pairs_avx512;
extern const QGemmKernel qgemm_bf16_pairs_avx512;
extern const QGemmKernel qgemm_f16_pairs_avx2;
extern const QGemmKernel qgemm_bf16_pairs_avx2;

}  // namespace infer
