// Attention over the paged KV cache (kernels/cpu/attention.hpp) against float64 softmax attention,
// and ggml's exp approximation it uses (kernels/cpu/exp_approx.hpp) against exp. (Equality with
// llama.cpp's flash attention shows in tests/integration/llama_reference.py: the reference models'
// distributions match it exactly.)
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <tuple>

#include "core/half.hpp"
#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/exp_approx.hpp"
#include "kernels/cpu/hadamard.hpp"
#include "attention_cache.hpp"
#include "quant_test_util.hpp"

using namespace infer;
using namespace infer::test;

namespace {

// softmax(scale * q_h · k_t) · v_t in float64 from the cache's values; a rotated cache's query
// rotated (H q) before the dots and its result rotated back (H (Σ p_t H v_t)), in float64.
std::vector<double> reference(const float* q, const AttentionShape& s, const AttentionCache& c, int n_ctx) {
  std::vector<double> out(static_cast<size_t>(s.n_head * s.head_dim), 0.0);
  for (int h = 0; h < s.n_head; ++h) {
    const int kvh = h / (s.n_head / s.n_kv_heads);
    std::vector<double> qh(q + h * s.head_dim, q + (h + 1) * s.head_dim);
    if (c.view.k_rotation > 0) hadamard_reference(qh.data(), s.head_dim, c.view.k_rotation);
    std::vector<double> w(static_cast<size_t>(n_ctx));
    for (int t = 0; t < n_ctx; ++t) {
      double dot = 0;
      for (int i = 0; i < s.head_dim; ++i) dot += qh[static_cast<size_t>(i)] * c.at(c.k, kvh, t, i);
      w[static_cast<size_t>(t)] = double(s.scale) * dot;
    }
    const double m = *std::max_element(w.begin(), w.end());
    double z = 0;
    for (auto& x : w) z += (x = std::exp(x - m));
    for (int t = 0; t < n_ctx; ++t)
      for (int i = 0; i < s.head_dim; ++i)
        out[static_cast<size_t>(h * s.head_dim + i)] += w[static_cast<size_t>(t)] / z * c.at(c.v, kvh, t, i);
    if (c.view.v_rotation > 0) hadamard_reference(out.data() + h * s.head_dim, s.head_dim, c.view.v_rotation);
  }
  return out;
}

// The scalar variant's attention_row for each row of `ar`, one at a time, at the rows' places in
// a [n_rows][n_head * head_dim] output.
std::vector<float> scalar_rows(const AttentionShape& shape, const AttentionCache& cache, const AttentionRows& ar) {
  IsaScope scalar(CpuIsa::scalar);
  const int64_t width = static_cast<int64_t>(shape.n_head) * shape.head_dim;
  std::vector<float> out(static_cast<size_t>(ar.n_rows * width)), scratch(static_cast<size_t>(attention_scratch_floats(shape.head_dim)));
  for (int j = 0; j < ar.n_rows; ++j)
    attention_row(ar.q + ar.rows[j] * ar.q_stride, shape, cache.view, 0, cache.blocks, ar.n_ctx[j], out.data() + ar.rows[j] * width,
                  scratch.data(), ar.first[j]);
  return out;
}

}  // namespace

TEST_CASE("exp_ggml is within 2 ulp of exp and saturates at the ends", "[attention]") {
  for (double x = -103.0; x <= 88.0; x += 0.001) {
    const float xf = static_cast<float>(x);
    const double expect = std::exp(double(xf));
    const float got = exp_ggml(xf);
    INFO("x " << xf << " got " << got << " expect " << expect);
    if (expect < std::numeric_limits<float>::min()) {
      REQUIRE(std::fabs(double(got) - expect) <= std::ldexp(1.0, -149) * 2);  // subnormal range: absolute
    } else {
      REQUIRE(std::fabs(double(got) - expect) <= 2 * std::ldexp(expect, -23));
    }
  }
  REQUIRE(exp_ggml(0.0f) == 1.0f);
  REQUIRE(exp_ggml(-std::numeric_limits<float>::infinity()) == 0.0f);
  REQUIRE(exp_ggml(-200.0f) == 0.0f);
  REQUIRE(std::isinf(exp_ggml(200.0f)));
}

