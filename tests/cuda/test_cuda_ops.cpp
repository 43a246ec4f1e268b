// Each op of src/ops/ on the CUDA backend against the same op on the CPU backend (with
// INFER_CPU_ISA=scalar: the scalar references) on random inputs, with a tolerance per dtype, and
// the quantized matmuls also against a float64 product of the dequantized weights. Outputs are
// poisoned (NaN) before each run, so an element the kernel never writes fails. Built into
// infer-cuda-tests; without a GPU the program exits 77 (skipped).
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/backend.hpp"
#include "core/thread_pool.hpp"
#include "kernels/cpu/dtype_traits.hpp"
#include "ops/attention.hpp"
#include "ops/elementwise.hpp"
#include "ops/embedding.hpp"
#include "ops/matmul.hpp"
#include "ops/norm.hpp"
#include "ops/op_util.hpp"
#include "ops/rope.hpp"
#include "quant_test_util.hpp"

using namespace infer;

namespace {

struct Pair {
  ThreadPool pool{2};
  CpuBackend cpu{pool};
  std::unique_ptr<Backend> gpu;
  Pair() {
    auto g = make_cuda_backend(0);
    REQUIRE(g.ok());
    gpu = std::move(g).value();
  }
};

std::vector<float> randn(size_t n, uint64_t seed, float sd = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// A [cols, rows] activation on each backend holding `host` (slot-separated).
struct Act {
  TensorView c, g;
};
Act act(Pair& p, int slot, int64_t cols, int64_t rows, const std::vector<float>* host = nullptr) {
  auto c = p.cpu.activation(slot, cols, rows);
  auto g = p.gpu->activation(slot, cols, rows);
  REQUIRE(c.ok());
  REQUIRE(g.ok());
  const size_t bytes = static_cast<size_t>(cols * rows) * 4;
  if (host) {
    std::memcpy(c->data, host->data(), bytes);
    REQUIRE(cudaMemcpy(g->data, host->data(), bytes, cudaMemcpyHostToDevice) == cudaSuccess);
  } else {
    std::memset(c->data, 0xff, bytes);  // NaN
    REQUIRE(cudaMemset(g->data, 0xff, bytes) == cudaSuccess);
  }
  // The backend's stream does not wait for the legacy stream's copies.
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  return {*c, *g};
}

std::vector<float> back(Pair& p, const TensorView& g) {
  REQUIRE(p.gpu->synchronize().is_ok());
  const int64_t cols = g.shape[0], rows = g.shape[1];
  std::vector<float> out(static_cast<size_t>(cols * rows));
  REQUIRE(cudaMemcpy2D(out.data(), cols * 4, g.data, g.stride[1], cols * 4, rows, cudaMemcpyDeviceToHost) == cudaSuccess);
  return out;
}
std::vector<float> host_rows(const TensorView& c) {
  std::vector<float> out;
  for (int64_t r = 0; r < c.shape[1]; ++r) out.insert(out.end(), ops::row_f32(c, r), ops::row_f32(c, r) + c.shape[0]);
  return out;
}

// ||a - b|| / ||b||; infinity when a has a NaN.
double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

TensorView vector_on(Backend& be, std::vector<float>& host) {
  TensorView v = TensorView::contiguous(DType::f32, 1, {static_cast<int64_t>(host.size()), 1, 1, 1}, host.data());
  auto prepared = be.prepare_weight(v, Backend::WeightSource::released);
  REQUIRE(prepared.ok());
  return *prepared;
}

}  // namespace

TEST_CASE("cuda element-wise ops, RMSNorm and RoPE match the CPU within float32 rounding", "[cuda][ops]") {
  Pair p;
  const int64_t cols = 4 * 96, rows = 7;
  auto xs = randn(cols * rows, 1), ys = randn(cols * rows, 2), bias = randn(cols, 3);
  auto compare = [&](const char* what, const Act& a, double tol) {
    INFO(what);
    const double e = rel_err(back(p, a.g), host_rows(a.c));
    CHECK(e <= tol);
  };
  {
    Act x = act(p, 0, cols, rows, &xs), y = act(p, 1, cols, rows, &ys);
    REQUIRE(ops::add(p.cpu, x.c, y.c).is_ok());
    REQUIRE(ops::add(*p.gpu, x.g, y.g).is_ok());
    compare("add", x, 0);
    REQUIRE(ops::add_bias(p.cpu, x.c, TensorView::contiguous(DType::f32, 1, {cols, 1, 1, 1}, bias.data())).is_ok());
    REQUIRE(ops::add_bias(*p.gpu, x.g, vector_on(*p.gpu, bias)).is_ok());
    compare("add_bias", x, 0);
    REQUIRE(ops::scale(p.cpu, x.c, 0.37f).is_ok());
    REQUIRE(ops::scale(*p.gpu, x.g, 0.37f).is_ok());
    compare("scale", x, 0);
    REQUIRE(ops::softcap(p.cpu, x.c, 1.5f).is_ok());
    REQUIRE(ops::softcap(*p.gpu, x.g, 1.5f).is_ok());
    compare("softcap", x, 1e-6);
    for (int block : {128, 64}) {  // the same butterflies: the same bits
      REQUIRE(ops::hadamard(p.cpu, x.c, block).is_ok());
      REQUIRE(ops::hadamard(*p.gpu, x.g, block).is_ok());
      compare("hadamard", x, 0);
    }
  }
  for (ops::Activation a : {ops::Activation::silu, ops::Activation::gelu}) {
    auto gs = randn(cols * rows, 4, 3.0f);
    gs[5] = -11.0f, gs[6] = 12.0f;  // the GELU's clamps
    Act g = act(p, 0, cols - 3, rows, &gs), u = act(p, 1, cols - 3, rows, &ys), o = act(p, 2, cols - 3, rows);
    REQUIRE(ops::glu(p.cpu, a, g.c, u.c, o.c).is_ok());
    REQUIRE(ops::glu(*p.gpu, a, g.g, u.g, o.g).is_ok());
    compare(a == ops::Activation::silu ? "silu" : "gelu", o, a == ops::Activation::silu ? 1e-6 : 0);
  }
  for (int64_t n : {cols, int64_t{96}}) {
    auto ws = randn(static_cast<size_t>(n), 5);
    Act x = act(p, 0, cols, rows, &xs), y = act(p, 1, cols, rows);
    REQUIRE(ops::rms_norm(p.cpu, x.c, TensorView::contiguous(DType::f32, 1, {n, 1, 1, 1}, ws.data()), y.c, 1e-6f).is_ok());
    REQUIRE(ops::rms_norm(*p.gpu, x.g, vector_on(*p.gpu, ws), y.g, 1e-6f).is_ok());
    compare(n == cols ? "rms_norm (rows)" : "rms_norm (heads)", y, 1e-6);
  }
  {
    const std::vector<int32_t> idx = {6, 0, 3};
    Act x = act(p, 0, cols, rows, &xs), o = act(p, 1, cols, 3);
    REQUIRE(ops::copy_rows(p.cpu, x.c, idx, o.c).is_ok());
    REQUIRE(ops::copy_rows(*p.gpu, x.g, idx, o.g).is_ok());
    compare("copy_rows", o, 0);
  }
  const int head_dim = 96, n_heads = 4;
  for (bool factors : {false, true}) {
    for (int n_rot : {96, 64}) {
      std::vector<float> f = randn(static_cast<size_t>(n_rot / 2), 6);
      for (auto& v : f) v = 1.0f + std::fabs(v);
      const std::vector<int32_t> pos = {0, 1, 17, 255, 1000, 4095, 70000};
      ops::RopeSpec cs{n_rot, 500000.0f, 0.5f, factors ? f.data() : nullptr};
      ops::RopeSpec gs = cs;
      if (factors) gs.freq_factors = static_cast<const float*>(vector_on(*p.gpu, f).data);
      Act t = act(p, 3, n_rot, rows);
      REQUIRE(ops::rope_table(p.cpu, cs, pos, t.c).is_ok());
      REQUIRE(ops::rope_table(*p.gpu, gs, pos, t.g).is_ok());
      compare("rope_table", t, 1e-6);
      for (ops::RopeStyle style : {ops::RopeStyle::norm, ops::RopeStyle::neox}) {
        Act x = act(p, 0, n_heads * head_dim, rows, &xs);
        // Both rotate by the CPU's table, so the rotation alone is compared.
        Act tc = act(p, 4, n_rot, rows);
        auto table = host_rows(t.c);
        REQUIRE(cudaMemcpy(tc.g.data, table.data(), table.size() * 4, cudaMemcpyHostToDevice) == cudaSuccess);
        REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
        REQUIRE(ops::rope(p.cpu, x.c, n_heads, head_dim, n_rot, style, t.c).is_ok());
        REQUIRE(ops::rope(*p.gpu, x.g, n_heads, head_dim, n_rot, style, tc.g).is_ok());
        compare(style == ops::RopeStyle::norm ? "rope norm" : "rope neox", x, 0);
      }
    }
  }
}

TEST_CASE("cuda embedding gather and matmul match the CPU and a float64 product for every weight type", "[cuda][ops]") {
  Pair p;
  const int64_t n_in = 512, n_out = 200;
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::q8_0, DType::q4_0, DType::q4_k, DType::q6_k}) {
    INFO(dtype_name(t));
    auto bytes = test::random_weights(t, n_out, n_in, 11);
    TensorView w = TensorView::contiguous(t, 2, {n_in, n_out, 1, 1}, bytes.data());
    auto wg = p.gpu->prepare_weight(w, Backend::WeightSource::released);
    REQUIRE(wg.ok());
    std::vector<float> deq(static_cast<size_t>(n_in * n_out));
    for (int64_t o = 0; o < n_out; ++o) dequantize_row_ref(t, w.row(o), deq.data() + o * n_in, n_in);
    {
      const std::vector<int32_t> tokens = {5, 199, 0, 5};
      Act e = act(p, 0, n_in, 4);
      REQUIRE(ops::embed(*p.gpu, *wg, tokens, e.g, 0.5f).is_ok());
      std::vector<float> expect;
      for (int32_t tk : tokens)
        for (int64_t i = 0; i < n_in; ++i) expect.push_back(deq[static_cast<size_t>(tk * n_in + i)] * 0.5f);
      CHECK(rel_err(back(p, e.g), expect) == 0);
    }
    // Quantized types: the CPU quantizes the activations (Q8), the GPU does not; F16/BF16 both
    // round them to the weight's type.
    const bool quant = t != DType::f32 && t != DType::f16 && t != DType::bf16;
    for (int64_t rows : {1, 5, 16, 17, 40}) {
      INFO(rows << " rows");
      auto xs = randn(static_cast<size_t>(n_in * rows), 12 + rows);
      Act x = act(p, 0, n_in, rows, &xs), y = act(p, 1, n_out, rows);
      REQUIRE(ops::matmul(p.cpu, w, x.c, y.c).is_ok());
      REQUIRE(ops::matmul(*p.gpu, *wg, x.g, y.g).is_ok());
      const auto got = back(p, y.g);
      CHECK(rel_err(got, host_rows(y.c)) <= (quant ? 3e-2 : 1e-5));
      if (quant) {
        std::vector<float> exact(static_cast<size_t>(n_out * rows));
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t o = 0; o < n_out; ++o) {
            double s = 0;
            for (int64_t i = 0; i < n_in; ++i) s += static_cast<double>(deq[static_cast<size_t>(o * n_in + i)]) * xs[static_cast<size_t>(r * n_in + i)];
            exact[static_cast<size_t>(r * n_out + o)] = static_cast<float>(s);
          }
        CHECK(rel_err(got, exact) <= 1e-5);
      }
      // Batch invariance: each row alone gives the bits it gave in the batch.
      if (rows > 1) {
        Act x1 = act(p, 2, n_in, 1), y1 = act(p, 3, n_out, 1);
        const int64_t r = rows - 1;
        std::vector<float> one(xs.begin() + r * n_in, xs.begin() + (r + 1) * n_in);
        REQUIRE(cudaMemcpy(x1.g.data, one.data(), one.size() * 4, cudaMemcpyHostToDevice) == cudaSuccess);
        REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
        REQUIRE(ops::matmul(*p.gpu, *wg, x1.g, y1.g).is_ok());
        const auto alone = back(p, y1.g);
        CHECK(std::memcmp(alone.data(), got.data() + r * n_out, static_cast<size_t>(n_out) * 4) == 0);
      }
    }
  }
}

