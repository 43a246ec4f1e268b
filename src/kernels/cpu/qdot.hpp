// Dot products of one weight row with one activation row in the weight's activation type: what
// llama.cpp's CPU backend computes for a mul_mat on x86 with AVX2 when a batch has 8 rows or more
// (prompt processing; for fewer rows ggml switches to kernels with other float orders, so it is not
// batch-invariant; these kernels are).
//
// The weight type decides the activation type (ggml's vec_dot_type: kernels/cpu/dtype_traits.hpp)
// and the code path ggml runs, which fixes the order of the float operations. Integer sums of
// products are exact, so only the float steps below matter; they run in exactly this order, `fma`
// fused:
//
//  weight      activation  ggml path            float steps (dW, dA: block scales as floats)
//  F16, BF16   F16, BF16   llamafile tinyBLAS   lane i%8: s += w_i * a_i (exact products);
//                                               then ((s0+s4)+(s2+s6)) + ((s1+s5)+(s3+s7))
//  Q8_0, Q5_0  Q8_0        llamafile tinyBLAS   per block: dd = dW*dA; lane p (elements 4p..4p+3):
//                                               s_p = fma(dd, I_p, s_p); then the tree above
//  Q4_1, Q5_1  Q8_1        vec_dot              as Q8_0, and mins = fma(mW, sA, mins) per block;
//                                               result tree + mins
//  Q4_0        Q8_0        repack 8x8 gemm      per block: acc = fma(I, dW*dA, acc)
//  Q4_K        Q8_K        repack 8x8 gemm      per 64 elements (sub-blocks j, j+1):
//                                               acc = fma(sc_j I_j + sc_j+1 I_j+1, dW*dA, acc),
//                                               accm = fma(m_j B_j + m_j+1 B_j+1, dminW*dA, accm);
//                                               result acc - accm
//  Q2_K, Q5_K  Q8_K        tiled                per super-block: r = dW * S; r = fma(-dminW, M, r);
//                                               acc = fma(r, dA, acc)
//  Q3_K, Q6_K  Q8_K        tiled                per super-block: acc = fma(dW * S, dA, acc)
//
// I: integer dot of the block's (or lane's, sub-block's) weight quants and activation quants, the
// weight quants with their offsets applied (q - 8 for Q4_0, q - 4 for a Q3_K element without its
// high bit, ...); S = Σ_j sc_j I_j over the sub-blocks, M = Σ_j m_j B_j where B_j is the sum of
// the activation quants of sub-block j (from the Q8_K bsums). Integer-to-float conversions round
// to nearest even; only Q5_K's and Q6_K's S can exceed 2^24 and round there.
//
// Accuracy: every step is exact but the float ones, so the result is within a few units of float
// rounding per block of Σ|w_i a_i| (Σ|d sc q a| + Σ|dmin m a| for the types with a min), with w
// and a the dequantized weight and activation (tests/unit/test_qdot.cpp states the bounds).
//
// The _avx2 kernels are bit-identical to the _ref ones: they compute the same integers and the
// same float steps (the scalar code fuses with std::fma). F32 weights are not covered here: the
// matmul multiplies them with F32 activations through kernels/cpu/dot.hpp.
//
// Preconditions of a kernel: n >= 0 a multiple of the weight's block size (asserted); w holds n
// elements of the weight type; each activation row was converted by from_float_activation of its
// type (kernels/cpu/dtype_traits.hpp; the AVX2 kernels rely on its quants lying in [-127, 127] and
// on the Q8_K bsums matching the quants).
#pragma once

#include <cstdint>

