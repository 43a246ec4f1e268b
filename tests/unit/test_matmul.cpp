// The CPU matmul every linear layer uses: accuracy against float64 (activation conversion
// included), its exact relation to the activation conversion and the dot kernels, batch
// invariance, and independence from the thread count. (Equality with llama.cpp's results:
// test_qmatmul.cpp.)
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "backend/backend.hpp"
#include "core/half.hpp"
#include "core/tensor.hpp"
#include "core/thread_pool.hpp"
#include "kernels/cpu/dot.hpp"
#include "kernels/cpu/dtype_traits.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/qdot.hpp"
#include "quant/quantize_activations.hpp"
#include "quant_test_util.hpp"

using namespace infer;
using namespace infer::test;

namespace {

// A weight [n_in, n_out] with random valid content, owning its bytes.
struct Weight {
  std::vector<uint8_t> bytes;
  TensorView view;

  Weight(DType t, int64_t n_in, int64_t n_out, uint64_t seed) : bytes(random_weights(t, n_out, n_in, seed)) {
    view = TensorView::contiguous(t, 2, {n_in, n_out, 1, 1}, bytes.data());
  }
};

std::vector<float> run(const Weight& w, const std::vector<float>& x, int64_t n_rows, ThreadPool& pool) {
  std::vector<float> y(static_cast<size_t>(n_rows * w.view.shape[1]));
  matmul(w.view, x.data(), n_rows, w.view.shape[0], y.data(), w.view.shape[1], pool);
  return y;
}

bool same_bits(float a, float b) { return f32_bits(a) == f32_bits(b); }

// Row lengths per type: multiples of 256 for every type, plus 32-multiples for 32-block types and
// lengths with a tail of every size for the plain types.
std::vector<int64_t> row_lengths(DType t) {
  const auto bs = dtype_traits(t)->block_size;
  if (bs == 256) return {256, 512, 1280};
  if (bs == 32) return {32, 96, 160, 256, 512, 1280};
  return {1, 7, 15, 33, 100, 256, 512, 1283};
}

// Bound on |y - Σ x_i w_i| (float64, w the dequantized weight), from two sources:
//  1. The conversion of x to the activation type a (quant/quantize_activations.hpp) moves each
//     element by at most e_i: 0 for F32; 2^-11 |x_i| for F16 and 2^-8 |x_i| for BF16 (half an ulp;
//     2^-25 at least for F16's subnormals); for Q8_0 / Q8_1, d (1/2 + 2^-16) + 127 |d16 - d| with
//     d = amax / 127 of the 32-block and d16 its F16 rounding; for Q8_K, d (1/2 + 2^-14). This
//     contributes Σ |w_i| e_i.
//  2. The dot of w and a rounds at most (chain + 6) times along any partial sum, relative to
//     M = Σ (|x_i| + e_i)(|d sc q_i| + |dmin m_i|) (qdot.hpp; chain = n_in / 8 for F32 / F16 / BF16,
//     the number of 32-blocks for the legacy types, 4 per super-block for K-quants; for F32 this is
//     the recursive-summation bound over the 8 lanes, one product rounding and the 3 tree levels).
//     Q4_1 / Q5_1 also take the min term from Q8_1's s = F16(d Σq) instead of d16 Σq: per block
//     |m| (2^-11 d + |d - d16| + 2^-23 d)(Σ|x_i| / d + 16), since |Σq| <= Σ|x_i| / d + 16.
// Relative to |y| the error is unbounded where terms cancel, so the bound is absolute.
struct ErrorBound {
  double exact = 0, bound = 0;
};

ErrorBound error_bound(DType t, const float* x, const WeightParts& w, int64_t n) {
  const double u = std::ldexp(1.0, -24);
  const DType at = activation_type(t);
  std::vector<double> e(static_cast<size_t>(n), 0.0);
  std::vector<double> d_of(static_cast<size_t>(n), 0.0), d16_of(static_cast<size_t>(n), 0.0);
  const int64_t block = at == DType::q8_k ? 256 : 32;
  for (int64_t b = 0; b < n; b += block) {
    if (at != DType::q8_0 && at != DType::q8_1 && at != DType::q8_k) break;
    double amax = 0;
    for (int64_t i = b; i < b + block; ++i) amax = std::max(amax, std::fabs(double(x[i])));
    const double d = amax / 127;
    const double d16 = f16_to_f32(f32_to_f16(static_cast<float>(amax) / 127.0f));
    for (int64_t i = b; i < b + block; ++i) {
      const auto k = static_cast<size_t>(i);
      e[k] = at == DType::q8_k ? d * (0.5 + std::ldexp(1.0, -14)) : d * (0.5 + std::ldexp(1.0, -16)) + 127 * std::fabs(d16 - d);
      d_of[k] = d;
      d16_of[k] = d16;
    }
  }
  if (at == DType::f16 || at == DType::bf16)
    for (int64_t i = 0; i < n; ++i)
      e[static_cast<size_t>(i)] = at == DType::f16 ? std::max(std::ldexp(std::fabs(double(x[i])), -11), std::ldexp(1.0, -25))
                                                   : std::ldexp(std::fabs(double(x[i])), -8);
  const auto bs = dtype_traits(t)->block_size;
  const double chain = bs == 1 ? double(n) / 8 : bs == 32 ? double(n) / 32 : 4.0 * double(n) / 256;
  ErrorBound r;
  double conversion = 0, magnitude = 0, q8_1_min = 0;
  for (int64_t i = 0; i < n; ++i) {
    const auto k = static_cast<size_t>(i);
    const double wi = double(w.scale[k]) + double(w.min[k]);
    const double wmag = std::fabs(double(w.scale[k])) + std::fabs(double(w.min[k]));
    r.exact += double(x[i]) * wi;
    conversion += std::fabs(wi) * e[k];
    magnitude += (std::fabs(double(x[i])) + e[k]) * wmag;
  }
  if (at == DType::q8_1) {
    for (int64_t b = 0; b < n; b += 32) {
      const double d = d_of[static_cast<size_t>(b)];
      if (d == 0) continue;
      double sum_abs = 0;
      for (int64_t i = b; i < b + 32; ++i) sum_abs += std::fabs(double(x[i]));
      const double m = std::fabs(double(w.min[static_cast<size_t>(b)]));
      q8_1_min += m * (std::ldexp(d, -11) + std::fabs(d - d16_of[static_cast<size_t>(b)]) + std::ldexp(d, -23)) * (sum_abs / d + 16);
    }
  }
  r.bound = conversion + (chain + 6) * u * magnitude + q8_1_min;
  return r;
}

}  // namespace