TEST_CASE("attention_row matches float64 softmax attention for every context length across tile boundaries, every KV type",
          "[attention]") {
  // Q8_0 twice: as it is, and rotated (K and V in one block of the head's 64 elements).
  for (auto [type, rotation] : std::vector<std::pair<DType, int>>{
           {DType::f32, 0}, {DType::f16, 0}, {DType::bf16, 0}, {DType::q8_0, 0}, {DType::q8_0, 64}, {DType::f8_e4m3, 0}}) {
    const AttentionShape shape{4, 2, 64, 0.125f};
    AttentionCache cache(type, shape.n_kv_heads, shape.head_dim, 16, 16 * 13, rotation, rotation);
    // Keys and values with a spread of scores: some positions dominate, most do not.
    const auto keys = random_floats(cache.k.size() / cache.view.row_bytes * cache.view.head_dim, 1, -2.0f, 2.0f);
    const auto values = random_floats(cache.v.size() / cache.view.row_bytes * cache.view.head_dim, 2);
    cache.fill(keys, values);
    const auto q = random_floats(static_cast<size_t>(shape.n_head * shape.head_dim), 3, -1.0f, 1.0f);
    std::vector<float> scratch(static_cast<size_t>(attention_scratch_floats(shape.head_dim)));
    std::vector<float> out(q.size());
    for (int n_ctx : {1, 2, 7, 63, 64, 65, 127, 128, 129, 200, 208}) {
      attention_row(q.data(), shape, cache.view, 0, cache.blocks, n_ctx, out.data(), scratch.data());
      const auto expect = reference(q.data(), shape, cache, n_ctx);
      for (size_t i = 0; i < out.size(); ++i) {
        INFO(dtype_name(type) << " rotation " << rotation << " n_ctx " << n_ctx << " element " << i << " got " << out[i]
                              << " expect " << expect[i]);
        // Values lie in [-1, 1]: each output is a convex combination, so errors are absolute.
        REQUIRE(std::fabs(double(out[i]) - expect[i]) <= 2e-6);
      }
    }
  }
}

TEST_CASE("attention_row reads nothing past n_ctx", "[attention]") {
  const AttentionShape shape{2, 1, 32, 0.2f};
  AttentionCache clean(DType::f16, 1, 32, 16, 16 * 9);
  const auto kv = random_floats(clean.k.size() / 2, 4);
  clean.fill(kv, kv);
  const auto q = random_floats(64, 5);
  std::vector<float> scratch(static_cast<size_t>(attention_scratch_floats(32))), a(64), b(64);
  for (int n_ctx : {5, 64, 70}) {
    // Every slot past n_ctx holds NaN: a read of one would show in the output.
    AttentionCache poisoned = clean;
    poisoned.view.groups[0].k_base = poisoned.k.data();
    poisoned.view.groups[0].v_base = poisoned.v.data();
    for (int pos = n_ctx; pos < 16 * 9; ++pos)
      for (int i = 0; i < 32; ++i) {
        const size_t off = ((static_cast<size_t>(poisoned.blocks[static_cast<size_t>(pos / 16)]) * 16 + pos % 16) * 32 + i) * 2;
        poisoned.k[off] = poisoned.v[off] = 0xFF;
        poisoned.k[off + 1] = poisoned.v[off + 1] = 0x7F;
      }
    attention_row(q.data(), shape, clean.view, 0, clean.blocks, n_ctx, a.data(), scratch.data());
    attention_row(q.data(), shape, poisoned.view, 0, poisoned.blocks, n_ctx, b.data(), scratch.data());
    for (size_t i = 0; i < a.size(); ++i) {
      INFO("n_ctx " << n_ctx << " element " << i);
      REQUIRE(f32_bits(a[i]) == f32_bits(b[i]));
    }
  }
}

