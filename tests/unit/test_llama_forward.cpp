// The Llama forward pass against a float64 reference written here from the architecture's
// definition, plus the batch-invariance and error properties the engine relies on.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "format/gguf.hpp"
#include "kernels/cpu/dtype_traits.hpp"
#include "kv/kv_manager.hpp"
#include "model/model.hpp"
#include "tiny_llama.hpp"

using namespace infer;

namespace {

std::shared_ptr<const ModelFile> open_model(test::TinyLlama& spec) {
  auto bytes = spec.write();
  auto mf = gguf::read(MappedFile::from_bytes(bytes, "tiny.gguf").value());
  REQUIRE(mf.ok());
  return std::make_shared<const ModelFile>(std::move(mf).value());
}

// Weight matrix [n_in, n_out] as doubles, W[o][i].
std::vector<double> weights(const ModelFile& f, const std::string& name) {
  const TensorInfo* t = f.find_tensor(name);
  REQUIRE(t);
  std::vector<float> row(static_cast<size_t>(t->shape[0]));
  std::vector<double> out;
  for (int64_t r = 0; r < t->view.rows(); ++r) {
    dequantize_row_ref(t->dtype, t->view.row(r), row.data(), t->shape[0]);
    out.insert(out.end(), row.begin(), row.end());
  }
  return out;
}

using Vec = std::vector<double>;

Vec matvec(const Vec& w, const Vec& x, size_t n_out) {
  const size_t n_in = x.size();
  Vec y(n_out, 0.0);
  for (size_t o = 0; o < n_out; ++o)
    for (size_t i = 0; i < n_in; ++i) y[o] += w[o * n_in + i] * x[i];
  return y;
}

Vec rmsnorm(const Vec& x, const Vec& w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double s = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * s * w[i];
  return y;
}

void rope(Vec& x, int n_heads, int hd, int pos, double base, double scale, const Vec* factors) {
  for (int h = 0; h < n_heads; ++h)
    for (int i = 0; i < hd / 2; ++i) {
      double theta = pos * std::pow(base, -2.0 * i / hd) * scale;
      if (factors) theta /= (*factors)[static_cast<size_t>(i)];
      const double c = std::cos(theta), s = std::sin(theta);
      double& a = x[static_cast<size_t>(h * hd + 2 * i)];
      double& b = x[static_cast<size_t>(h * hd + 2 * i + 1)];
      const double a0 = a, b0 = b;
      a = a0 * c - b0 * s;
      b = a0 * s + b0 * c;
    }
}

// Logits of every position of one sequence, in float64.
std::vector<Vec> reference_logits(const ModelFile& f, const test::TinyLlama& s, const std::vector<int32_t>& tokens) {
  const int E = s.n_embd, hd = E / s.n_head, KV = hd * s.n_kv_heads;
  const double eps = 1e-5, scale = s.rope_linear_factor > 0 ? 1.0 / s.rope_linear_factor : 1.0;
  const Vec emb = weights(f, "token_embd.weight");
  Vec factors;
  if (s.rope_factors) factors = weights(f, "rope_freqs.weight");
  std::vector<Vec> x(tokens.size());
  for (size_t t = 0; t < tokens.size(); ++t)
    x[t] = Vec(emb.begin() + tokens[t] * E, emb.begin() + (tokens[t] + 1) * E);
  for (int l = 0; l < s.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const Vec wq = weights(f, p + "attn_q.weight"), wk = weights(f, p + "attn_k.weight"), wv = weights(f, p + "attn_v.weight"),
              wo = weights(f, p + "attn_output.weight"), an = weights(f, p + "attn_norm.weight"),
              fnw = weights(f, p + "ffn_norm.weight"), wg = weights(f, p + "ffn_gate.weight"),
              wu = weights(f, p + "ffn_up.weight"), wd = weights(f, p + "ffn_down.weight");
    std::vector<Vec> q(tokens.size()), k(tokens.size()), v(tokens.size());
    for (size_t t = 0; t < tokens.size(); ++t) {
      const Vec h = rmsnorm(x[t], an, eps);
      q[t] = matvec(wq, h, static_cast<size_t>(E));
      k[t] = matvec(wk, h, static_cast<size_t>(KV));
      v[t] = matvec(wv, h, static_cast<size_t>(KV));
      rope(q[t], s.n_head, hd, static_cast<int>(t), s.rope_base, scale, s.rope_factors ? &factors : nullptr);
      rope(k[t], s.n_kv_heads, hd, static_cast<int>(t), s.rope_base, scale, s.rope_factors ? &factors : nullptr);
    }
    for (size_t t = 0; t < tokens.size(); ++t) {
      Vec att(static_cast<size_t>(E), 0.0);
      for (int h = 0; h < s.n_head; ++h) {
        const int kvh = h / (s.n_head / s.n_kv_heads);
        Vec sc(t + 1);
        double mx = -1e300;
        for (size_t u = 0; u <= t; ++u) {
          double d = 0;
          for (int i = 0; i < hd; ++i) d += q[t][static_cast<size_t>(h * hd + i)] * k[u][static_cast<size_t>(kvh * hd + i)];
          sc[u] = d / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, sc[u]);
        }
        double z = 0;
        for (auto& e : sc) z += (e = std::exp(e - mx));
        for (size_t u = 0; u <= t; ++u)
          for (int i = 0; i < hd; ++i) att[static_cast<size_t>(h * hd + i)] += sc[u] / z * v[u][static_cast<size_t>(kvh * hd + i)];
      }
      const Vec o = matvec(wo, att, static_cast<size_t>(E));
      for (int i = 0; i < E; ++i) x[t][static_cast<size_t>(i)] += o[static_cast<size_t>(i)];
      const Vec h = rmsnorm(x[t], fnw, eps);
      const Vec g = matvec(wg, h, static_cast<size_t>(s.n_ff)), u = matvec(wu, h, static_cast<size_t>(s.n_ff));
      Vec a(g.size());
      for (size_t i = 0; i < g.size(); ++i) a[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
      const Vec d = matvec(wd, a, static_cast<size_t>(E));
      for (int i = 0; i < E; ++i) x[t][static_cast<size_t>(i)] += d[static_cast<size_t>(i)];
    }
  }
  const Vec on = weights(f, "output_norm.weight");
  const Vec out = weights(f, s.tied ? "token_embd.weight" : "output.weight");
  std::vector<Vec> logits;
  for (auto& xt : x) logits.push_back(matvec(out, rmsnorm(xt, on, eps), static_cast<size_t>(s.n_vocab)));
  return logits;
}

struct Runner {
  std::unique_ptr<Model> model;
  KvCacheManager kv;
  ThreadPool pool{2};