TEST_CASE("cuda paged attention and kv_write match the CPU over scrambled blocks, GQA, 512-position chunks, windows and every cache type", "[cuda][ops]") {
  Pair p;
  // Q8_0 as it is and rotated (core/kv_view.hpp: K and V in one block of the head's 64).
  for (auto [kv_type, rotation] : std::vector<std::pair<DType, int>>{{DType::f16, 0}, {DType::bf16, 0}, {DType::f32, 0}, {DType::q8_0, 0}, {DType::q8_0, 64}}) {
    for (int window : {0, 100}) {
      INFO(dtype_name(kv_type) << " rotation " << rotation << " window " << window);
      const int n_kv = 2, n_head = 8, hd = 64, bs = 16;
      const std::vector<int32_t> lens = {700, 40};
      const int n_blocks = (700 + bs - 1) / bs + (40 + bs - 1) / bs;
      // Block tables: the blocks of both sequences interleaved in a scrambled order.
      std::vector<int32_t> perm(static_cast<size_t>(n_blocks));
      for (int b = 0; b < n_blocks; ++b) perm[static_cast<size_t>(b)] = (b * 7 + 3) % n_blocks;
      std::vector<int32_t> t0(perm.begin(), perm.begin() + (700 + bs - 1) / bs), t1(perm.begin() + (700 + bs - 1) / bs, perm.end());
      KvView kc;
      kc.n_kv_heads = n_kv, kc.head_dim = hd, kc.block_size = bs, kc.kv_type = kv_type, kc.n_groups = 1;
      kc.row_bytes = *dtype_row_bytes(kv_type, hd);
      kc.k_rotation = kc.v_rotation = rotation;
      kc.groups[0].n_layers = 1, kc.groups[0].n_blocks = n_blocks, kc.groups[0].sliding_window = window;
      KvView kg = kc;
      const size_t bytes = static_cast<size_t>(n_blocks) * n_kv * bs * kc.row_bytes;
      auto ck = p.cpu.allocate_kv(bytes), cv = p.cpu.allocate_kv(bytes), gk = p.gpu->allocate_kv(bytes), gv = p.gpu->allocate_kv(bytes);
      REQUIRE((ck.ok() && cv.ok() && gk.ok() && gv.ok()));
      kc.groups[0].k_base = ck->data(), kc.groups[0].v_base = cv->data();
      kg.groups[0].k_base = gk->data(), kg.groups[0].v_base = gv->data();
      std::vector<SequenceTables> seqs(2);
      seqs[0].tables[0] = t0, seqs[1].tables[0] = t1;
      std::vector<int32_t> pos, seq;
      for (int32_t i = 0; i < 700; ++i) pos.push_back(i), seq.push_back(0);
      for (int32_t i = 0; i < 40; ++i) pos.push_back(i), seq.push_back(1);
      const ops::PagedRows rows{pos, seq, seqs};
      const auto n = static_cast<int64_t>(pos.size());
      auto ks = randn(static_cast<size_t>(n * n_kv * hd), 21), vs = randn(static_cast<size_t>(n * n_kv * hd), 22),
           qs = randn(static_cast<size_t>(n * n_head * hd), 23, 2.0f);
      Act k = act(p, 0, n_kv * hd, n, &ks), v = act(p, 1, n_kv * hd, n, &vs), q = act(p, 2, n_head * hd, n, &qs),
          o = act(p, 3, n_head * hd, n);
      const ops::AttentionSpec spec{n_head, n_kv, hd, 1.0f / 8.0f};
      ops::AttentionPlan pc, pg;
      REQUIRE(pc.plan(p.cpu, rows, kc, spec).is_ok());
      REQUIRE(pg.plan(*p.gpu, rows, kg, spec).is_ok());
      REQUIRE(ops::kv_write(p.cpu, pc, kc, 0, rows, k.c, v.c).is_ok());
      REQUIRE(ops::kv_write(*p.gpu, pg, kg, 0, rows, k.g, v.g).is_ok());
      REQUIRE(p.gpu->synchronize().is_ok());
      std::vector<uint8_t> gk_host(bytes);
      REQUIRE(cudaMemcpy(gk_host.data(), gk->data(), bytes, cudaMemcpyDeviceToHost) == cudaSuccess);
      CHECK(std::memcmp(gk_host.data(), ck->data(), bytes) == 0);
      REQUIRE(ops::attention(p.cpu, pc, kc, 0, rows, q.c, o.c).is_ok());
      REQUIRE(ops::attention(*p.gpu, pg, kg, 0, rows, q.g, o.g).is_ok());
      CHECK(rel_err(back(p, o.g), host_rows(o.c)) <= 1e-5);
    }
  }
}