TEST_CASE("matmul is within the activation-conversion and rounding bound of a float64 reference for every type and ISA",
          "[matmul]") {
  ThreadPool pool(2);
  for (DType t : computable_types()) {
    for (int64_t n_in : row_lengths(t)) {
      const int64_t n_out = 37;  // several panels and a ragged last one
      const Weight w(t, n_in, n_out, 100 + static_cast<uint64_t>(n_in) + static_cast<uint64_t>(t));
      std::vector<WeightParts> parts;
      for (int64_t o = 0; o < n_out; ++o) parts.push_back(weight_parts(t, static_cast<const uint8_t*>(w.view.row(o)), n_in));
      for (int64_t n_rows : {1, 3, 17}) {
        const auto x = random_floats(static_cast<size_t>(n_rows * n_in), 7 + static_cast<uint64_t>(n_rows));
        for (CpuIsa isa : supported_isas()) {
          IsaScope scope(isa);
          const auto y = run(w, x, n_rows, pool);
          for (int64_t r = 0; r < n_rows; ++r)
            for (int64_t o = 0; o < n_out; ++o) {
              const ErrorBound eb = error_bound(t, x.data() + r * n_in, parts[static_cast<size_t>(o)], n_in);
              INFO(dtype_name(t) << " n_in " << n_in << " n_rows " << n_rows << " isa " << isa_name(isa) << " row " << r
                                 << " out " << o << " y " << y[r * n_out + o] << " exact " << eb.exact << " bound " << eb.bound);
              REQUIRE(std::fabs(double(y[r * n_out + o]) - eb.exact) <= eb.bound);
            }
        }
      }
    }
  }
}