  Runner(std::shared_ptr<const ModelFile> f, DType kv_type)
      : model(load_model(std::move(f)).value()),
        kv(KvCacheManager::create(model->kv_config(1 << 20, 4, kv_type), 0, false).value()) {}

  // Runs `tokens` of one fresh sequence in chunks of `chunk`; returns every position's logits.
  std::vector<std::vector<float>> run(const std::vector<int32_t>& tokens, size_t chunk) {
    KvSequence seq;
    std::vector<std::vector<float>> out;
    const int64_t V = model->info().n_vocab;
    for (size_t start = 0; start < tokens.size(); start += chunk) {
      const size_t end = std::min(tokens.size(), start + chunk);
      REQUIRE(kv.append(seq, static_cast<int64_t>(end - start)));
      Batch b;
      b.sequences.push_back(BatchSequence(seq.kv));
      for (size_t t = start; t < end; ++t) b.add(tokens[t], static_cast<int32_t>(t), 0, true);
      std::vector<float> logits(static_cast<size_t>(V) * (end - start));
      REQUIRE(model->forward(b, kv.view(), logits.data(), pool).is_ok());
      for (size_t t = 0; t < end - start; ++t)
        out.emplace_back(logits.begin() + static_cast<ptrdiff_t>(t * V), logits.begin() + static_cast<ptrdiff_t>((t + 1) * V));
    }
    kv.release(seq);
    return out;
  }
};

const std::vector<int32_t> kPrompt = {1, 5, 9, 13, 2, 39, 0, 7, 7, 7, 21, 34, 3, 11, 17, 25, 30, 8};

}  // namespace

TEST_CASE("llama forward matches a float64 reference (F32 KV cache)", "[model][llama]") {
  for (int variant = 0; variant < 3; ++variant) {
    test::TinyLlama spec;
    spec.tied = variant == 1;
    spec.rope_factors = variant == 2;
    spec.rope_linear_factor = variant == 1 ? 4.0f : 0.0f;
    spec.seed = 10 + static_cast<uint64_t>(variant);
    auto file = open_model(spec);
    const auto ref = reference_logits(*file, spec, kPrompt);
    Runner run(file, DType::f32);
    const auto got = run.run(kPrompt, kPrompt.size());
    double max_err = 0, max_ref = 0;
    for (size_t t = 0; t < ref.size(); ++t)
      for (size_t i = 0; i < ref[t].size(); ++i) {
        max_err = std::max(max_err, std::fabs(ref[t][i] - got[t][i]));
        max_ref = std::max(max_ref, std::fabs(ref[t][i]));
      }
    INFO("variant " << variant << ": max |error| " << max_err << " of max |logit| " << max_ref);
    CHECK(max_err < 2e-4 * std::max(1.0, max_ref));
  }
}

TEST_CASE("an F16 KV cache stays close to the float64 reference", "[model][llama]") {
  test::TinyLlama spec;
  auto file = open_model(spec);
  const auto ref = reference_logits(*file, spec, kPrompt);
  Runner run(file, DType::f16);
  const auto got = run.run(kPrompt, kPrompt.size());
  double max_err = 0;
  for (size_t t = 0; t < ref.size(); ++t)
    for (size_t i = 0; i < ref[t].size(); ++i) max_err = std::max(max_err, std::fabs(ref[t][i] - got[t][i]));
  CHECK(max_err < 2e-2);
}