TEST_CASE("attention_row with a sliding window sees only the positions from first to n_ctx - 1 and never reads before first", "[attention]") {
  const AttentionShape shape{4, 1, 32, 0.25f};
  AttentionCache cache(DType::f16, 1, 32, 16, 16 * 12);
  const auto kv = random_floats(cache.k.size() / 2, 6, -2.0f, 2.0f);
  cache.fill(kv, kv);
  const auto q = random_floats(static_cast<size_t>(shape.n_head * shape.head_dim), 7, -1.0f, 1.0f);
  std::vector<float> scratch(static_cast<size_t>(attention_scratch_floats(shape.head_dim))), out(q.size());
  for (auto [first, n_ctx] : {std::pair{0, 40}, {1, 40}, {8, 40}, {63, 64}, {64, 130}, {65, 130}, {100, 192}, {150, 192}}) {
    // Positions before `first` hold NaN, and their whole blocks are gone from the table (-1).
    AttentionCache poisoned = cache;
    poisoned.view.groups[0].k_base = poisoned.k.data();
    poisoned.view.groups[0].v_base = poisoned.v.data();
    for (int pos = 0; pos < first; ++pos)
      for (int i = 0; i < 32; ++i) {
        const size_t off = ((static_cast<size_t>(poisoned.blocks[static_cast<size_t>(pos / 16)]) * 16 + pos % 16) * 32 + i) * 2;
        poisoned.k[off] = poisoned.v[off] = 0xFF;
        poisoned.k[off + 1] = poisoned.v[off + 1] = 0x7F;
      }
    for (int b = 0; b < first / 16; ++b) poisoned.blocks[static_cast<size_t>(b)] = -1;
    attention_row(q.data(), shape, poisoned.view, 0, poisoned.blocks, n_ctx, out.data(), scratch.data(), first);
    // float64 attention over the visible positions only.
    for (int h = 0; h < shape.n_head; ++h) {
      std::vector<double> w;
      for (int t = first; t < n_ctx; ++t) {
        double dot = 0;
        for (int i = 0; i < 32; ++i) dot += double(q[static_cast<size_t>(h * 32 + i)]) * cache.at(cache.k, 0, t, i);
        w.push_back(double(shape.scale) * dot);
      }
      const double m = *std::max_element(w.begin(), w.end());
      double z = 0;
      for (auto& x : w) z += (x = std::exp(x - m));
      for (int i = 0; i < 32; ++i) {
        double expect = 0;
        for (int t = first; t < n_ctx; ++t) expect += w[static_cast<size_t>(t - first)] / z * cache.at(cache.v, 0, t, i);
        INFO("first " << first << " n_ctx " << n_ctx << " head " << h << " element " << i);
        REQUIRE(std::fabs(double(out[static_cast<size_t>(h * 32 + i)]) - expect) <= 2e-6);
      }
    }
  }
}