TEST_CASE("matmul equals matmul_ref bit for bit on the scalar ISA, and on every ISA for all types but F32", "[matmul]") {
  ThreadPool pool(3);
  for (CpuIsa isa : supported_isas()) {
    IsaScope scope(isa);
    for (DType t : computable_types()) {
      if (t == DType::f32 && isa != CpuIsa::scalar) continue;  // the AVX2 F32 dot fuses
      const int64_t n_in = dtype_traits(t)->block_size == 1 ? 300 : 512;
      const Weight w(t, n_in, 45, 11 + static_cast<uint64_t>(t));
      const int64_t n_rows = 5;
      const auto x = random_floats(static_cast<size_t>(n_rows * n_in), 12);
      const auto y = run(w, x, n_rows, pool);
      std::vector<float> expect(y.size());
      matmul_ref(w.view, x.data(), n_rows, n_in, expect.data(), 45);
      for (size_t i = 0; i < y.size(); ++i) {
        INFO(dtype_name(t) << " isa " << isa_name(isa) << " element " << i);
        REQUIRE(same_bits(y[i], expect[i]));
      }
    }
  }
}


// Row lengths for the tiled kernels: one block, a few, and a model's.
std::vector<int64_t> tile_row_lengths(DType t) {
  const int64_t b = dtype_traits(t)->block_size;
  return {b, 3 * b, 2048};
}

std::vector<int64_t> one_to(int64_t n) {
  std::vector<int64_t> v;
  for (int64_t i = 1; i <= n; ++i) v.push_back(i);
  return v;
}

// matmul of w_run (any layout) for each row count (ascending; 1 to 33 unless given) under every
// ISA equals matmul_ref of w_file bit for bit, and so does matmul_ref of w_run. The reference
// computes each row on its own, so it runs once, for the most rows; the message of a failure is
// built once per comparison, at the first element that differs.
void require_ref_bits_for_every_row_count(const TensorView& w_run, const TensorView& w_file, uint64_t seed, ThreadPool& pool,
                                          const std::vector<int64_t>& row_counts = one_to(33)) {
  const int64_t n_in = w_file.shape[0], n_out = w_file.shape[1];
  const int64_t max_rows = row_counts.back();
  const auto x = test::activation_floats(max_rows * n_in, seed + 1);
  std::vector<float> expect(static_cast<size_t>(max_rows * n_out));
  matmul_ref(w_file, x.data(), max_rows, n_in, expect.data(), n_out);
  const auto require_expected = [&](const std::vector<float>& y, int64_t n_rows, const char* what) {
    size_t i = 0;
    while (i < y.size() && same_bits(y[i], expect[i])) ++i;
    INFO(what << " " << dtype_name(w_file.dtype) << " n_in " << n_in << " n_out " << n_out << " rows " << n_rows
              << " isa " << isa_name(active_isa()) << " first differing element " << i << " of " << y.size()
              << (i < y.size() ? " got " + std::to_string(y[i]) + " expect " + std::to_string(expect[i]) : ""));
    REQUIRE(i == y.size());
  };
  if (w_run.data != w_file.data) {
    std::vector<float> y_ref(expect.size());
    matmul_ref(w_run, x.data(), max_rows, n_in, y_ref.data(), n_out);
    require_expected(y_ref, max_rows, "matmul_ref");
  }
  for (CpuIsa isa : supported_isas()) {
    IsaScope scope(isa);
    for (int64_t n_rows : row_counts) {
      std::vector<float> y(static_cast<size_t>(n_rows * n_out));
      matmul(w_run, x.data(), n_rows, n_in, y.data(), n_out, pool);
      require_expected(y, n_rows, "matmul");
    }
  }
}