TEST_CASE("logits are bit-identical however the prompt is chunked", "[model][llama][invariance]") {
  test::TinyLlama spec;
  auto file = open_model(spec);
  Runner run(file, DType::f16);
  const auto whole = run.run(kPrompt, kPrompt.size());
  for (size_t chunk : {1, 2, 3, 5, 7}) {
    INFO("chunk " << chunk);
    CHECK(run.run(kPrompt, chunk) == whole);
  }
}

TEST_CASE("a row's logits are bit-identical alone and batched with other sequences", "[model][llama][invariance]") {
  test::TinyLlama spec;
  auto file = open_model(spec);
  Runner run(file, DType::f16);
  const std::vector<int32_t> other = {4, 4, 8, 15, 16, 23, 38};
  const auto alone_a = run.run(kPrompt, kPrompt.size());
  const auto alone_b = run.run(other, other.size());

  KvSequence a, b;
  REQUIRE(run.kv.append(a, static_cast<int64_t>(kPrompt.size())));
  REQUIRE(run.kv.append(b, static_cast<int64_t>(other.size())));
  Batch batch;
  batch.sequences = {BatchSequence(a.kv), BatchSequence(b.kv)};
  // Interleave the two sequences' rows.
  std::vector<std::pair<int, size_t>> rows;
  for (size_t t = 0; t < std::max(kPrompt.size(), other.size()); ++t) {
    if (t < other.size()) rows.push_back({1, t});
    if (t < kPrompt.size()) rows.push_back({0, t});
  }
  for (auto [s, t] : rows) batch.add(s == 0 ? kPrompt[t] : other[t], static_cast<int32_t>(t), s, true);
  const int64_t V = run.model->info().n_vocab;
  std::vector<float> logits(static_cast<size_t>(V) * rows.size());
  REQUIRE(run.model->forward(batch, run.kv.view(), logits.data(), run.pool).is_ok());
  for (size_t r = 0; r < rows.size(); ++r) {
    const auto [s, t] = rows[r];
    const auto& expect = s == 0 ? alone_a[t] : alone_b[t];
    REQUIRE(std::memcmp(logits.data() + r * static_cast<size_t>(V), expect.data(), static_cast<size_t>(V) * 4) == 0);
  }
}

TEST_CASE("malformed models give errors that name the problem", "[model][llama]") {
  auto expect = [](test::TinyLlama spec, const std::string& fragment) {
    auto bytes = spec.write();
    auto mf = gguf::read(MappedFile::from_bytes(bytes, "bad.gguf").value());
    REQUIRE(mf.ok());
    auto m = load_model(std::make_shared<const ModelFile>(std::move(mf).value()));
    REQUIRE_FALSE(m.ok());
    INFO(m.status().message());
    CHECK(m.status().message().find(fragment) != std::string::npos);
  };
  test::TinyLlama missing;
  missing.skip_tensor = "blk.1.ffn_up.weight";
  expect(missing, "bad.gguf: missing tensor blk.1.ffn_up.weight");
  test::TinyLlama shape;
  shape.wrong_shape_tensor = "blk.0.attn_k.weight";
  expect(shape, "blk.0.attn_k.weight: expected [32, 16], found [32, 32]");
  test::TinyLlama arch;
  arch.architecture = "gpt-neox";
  expect(arch, "unsupported architecture 'gpt-neox'");
  test::TinyLlama vocab;
  vocab.extra_vocab_tokens = 3;
  expect(vocab, "vocabulary size mismatch: tokenizer.ggml.tokens has 43 entries, token_embd.weight has 40 rows");
  test::TinyLlama heads;
  heads.n_kv_heads = 3;  // does not divide 4 heads
  expect(heads, "head_count_kv 3 does not divide head_count 4");
}

TEST_CASE("a batch with bad token ids, positions or blocks is refused", "[model][llama]") {
  test::TinyLlama spec;
  Runner run(open_model(spec), DType::f16);
  KvSequence seq;
  REQUIRE(run.kv.append(seq, 4));
  std::vector<float> logits(static_cast<size_t>(run.model->info().n_vocab) * 4);
  Batch b;
  b.sequences.push_back(BatchSequence(seq.kv));
  b.add(40, 0, 0, true);  // vocabulary is 0..39
  CHECK(run.model->forward(b, run.kv.view(), logits.data(), run.pool).code() == StatusCode::invalid_argument);
  b.clear();
  b.sequences.push_back(BatchSequence(seq.kv));
  b.add(1, 4, 0, true);  // position 4 has no block (one block of 4)
  CHECK(run.model->forward(b, run.kv.view(), logits.data(), run.pool).code() == StatusCode::invalid_argument);
  b.clear();
  b.add(1, 0, 0, true);  // no sequence 0
  CHECK(run.model->forward(b, run.kv.view(), logits.data(), run.pool).code() == StatusCode::invalid_argument);
}