TEST_CASE("attention_rows gives every row attention_row's result bit for bit, and every ISA's variant the scalar one's, every KV type",
          "[attention]") {
  // Head sizes: 32, and 72 for the tails of the transposes (16 and 8 columns at a time) and of
  // the value blocks; Q8_0 caches need multiples of 32. Rotated Q8_0 caches: K in one block of
  // 128 and V in two of 64; K and V in three blocks of 64.
  struct Case {
    DType type;
    int head_dim, k_rotation = 0, v_rotation = 0;
  };
  for (auto [type, head_dim, k_rotation, v_rotation] :
       std::vector<Case>{{DType::f16, 32}, {DType::f32, 32}, {DType::bf16, 32}, {DType::q8_0, 32}, {DType::f8_e4m3, 32}, {DType::f16, 72},
                         {DType::f32, 72}, {DType::q8_0, 96}, {DType::q8_0, 128, 128, 64}, {DType::q8_0, 192, 64, 64}}) {
    const AttentionShape shape{8, 2, head_dim, 0.17f};  // 4 query heads per KV head
    AttentionCache cache(type, shape.n_kv_heads, shape.head_dim, 16, 16 * 14, k_rotation, v_rotation);
    const auto kv = random_floats(cache.k.size() / cache.view.row_bytes * cache.view.head_dim, 8, -2.0f, 2.0f);
    cache.fill(kv, std::vector<float>(kv.rbegin(), kv.rend()));
    const int64_t width = shape.n_head * shape.head_dim;
    const int n_rows = 9;
    const auto q = random_floats(static_cast<size_t>(n_rows * width), 9, -1.0f, 1.0f);
    // Rows out of order, contexts across tile boundaries, some with a sliding window.
    const std::vector<int32_t> rows = {3, 0, 7, 1, 8, 2, 6, 4, 5};
    const std::vector<int32_t> n_ctx = {1, 20, 64, 65, 100, 129, 150, 200, 224};
    const std::vector<int32_t> first = {0, 0, 10, 33, 0, 97, 120, 150, 193};
    std::vector<float> out(static_cast<size_t>(n_rows * width)), one(static_cast<size_t>(width));
    std::vector<float> scratch(static_cast<size_t>(attention_rows_scratch_floats(shape, n_rows)));
    AttentionRows ar;
    ar.q = q.data();
    ar.q_stride = width;
    ar.out = out.data();
    ar.out_stride = width;
    ar.rows = rows.data();
    ar.n_ctx = n_ctx.data();
    ar.first = first.data();
    ar.n_rows = n_rows;
    std::vector<float> single(static_cast<size_t>(attention_scratch_floats(shape.head_dim)));
    // The scalar variant's rows, one at a time: what every variant must give, rows batched or not.
    const auto expect = scalar_rows(shape, cache, ar);
    for (CpuIsa isa : supported_isas()) {
      IsaScope scope(isa);
      std::fill(out.begin(), out.end(), -1.0f);
      attention_rows(shape, cache.view, 0, cache.blocks, ar, scratch.data());
      for (int j = 0; j < n_rows; ++j) {
        const float* want = expect.data() + rows[static_cast<size_t>(j)] * width;
        attention_row(q.data() + rows[static_cast<size_t>(j)] * width, shape, cache.view, 0, cache.blocks,
                      n_ctx[static_cast<size_t>(j)], one.data(), single.data(), first[static_cast<size_t>(j)]);
        INFO(dtype_name(type) << " head_dim " << head_dim << " rotation " << k_rotation << "/" << v_rotation << " isa " << isa_name(isa)
                              << " row " << j);
        REQUIRE(std::memcmp(one.data(), want, one.size() * 4) == 0);
        REQUIRE(std::memcmp(out.data() + rows[static_cast<size_t>(j)] * width, want, one.size() * 4) == 0);
      }
    }
  }
}

TEST_CASE("attention over several chunks stays within float64 softmax attention's bound, on every ISA", "[attention]") {
  const AttentionShape shape{2, 1, 32, 0.2f};
  AttentionCache cache(DType::f16, shape.n_kv_heads, shape.head_dim, 16, 16 * 100);
  cache.fill(random_floats(cache.k.size() / 2, 21, -2.0f, 2.0f), random_floats(cache.v.size() / 2, 25));
  const auto q = random_floats(static_cast<size_t>(shape.n_head * shape.head_dim), 22, -1.0f, 1.0f);
  std::vector<float> scratch(static_cast<size_t>(attention_scratch_floats(shape.head_dim))), out(q.size());
  for (CpuIsa isa : supported_isas()) {
    IsaScope scope(isa);
    for (int n_ctx : {511, 512, 513, 1024, 1100, 1600}) {
      attention_row(q.data(), shape, cache.view, 0, cache.blocks, n_ctx, out.data(), scratch.data());
      const auto expect = reference(q.data(), shape, cache, n_ctx);
      for (size_t i = 0; i < out.size(); ++i) {
        INFO(isa_name(isa) << " n_ctx " << n_ctx << " element " << i << " got " << out[i] << " expect " << expect[i]);
        REQUIRE(std::fabs(double(out[i]) - expect[i]) <= 2e-6);
      }
    }
  }
}