namespace infer {

// One weight row (n elements) times n_a activation rows:
//   y[r * y_stride] = w · (the activation row at a + r * a_stride bytes), r < n_a.
// Each result is the same as with n_a = 1: the rows share the weight's unpacking, not sums.
using QDotKernel = void(const void* w, const void* a, int64_t a_stride, int64_t n_a, int64_t n, float* y,
                        int64_t y_stride) noexcept;
using QDotFn = QDotKernel*;

// The kernels' walk over activation rows: rows.template operator()<4>(r) for r = 0, 4, ... while
// four remain (one pass over the weight row serves four activation rows), then
// rows.template operator()<1>(r) for each row left.
template <typename Rows>
inline void by_fours(int64_t n_a, Rows&& rows) {
  int64_t r = 0;
  for (; r + 4 <= n_a; r += 4) rows.template operator()<4>(r);
  for (; r < n_a; ++r) rows.template operator()<1>(r);
}

// n_w weight rows, w_stride bytes apart, times one activation row: y[j] = (weight row j) · a,
// j < n_w, each result the same bits as the one-row kernel's (a decode step's kernels: two rows
// share each vector op).
// May throw std::bad_alloc (the AVX-512 ones grow a thread's scratch on first use).
using QDotRowsKernel = void(const void* w, int64_t w_stride, int64_t n_w, const void* a, int64_t n, float* y);
using QDotRowsFn = QDotRowsKernel*;

// One dot with a kernel of the above.
inline float qdot(QDotFn kernel, const void* w, const void* a, int64_t n) noexcept {
  float y;
  kernel(w, a, 0, 1, n, &y, 1);
  return y;
}

// The kernels, per weight type and ISA (the _avx2 ones need AVX2, FMA and F16C).
QDotKernel qdot_f16_ref;
QDotKernel qdot_bf16_ref;
QDotKernel qdot_q8_0_ref;
QDotKernel qdot_q5_0_ref;
QDotKernel qdot_q4_0_ref;
QDotKernel qdot_q4_1_ref;
QDotKernel qdot_q5_1_ref;
QDotKernel qdot_q2_k_ref;
QDotKernel qdot_q3_k_ref;
QDotKernel qdot_q4_k_ref;
QDotKernel qdot_q5_k_ref;
QDotKernel qdot_q6_k_ref;

QDotKernel qdot_f16_avx2;
QDotKernel qdot_bf16_avx2;
QDotKernel qdot_q8_0_avx2;
QDotKernel qdot_q5_0_avx2;
QDotKernel qdot_q4_0_avx2;
QDotKernel qdot_q4_1_avx2;
QDotKernel qdot_q5_1_avx2;
QDotKernel qdot_q2_k_avx2;
QDotKernel qdot_q3_k_avx2;
QDotKernel qdot_q4_k_avx2;
QDotKernel qdot_q5_k_avx2;
QDotKernel qdot_q6_k_avx2;

// Several rows at once (kernels/cpu/qdot_rows_avx512.cpp; CpuIsa::avx512) for the legacy types
// read in place, whose one-row kernels spend too many instructions a block to keep up with memory.
QDotRowsKernel qdot_rows_q8_0_avx512;
QDotRowsKernel qdot_rows_q5_0_avx512;
QDotRowsKernel qdot_rows_q4_1_avx512;
QDotRowsKernel qdot_rows_q5_1_avx512;
// And for CpuIsa::avx2 (kernels/cpu/qdot_avx2.cpp), where these types are read in place: one
// row's chain alone waits on its fma every block (every 8 elements).
QDotRowsKernel qdot_rows_q8_0_avx2;
QDotRowsKernel qdot_rows_q5_0_avx2;
QDotRowsKernel qdot_rows_q4_1_avx2;
QDotRowsKernel qdot_rows_q5_1_avx2;
QDotRowsKernel qdot_rows_q4_0_avx2;
QDotRowsKernel qdot_rows_f16_avx2;
QDotRowsKernel qdot_rows_bf16_avx2;

// INT8 with a scale per row (DType::i8_row; arithmetic in quant/int8_rows.hpp: an exact integer
// sum, then float(Σ) * (sw * sa)); every variant gives the same bits. The _avx512 one needs
// CpuIsa::avx512 (VNNI).
QDotKernel qdot_i8_row_ref;
QDotKernel qdot_i8_row_avx2;
QDotKernel qdot_i8_row_avx512;

// FP8 E4M3 weights (DType::f8_row, f8_tensor) against F32 activations (arithmetic in
// quant/fp8_rows.hpp: 16 lanes of fused products, a fixed tree); every variant gives the same bits.
QDotKernel qdot_f8_row_ref;
QDotKernel qdot_f8_row_avx2;
QDotKernel qdot_f8_row_avx512;
// The same weights against FP8 activations (DType::f8_w8a8 with f8_act rows: W8A8-FP8).
QDotKernel qdot_f8_w8a8_ref;
QDotKernel qdot_f8_w8a8_avx2;
QDotKernel qdot_f8_w8a8_avx512;
// INT8 rows (DType::i8_w8a16: i8_row's layout) against F32 activations, W8A16: the FP8 weight-only
// arithmetic above with each code's value float(q_i) (exact).
QDotKernel qdot_i8_w8a16_ref;
QDotKernel qdot_i8_w8a16_avx2;
QDotKernel qdot_i8_w8a16_avx512;

// INT4 weights in groups of 32, 64, 128 (DType::i4_g*) against F32 activations (arithmetic in
// quant/int4_groups.hpp: per group 16 lanes of fused products, folded by the group's scale; a fixed
// tree); every variant gives the same bits.
QDotKernel qdot_i4_g32_ref;
QDotKernel qdot_i4_g64_ref;
QDotKernel qdot_i4_g128_ref;
QDotKernel qdot_i4_g32_avx2;
QDotKernel qdot_i4_g64_avx2;
QDotKernel qdot_i4_g128_avx2;
QDotKernel qdot_i4_g32_avx512;
QDotKernel qdot_i4_g64_avx512;
QDotKernel qdot_i4_g128_avx512;
// INT8 weights in groups (DType::i8_g*) against F32 activations: the same steps with q for q - z
// (quant/int8_groups.hpp); the same files.
QDotKernel qdot_i8_g32_ref;
QDotKernel qdot_i8_g64_ref;
QDotKernel qdot_i8_g128_ref;
QDotKernel qdot_i8_g32_avx2;
QDotKernel qdot_i8_g64_avx2;
QDotKernel qdot_i8_g128_avx2;
QDotKernel qdot_i8_g32_avx512;
QDotKernel qdot_i8_g64_avx512;
QDotKernel qdot_i8_g128_avx512;

}  // namespace infer