TEST_CASE("batched matmul of the types with tiled kernels equals matmul_ref bit for bit for 1 to 33 rows, any n_out, every ISA",
          "[matmul][qgemm]") {
  ThreadPool pool(2);
  int tiled_types = 0;
  for (const CpuTypeTraits& traits : all_cpu_types()) {
    if (!traits.gemm_avx512) continue;
    ++tiled_types;
    const DType t = traits.type;
    for (int64_t n_in : tile_row_lengths(t)) {
      // Partial weight-row groups of every kind: 1 row, odd counts below and above 16, several groups.
      for (int64_t n_out : {1, 15, 17, 37}) {
        const uint64_t seed = 70 + static_cast<uint64_t>(t) * 100 + static_cast<uint64_t>(n_in + n_out);
        // Scales over the whole F16 range (subnormals included) on half the shapes.
        const auto bytes = random_weights(t, n_out, n_in, seed, n_out % 2 ? kAnyFiniteHalf : kTypicalScale);
        const TensorView w = TensorView::contiguous(t, 2, {n_in, n_out, 1, 1}, const_cast<uint8_t*>(bytes.data()));
        require_ref_bits_for_every_row_count(w, w, seed, pool);
      }
    }
  }
  REQUIRE(tiled_types >= 3);
}

TEST_CASE("weights the CPU backend packs at load give matmul_ref's bits for 1 to 33 rows on every ISA, and their rows back",
          "[matmul][qgemm][backend]") {
  // Packed on each ISA that packs the type (AVX-512; AVX2 for the quantized types, into the same
  // layout), then multiplied on every ISA: a layout packed on one runs on the others.
  ThreadPool pool(2);
  CpuBackend backend(pool);
  int packed_weights = 0;
  for (const CpuTypeTraits& traits : all_cpu_types()) {
    if (!traits.load_packing) continue;
    const DType t = traits.type;
    for (int64_t n_in : tile_row_lengths(t)) {
      for (int64_t n_out : {1, 15, 17, 37, 64}) {
        const uint64_t seed = 90 + static_cast<uint64_t>(t) * 100 + static_cast<uint64_t>(n_in + n_out);
        const auto bytes = random_weights(t, n_out, n_in, seed, n_out % 2 ? kAnyFiniteHalf : kTypicalScale);
        const TensorView w = TensorView::contiguous(t, 2, {n_in, n_out, 1, 1}, const_cast<uint8_t*>(bytes.data()));
        std::vector<uint8_t> first_packing;
        int packed_weights_of_this = 0;
        for (CpuIsa packing_isa : supported_isas()) {
          IsaScope scope(packing_isa);
          const TensorView packed = *backend.prepare_weight(w, Backend::WeightSource::kept);
          INFO(dtype_name(t) << " n_in " << n_in << " n_out " << n_out << " packed on " << isa_name(packing_isa));
          const QGemmKernel* k = traits.load_packing_for(packing_isa);
          if (!k) {
            // Only ISAs with a kernel over the packed layout pack; others read the file's rows.
            REQUIRE(packed.layout == Layout::rows);
            REQUIRE(packed.data == w.data);
            continue;
          }
          REQUIRE(packed.layout == Layout::cpu_packed);
          REQUIRE(packed.data != w.data);
          ++packed_weights;
          // Every ISA's packer writes the same bytes (one layout per type).
          const auto* p = static_cast<const uint8_t*>(packed.data);
          const std::vector<uint8_t> these(p, p + packed_weight_bytes(*k, w));
          if (first_packing.empty())
            first_packing = these;
          else
            REQUIRE(these == first_packing);
          // Every row comes back byte for byte (the embedding and the lower ISAs read them so).
          std::vector<uint8_t> row(w.row_bytes());
          for (int64_t o = 0; o < n_out; ++o) {
            unpack_row(packed, o, row.data());
            REQUIRE(std::memcmp(row.data(), w.row(o), row.size()) == 0);
          }
          // The bytes are the first packing's, which multiply alike: multiplied once per weight.
          if (packed_weights_of_this++ == 0) require_ref_bits_for_every_row_count(packed, w, seed, pool);
        }
      }
    }
  }
  if (detected_isa() >= CpuIsa::avx2) REQUIRE(packed_weights > 0);
}