TEST_CASE("attention split by context chunk and combined gives attention_rows' and attention_row's bits, on every ISA",
          "[attention]") {
  // F16, and a rotated Q8_0 cache (the output is rotated back after the chunks are folded).
  for (auto [type, head_dim, rotation] : std::vector<std::tuple<DType, int, int>>{{DType::f16, 32, 0}, {DType::q8_0, 64, 64}}) {
    const AttentionShape shape{4, 1, head_dim, 0.15f};  // one KV head: the case the split is for
    AttentionCache cache(type, shape.n_kv_heads, shape.head_dim, 16, 16 * 110, rotation, rotation);
    const auto kv = random_floats(cache.k.size() / cache.view.row_bytes * cache.view.head_dim, 23, -2.0f, 2.0f);
    cache.fill(kv, std::vector<float>(kv.rbegin(), kv.rend()));
    const int64_t width = shape.n_head * shape.head_dim;
    // Contexts within one chunk, on its boundary and over several; windows that start inside a
    // later chunk (its earlier chunks see nothing) or just before a boundary.
    const std::vector<int32_t> rows = {2, 0, 5, 1, 4, 3};
    const std::vector<int32_t> n_ctx = {300, 512, 513, 1100, 1760, 1700};
    const std::vector<int32_t> first = {0, 0, 500, 0, 1030, 511};
    const int n_rows = static_cast<int>(rows.size());
    const auto q = random_floats(static_cast<size_t>(n_rows * width), 24, -1.0f, 1.0f);
    AttentionRows ar;
    ar.q = q.data();
    ar.q_stride = width;
    ar.rows = rows.data();
    ar.n_ctx = n_ctx.data();
    ar.first = first.data();
    ar.n_rows = n_rows;
    ar.out_stride = width;
    std::vector<float> whole(static_cast<size_t>(n_rows * width)), split(whole.size());
    std::vector<float> scratch(static_cast<size_t>(attention_rows_scratch_floats(shape, n_rows)));
    const int chunks = (1760 + kAttentionChunk - 1) / kAttentionChunk;
    const int64_t stride = attention_partial_floats(shape, n_rows);
    std::vector<float> partials(static_cast<size_t>(stride * chunks));
    const auto expect = scalar_rows(shape, cache, ar);
    for (CpuIsa isa : supported_isas()) {
      IsaScope scope(isa);
      ar.out = whole.data();
      attention_rows(shape, cache.view, 0, cache.blocks, ar, scratch.data());
      // The chunks in reverse order and the heads in two parts, as threads might take them.
      ar.out = split.data();
      std::fill(partials.begin(), partials.end(), std::nanf(""));
      for (int c = chunks - 1; c >= 0; --c)
        for (int part = 0; part < 2; ++part)
          attention_rows(shape, cache.view, 0, cache.blocks, ar, scratch.data(), 2 * part, 2 * part + 2, c,
                         partials.data() + c * stride);
      attention_combine(shape, cache.view, ar, partials.data(), chunks, stride, scratch.data());
      INFO(dtype_name(type) << " isa " << isa_name(isa));
      REQUIRE(std::memcmp(whole.data(), expect.data(), expect.size() * 4) == 0);
      REQUIRE(std::memcmp(split.data(), expect.data(), expect.size() * 4) == 0);
    }
  }
}

TEST_CASE("hadamard_blocks is the orthonormal Walsh-Hadamard transform per block, and its own inverse", "[attention]") {
  for (int n : {64, 128, 256, 512}) {
    const auto x = random_floats(static_cast<size_t>(3 * n), static_cast<uint64_t>(n), -1.0f, 1.0f);
    std::vector<float> y = x;
    hadamard_blocks(y.data(), 3 * n, n);
    std::vector<double> expect(x.begin(), x.end());
    hadamard_reference(expect.data(), 3 * n, n);
    for (size_t i = 0; i < y.size(); ++i) {
      INFO("n " << n << " element " << i);
      REQUIRE(std::fabs(double(y[i]) - expect[i]) <= 1e-5);
    }
    hadamard_blocks(y.data(), 3 * n, n);
    for (size_t i = 0; i < y.size(); ++i) REQUIRE(std::fabs(y[i] - x[i]) <= 1e-5f);
  }
}

