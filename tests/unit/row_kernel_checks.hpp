// The checks the row-scaled weight-only types share (FP8 E4M3 rows, INT8 W8A16): every ISA's dot
// equals the scalar twin bit for bit for 1 to 9 activation rows, and the threaded matmul (the
// AVX-512 tiles included) equals matmul_ref bit for bit for 1 to 40 rows.
#pragma once

#include <catch2/catch.hpp>

#include <vector>

#include "core/half.hpp"
#include "core/tensor.hpp"
#include "core/thread_pool.hpp"
#include "kernels/cpu/dtype_traits.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/qdot.hpp"
#include "quant_test_util.hpp"

namespace infer::test {

// rows: n_rows weight rows of type t (n elements, row_bytes apart), against 9 activation rows of
// n floats (4 n bytes apart, from `seed`).
inline void require_dots_match_twin(DType t, QDotFn twin, const uint8_t* rows, int64_t n_rows, int64_t n, uint64_t row_bytes,
                                    uint64_t seed) {
  const CpuTypeTraits& e = *cpu_type_traits(t);
  const auto x = activation_floats(9 * n, seed);
  for (int64_t o = 0; o < n_rows; ++o) {
    const uint8_t* row = rows + o * row_bytes;
    std::vector<float> ref(9);
    twin(row, x.data(), 4 * n, 9, n, ref.data(), 1);
    for (CpuIsa isa : supported_isas()) {
      INFO(dtype_name(t) << " isa " << isa_name(isa) << " n " << n << " row " << o);
      for (int64_t n_a = 1; n_a <= 9; ++n_a) {
        std::vector<float> y(static_cast<size_t>(n_a));
        e.dot(isa)(row, x.data(), 4 * n, n_a, n, y.data(), 1);
        for (int64_t r = 0; r < n_a; ++r) REQUIRE(f32_bits(y[static_cast<size_t>(r)]) == f32_bits(ref[static_cast<size_t>(r)]));
      }
    }
  }
}

// bytes: n_out rows of n_in elements of type t, against 40 activation rows (from `seed`).
inline void require_matmul_matches_ref(DType t, std::vector<uint8_t>& bytes, int64_t n_in, int64_t n_out, uint64_t seed,
                                       ThreadPool& pool) {
  const TensorView w = TensorView::contiguous(t, 2, {n_in, n_out, 1, 1}, bytes.data());
  const auto x = activation_floats(40 * n_in, seed);
  std::vector<float> ref(static_cast<size_t>(40 * n_out));
  matmul_ref(w, x.data(), 40, n_in, ref.data(), n_out);
  for (CpuIsa isa : supported_isas()) {
    IsaScope scope(isa);
    for (int64_t rows : {int64_t{1}, int64_t{3}, int64_t{17}, int64_t{40}}) {
      INFO(dtype_name(t) << " n_in " << n_in << " isa " << isa_name(isa) << " rows " << rows);
      std::vector<float> y(static_cast<size_t>(rows * n_out));
      matmul(w, x.data(), rows, n_in, y.data(), n_out, pool);
      for (size_t k = 0; k < y.size(); ++k) REQUIRE(f32_bits(y[k]) == f32_bits(ref[k]));
    }
  }
}

}  // namespace infer::test