TEST_CASE("below AVX-512, every type packed at load packs into the AVX-512 kernels' layout", "[matmul][qgemm][dtype]") {
  int shared = 0, vnni = 0;
  for (const CpuTypeTraits& traits : all_cpu_types()) {
    INFO(dtype_name(traits.type));
    const QGemmKernel* k2 = traits.load_packing_for(CpuIsa::avx2);
    REQUIRE((k2 != nullptr) == (traits.load_packing != nullptr));
    REQUIRE(traits.load_packing_for(CpuIsa::scalar) == nullptr);
    REQUIRE(traits.load_packing_for(CpuIsa::avx512) == traits.load_packing);
    // The AVX-VNNI level reads the same layouts (its own kernel where the type has one), and
    // AVX-512 never takes an AVX-VNNI kernel (a CPU may have AVX-512 VNNI without AVX-VNNI).
    const QGemmKernel* kv = traits.load_packing_for(CpuIsa::avxvnni);
    REQUIRE((kv != nullptr) == (k2 != nullptr));
    if (traits.gemm_avxvnni) {
      REQUIRE(traits.gemm(CpuIsa::avxvnni) == traits.gemm_avxvnni);
      REQUIRE(traits.gemm(CpuIsa::avx2) == traits.gemm_avx2);
      REQUIRE(traits.gemm(CpuIsa::avx512) != traits.gemm_avxvnni);
    }
    if (!k2) continue;
    ++shared;
    REQUIRE(k2 != traits.load_packing);
    for (const QGemmKernel* k : {k2, kv}) {
      REQUIRE(k->unpack != nullptr);
      REQUIRE(k->group_rows == traits.load_packing->group_rows);
      for (int64_t n : {256, 2048}) REQUIRE(k->packed_bytes(n) == traits.load_packing->packed_bytes(n));
    }
    if (kv != k2) ++vnni;
  }
  // F16, BF16, Q8_0, Q4_0, Q5_0, Q4_1, Q5_1 and Q2_K ... Q6_K.
  REQUIRE(shared == 12);
  // Every quantized type multiplies with vpdpbusd there (all but F16 and BF16).
  REQUIRE(vnni == 10);
}

TEST_CASE("an ISA level the CPU lacks is lowered to the best one below it that it runs", "[matmul][dtype]") {
  for (CpuIsa isa : {CpuIsa::scalar, CpuIsa::avx2, CpuIsa::avxvnni, CpuIsa::avx512}) {
    INFO(isa_name(isa));
    IsaScope scope(isa);
    const CpuIsa active = active_isa();
    REQUIRE(isa_supported(active));
    REQUIRE(static_cast<int>(active) <= static_cast<int>(isa));
    if (isa_supported(isa)) REQUIRE(active == isa);
    // Lowered from avxvnni (AVX-512 without AVX-VNNI, or AVX2 only): AVX2, never AVX-512.
    if (isa == CpuIsa::avxvnni && !isa_supported(isa)) REQUIRE(active <= CpuIsa::avx2);
  }
  REQUIRE(isa_supported(CpuIsa::scalar));
  REQUIRE(isa_supported(detected_isa()));
}