TEST_CASE("kv_store writes a rotated Q8_0 cache's rows as Q8_0 of H k and H v, an unrotated one's as Q8_0 of k and v",
          "[attention]") {
  const int hd = 128, heads = 2, positions = 40;
  AttentionCache rotated(DType::q8_0, heads, hd, 16, positions, 128, 64), plain(DType::q8_0, heads, hd, 16, positions);
  const auto k = random_floats(static_cast<size_t>(positions * heads * hd), 31, -3.0f, 3.0f);
  const auto v = random_floats(k.size(), 32, -1.0f, 1.0f);
  for (int pos = 0; pos < positions; ++pos) {
    kv_store(rotated.view, 0, rotated.blocks, pos, k.data() + pos * heads * hd, v.data() + pos * heads * hd);
    kv_store(plain.view, 0, plain.blocks, pos, k.data() + pos * heads * hd, v.data() + pos * heads * hd);
  }
  for (int pos = 0; pos < positions; ++pos)
    for (int h = 0; h < heads; ++h)
      for (auto [src, buf, n] : {std::tuple{k.data(), &AttentionCache::k, 128}, std::tuple{v.data(), &AttentionCache::v, 64}}) {
        const float* row = src + (pos * heads + h) * hd;
        std::vector<double> expect(row, row + hd);
        hadamard_reference(expect.data(), hd, n);
        std::vector<uint8_t> bytes(34 * hd / 32);
        quantize_activations_q8_0(row, bytes.data(), hd);
        std::vector<float> unrotated(static_cast<size_t>(hd));
        dequantize_row_ref(DType::q8_0, bytes.data(), unrotated.data(), hd);
        for (int b = 0; b < hd; b += 32) {
          double amax = 0;
          for (int i = b; i < b + 32; ++i) amax = std::max(amax, std::fabs(expect[static_cast<size_t>(i)]));
          for (int i = b; i < b + 32; ++i) {
            INFO("position " << pos << " head " << h << " rotation " << n << " element " << i);
            // Half a step of the block's scale amax / 127, which is rounded to F16 (2^-11 of up to 127 steps).
            REQUIRE(std::fabs(rotated.at(rotated.*buf, h, pos, i) - expect[static_cast<size_t>(i)]) <= 0.57 * amax / 127 + 1e-6);
            REQUIRE(plain.at(plain.*buf, h, pos, i) == unrotated[static_cast<size_t>(i)]);
          }
        }
      }
}

TEST_CASE("a rotated Q8_0 cache loses less than an unrotated one when the keys have outlier channels", "[attention]") {
  // RoPE'd keys of real models carry a few channels far above the rest; one Q8_0 scale per 32
  // elements then leaves the others few levels. Exact: float64 attention over the F32 values.
  const AttentionShape shape{2, 1, 64, 0.125f};
  const int positions = 256;
  auto keys = random_floats(static_cast<size_t>(positions * shape.head_dim), 41, -1.0f, 1.0f);
  for (int t = 0; t < positions; ++t) {
    keys[static_cast<size_t>(t * shape.head_dim + 3)] *= 24.0f;
    keys[static_cast<size_t>(t * shape.head_dim + 35)] *= 24.0f;
  }
  const auto values = random_floats(keys.size(), 42, -1.0f, 1.0f);
  const auto q = random_floats(static_cast<size_t>(shape.n_head * shape.head_dim), 43, -1.0f, 1.0f);
  AttentionCache exact(DType::f32, 1, shape.head_dim, 16, positions);
  exact.fill(keys, values);
  const auto expect = reference(q.data(), shape, exact, positions);
  auto error = [&](int rotation) {
    AttentionCache cache(DType::q8_0, 1, shape.head_dim, 16, positions, rotation, rotation);
    for (int t = 0; t < positions; ++t)
      kv_store(cache.view, 0, cache.blocks, t, keys.data() + t * shape.head_dim, values.data() + t * shape.head_dim);
    std::vector<float> out(q.size()), scratch(static_cast<size_t>(attention_scratch_floats(shape.head_dim)));
    attention_row(q.data(), shape, cache.view, 0, cache.blocks, positions, out.data(), scratch.data());
    double sq = 0;
    for (size_t i = 0; i < out.size(); ++i) sq += (out[i] - expect[i]) * (out[i] - expect[i]);
    return std::sqrt(sq / static_cast<double>(out.size()));
  };
  const double plain = error(0), rotated = error(64);
  INFO("rms error: unrotated " << plain << ", rotated " << rotated);
  CHECK(rotated < plain / 2);
}