TEST_CASE("the CPU backend copies the matrices it does not repack into its arena when their source is released",
          "[matmul][backend]") {
  ThreadPool pool(2);
  CpuBackend backend(pool);
  const int64_t n_in = 256, n_out = 37;
  int copied = 0;
  for (const DType t : test::computable_types()) {
    const uint64_t seed = 170 + static_cast<uint64_t>(t);
    const auto bytes = random_weights(t, n_out, n_in, seed, kTypicalScale);
    const TensorView w = TensorView::contiguous(t, 2, {n_in, n_out, 1, 1}, const_cast<uint8_t*>(bytes.data()));
    INFO(dtype_name(t));
    const TensorView kept = *backend.prepare_weight(w, Backend::WeightSource::kept);
    const TensorView released = *backend.prepare_weight(w, Backend::WeightSource::released);
    const bool packs = load_packing_for(w) != nullptr;
    // Repacking does not depend on the source; a plain copy only happens when the source goes.
    CHECK((kept.layout == Layout::cpu_packed) == packs);
    CHECK((released.layout == Layout::cpu_packed) == packs);
    if (packs) continue;
    CHECK(kept.data == w.data);
    REQUIRE(released.data != w.data);
    CHECK(reinterpret_cast<uintptr_t>(released.data) % 64 == 0);
    CHECK(released.stride == w.stride);
    CHECK(std::memcmp(released.data, w.data, w.nbytes()) == 0);
    // The kernels read the copy as they read the file's rows.
    for (int64_t rows : {1, 2, 17}) {
      const auto x = test::activation_floats(rows * n_in, seed + 1);
      std::vector<float> from_file(static_cast<size_t>(rows * n_out)), from_copy(from_file.size());
      matmul(w, x.data(), rows, n_in, from_file.data(), n_out, pool);
      matmul(released, x.data(), rows, n_in, from_copy.data(), n_out, pool);
      CHECK(std::memcmp(from_file.data(), from_copy.data(), from_file.size() * sizeof(float)) == 0);
    }
    ++copied;
  }
  CHECK(copied >= 1);  // F32 (every other type packs at load where the CPU has AVX-512)
  // Vectors stay where they are.
  std::vector<float> v(64, 1.0f);
  const TensorView vec = TensorView::contiguous(DType::f32, 1, {64, 1, 1, 1}, v.data());
  CHECK(backend.prepare_weight(vec, Backend::WeightSource::released)->data == v.data());
}

TEST_CASE("the tiled path's blocking (activation rows in chunks, weight groups in batches) gives matmul_ref's bits",
          "[matmul][qgemm][backend]") {
  // Rows of 4096 elements: the activation rows come in chunks of a few dozen (matmul.cpp keeps a
  // chunk and a batch of packed groups in L2), so 61 rows take several chunks with a partial last
  // one, and 5 weight groups several batches; per call packing and packing at load.
  ThreadPool pool(2);
  CpuBackend backend(pool);
  const int64_t n_in = 4096, n_out = 80 - 3;
  for (const CpuTypeTraits& traits : all_cpu_types()) {
    if (!traits.gemm_avx512) continue;
    const DType t = traits.type;
    const uint64_t seed = 130 + static_cast<uint64_t>(t);
    const auto bytes = random_weights(t, n_out, n_in, seed, kTypicalScale);
    const TensorView w = TensorView::contiguous(t, 2, {n_in, n_out, 1, 1}, const_cast<uint8_t*>(bytes.data()));
    INFO(dtype_name(t));
    require_ref_bits_for_every_row_count(w, w, seed, pool, {8, 61});
    if (traits.load_packing && detected_isa() >= CpuIsa::avx512)
      require_ref_bits_for_every_row_count(*backend.prepare_weight(w, Backend::WeightSource::kept), w, seed, pool, {61});
  }
}

TEST_CASE("batched F16 / BF16 matmul (tiled kernels) equals matmul_ref bit for bit for 1 to 40, 47 to 49 and 97 rows, row tails",
          "[matmul][qgemm]") {
  // Beyond the sweep above: row lengths with a tail of 7 (one block, several with a partial last
  // one), and row counts around the 48-row super-block whose chains wait between blocks.
  ThreadPool pool(2);
  std::vector<int64_t> row_counts = one_to(40);
  row_counts.insert(row_counts.end(), {47, 48, 49, 97});
  for (DType t : {DType::f16, DType::bf16}) {
    for (int64_t n_in : {7, 1283}) {
      for (int64_t n_out : {1, 5, 15, 17, 37}) {
        const uint64_t seed = 90 + static_cast<uint64_t>(t) * 100 + static_cast<uint64_t>(n_in + n_out);
        // The whole range of the type (F16 subnormals included) on half the shapes.
        const auto bytes = random_weights(t, n_out, n_in, seed, n_out % 2 ? kAnyFiniteHalf : kTypicalScale);
        const TensorView w = TensorView::contiguous(t, 2, {n_in, n_out, 1, 1}, const_cast<uint8_t*>(bytes.data()));
        require_ref_bits_for_every_row_count(w, w, seed, pool, row_counts);
      }
    }
  }
}

TEST_CASE("matmul's output (r, o) is exactly the active ISA's dot of weight row o and x row r converted once",
          "[matmul]") {
  ThreadPool pool(2);
  for (DType t : computable_types()) {
    for (int64_t n_in : {dtype_traits(t)->block_size == 256 ? int64_t{256} : int64_t{96}, int64_t{2048}}) {
      const int64_t n_out = 23;
      const Weight w(t, n_in, n_out, 21 + static_cast<uint64_t>(t));
      const int64_t n_rows = 5;
      const auto x = random_floats(static_cast<size_t>(n_rows * n_in), 22);
      const DType at = activation_type(t);
      for (CpuIsa isa : supported_isas()) {
        IsaScope scope(isa);
        const auto y = run(w, x, n_rows, pool);
        for (int64_t r = 0; r < n_rows; ++r) {
          std::vector<uint8_t> a(*dtype_row_bytes(at, static_cast<uint64_t>(n_in)));
          prepare_activations(at, x.data() + r * n_in, a.data(), n_in);
          for (int64_t o = 0; o < n_out; ++o) {
            const float expect = t == DType::f32 ? dot_f32(x.data() + r * n_in, w.view.row<const float>(o), n_in)
                                                 : qdot(qdot_kernel(t, isa), w.view.row(o), a.data(), n_in);
            INFO(dtype_name(t) << " n_in " << n_in << " isa " << isa_name(isa) << " row " << r << " out " << o);
            REQUIRE(same_bits(y[r * n_out + o], expect));
          }
        }
      }
    }
  }
}

TEST_CASE("a row's result is bit-identical alone and inside batches of 1 to 64 rows, for every type and ISA",
          "[matmul][batch-invariance]") {
  ThreadPool pool(2);
  for (DType t : computable_types()) {
    const int64_t n_in = dtype_traits(t)->block_size == 1 ? 200 : 256;
    const int64_t n_out = 21;
    const Weight w(t, n_in, n_out, 31 + static_cast<uint64_t>(t));
    const auto target = random_floats(static_cast<size_t>(n_in), 32);
    for (CpuIsa isa : supported_isas()) {
      IsaScope scope(isa);
      const auto alone = run(w, target, 1, pool);
      for (int64_t batch = 1; batch <= 64; ++batch) {
        // Other rows random (a fresh draw per batch size); the target at a varying position.
        auto x = random_floats(static_cast<size_t>(batch * n_in), 1000 + static_cast<uint64_t>(batch));
        const int64_t pos = (batch * 5 / 7) % batch;
        std::copy(target.begin(), target.end(), x.begin() + pos * n_in);
        const auto y = run(w, x, batch, pool);
        for (int64_t o = 0; o < n_out; ++o) {
          INFO(dtype_name(t) << " isa " << isa_name(isa) << " batch " << batch << " position " << pos << " out " << o);
          REQUIRE(same_bits(y[pos * n_out + o], alone[o]));
        }
      }
    }
  }
}

TEST_CASE("multi-threaded matmul equals single-threaded bit for bit", "[matmul]") {
  ThreadPool one(1), four(4);
  for (DType t : computable_types()) {
    const int64_t n_in = 512;
    const Weight w(t, n_in, 301, 41 + static_cast<uint64_t>(t));
    const auto x = random_floats(static_cast<size_t>(9 * n_in), 42);
    for (CpuIsa isa : supported_isas()) {
      IsaScope scope(isa);
      const auto a = run(w, x, 9, one);
      const auto b = run(w, x, 9, four);
      for (size_t i = 0; i < a.size(); ++i) {
        INFO(dtype_name(t) << " isa " << isa_name(isa) << " element " << i);
        REQUIRE(same_bits(a[i], b[i]));
      }
    }
  }
}

TEST_CASE("matmul honours x, y and weight row strides and leaves the padding alone", "[matmul]") {
  ThreadPool pool(2);
  for (DType t : {DType::f32, DType::q8_0, DType::q4_k}) {
    const int64_t n_in = 256, n_out = 19, n_rows = 3;
    const Weight w(t, n_in, n_out, 51);
    // The same weights with rows 40 bytes apart more than needed.
    const uint64_t row_bytes = w.view.row_bytes(), padded = row_bytes + 40;
    std::vector<uint8_t> spaced(padded * n_out, 0xAB);
    for (int64_t o = 0; o < n_out; ++o) std::memcpy(&spaced[o * padded], w.view.row(o), row_bytes);
    TensorView spaced_view = w.view;
    spaced_view.data = spaced.data();
    spaced_view.stride[1] = padded;

    const auto x = random_floats(static_cast<size_t>(n_rows * n_in), 52);
    const int64_t x_stride = n_in + 9, y_stride = n_out + 5;
    std::vector<float> xs(static_cast<size_t>(n_rows * x_stride), 1e30f);
    for (int64_t r = 0; r < n_rows; ++r) std::copy_n(x.begin() + r * n_in, n_in, xs.begin() + r * x_stride);
    const float sentinel = -12345.0f;
    std::vector<float> ys(static_cast<size_t>(n_rows * y_stride), sentinel);
    matmul(spaced_view, xs.data(), n_rows, x_stride, ys.data(), y_stride, pool);

    const auto expect = run(w, x, n_rows, pool);
    for (int64_t r = 0; r < n_rows; ++r)
      for (int64_t o = 0; o < y_stride; ++o) {
        INFO(dtype_name(t) << " row " << r << " column " << o);
        if (o < n_out)
          REQUIRE(same_bits(ys[r * y_stride + o], expect[r * n_out + o]));
        else
          REQUIRE(ys[r * y_stride + o] == sentinel);
      }
  }
}

TEST_CASE("dot kernels sum in exactly the order dot.hpp documents", "[matmul][dot]") {
  for (int64_t n = 0; n <= 70; ++n) {
    const auto a = random_floats(static_cast<size_t>(n), 61 + static_cast<uint64_t>(n));
    const auto b = random_floats(static_cast<size_t>(n), 62 + static_cast<uint64_t>(n));
    INFO("n " << n);
    // Scalar: 8 partial sums, multiply then add, then the fixed tree.
    float s[8] = {};
    for (int64_t i = 0; i < n; ++i) s[i % 8] += a[i] * b[i];
    const auto tree = [](const float* l) { return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7])); };
    REQUIRE(same_bits(dot_f32_ref(a.data(), b.data(), n), tree(s)));
    const float* w[4] = {b.data(), b.data(), a.data(), b.data()};
    float four[4], tile0[4], tile1[4];
    dot4_f32_ref(a.data(), w, n, four);
    dot4x2_f32_ref(b.data(), a.data(), w, n, tile0, tile1);
    REQUIRE(same_bits(four[0], tree(s)));
    REQUIRE(same_bits(tile1[1], tree(s)));
    if (detected_isa() < CpuIsa::avx2) continue;
    // AVX2: the same 8 lanes, each updated with a fused multiply-add.
    float lanes[8] = {};
    for (int64_t i = 0; i < n; ++i) lanes[i % 8] = std::fma(a[i], b[i], lanes[i % 8]);
    const float expect = tree(lanes);
    REQUIRE(same_bits(dot_f32_avx2(a.data(), b.data(), n), expect));
    // Tiles: each dot bit-identical to the single dot.
    const float aa = dot_f32_avx2(a.data(), a.data(), n), bb = dot_f32_avx2(b.data(), b.data(), n);
    dot4_f32_avx2(a.data(), w, n, four);
    REQUIRE((same_bits(four[0], expect) && same_bits(four[1], expect) && same_bits(four[2], aa) &&
             same_bits(four[3], expect)));
    dot4x2_f32_avx2(b.data(), a.data(), w, n, tile0, tile1);
    REQUIRE((same_bits(tile0[0], bb) && same_bits(tile0[2], expect) && same_bits(tile0[3], bb)));
    REQUIRE((same_bits(tile1[0], expect) && same_bits(tile1[2], aa) && same_bits(tile1[3], expect)));
  }
}
