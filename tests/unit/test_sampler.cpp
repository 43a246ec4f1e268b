// SamplingParams validation, the random stream, and each stage of the Sampler chain checked
// against distributions computed independently here, in double precision.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <vector>

#include "sample/rng.hpp"
#include "sample/sampler.hpp"
#include "sample/sampling_params.hpp"

using namespace infer;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Every filter off: the draw is from softmax(logits / temperature).
SamplingParams plain(float temperature, uint64_t seed = 1) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = seed;
  return p;
}

std::vector<double> softmax(const std::vector<float>& logits, double temperature = 1.0) {
  double max = -kInf;
  for (float l : logits) max = std::max(max, static_cast<double>(l));
  std::vector<double> p(logits.size());
  double sum = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) sum += p[i] = std::exp((logits[i] - max) / temperature);
  for (double& x : p) x /= sum;
  return p;
}

std::vector<int> draw_counts(Sampler& s, const std::vector<float>& logits, int draws) {
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < draws; ++i) {
    const int32_t id = s.sample(logits, {});
    REQUIRE(id >= 0);
    REQUIRE(static_cast<size_t>(id) < logits.size());
    ++counts[static_cast<size_t>(id)];
  }
  return counts;
}

std::set<int32_t> drawn_set(const std::vector<int>& counts) {
  std::set<int32_t> out;
  for (size_t i = 0; i < counts.size(); ++i)
    if (counts[i] > 0) out.insert(static_cast<int32_t>(i));
  return out;
}

// Logits uniform in [lo, hi), from a fixed stream.
std::vector<float> random_logits(size_t n, uint64_t seed, double lo, double hi) {
  Rng rng(seed);
  std::vector<float> out(n);
  for (float& l : out) l = static_cast<float>(lo + (hi - lo) * rng.next_unit());
  return out;
}

std::vector<int32_t> ids_by_probability(const std::vector<double>& p) {
  std::vector<int32_t> ids(p.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return p[a] > p[b]; });
  return ids;
}

// Wilson-Hilferty: the chi-square quantile with `df` degrees of freedom at z standard deviations.
double chi_square_bound(int df, double z) {
  const double a = 2.0 / (9.0 * df);
  return df * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
}

// Empirical frequencies match `expected` (probabilities over the same ids): chi-square below its
// 5-sigma quantile and every bin within 5 sigma. With a fixed seed the outcome is deterministic;
// the bounds say the check is not tuned to the seed.
void check_frequencies(const std::vector<int>& counts, const std::vector<double>& expected, int draws) {
  double chi2 = 0.0;
  int bins = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double e = expected[i] * draws;
    if (expected[i] == 0.0) {
      CHECK(counts[i] == 0);
      continue;
    }
    INFO("token " << i << ": " << counts[i] << " draws, expected " << e);
    CHECK(std::abs(counts[i] - e) <= 5.0 * std::sqrt(e * (1.0 - expected[i])) + 1.0);
    chi2 += (counts[i] - e) * (counts[i] - e) / e;
    ++bins;
  }
  INFO("chi-square " << chi2 << " over " << bins << " bins");
  CHECK(chi2 < chi_square_bound(bins - 1, 5.0));
}

}  // namespace

TEST_CASE("SamplingParams defaults are llama.cpp's and pass validation", "[sample]") {
  const SamplingParams p;
  CHECK(p.temperature == 0.8f);
  CHECK(p.top_k == 40);
  CHECK(p.top_p == 0.95f);
  CHECK(p.min_p == 0.05f);
  CHECK(p.repeat_penalty == 1.0f);
  CHECK(p.repeat_last_n == 64);
  CHECK(p.frequency_penalty == 0.0f);
  CHECK(p.presence_penalty == 0.0f);
  CHECK(p.validate().is_ok());
}

TEST_CASE("SamplingParams::validate rejects out-of-range values and names the field", "[sample]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto rejects = [](SamplingParams p, const char* field) {
    const Status st = p.validate();
    INFO(st.to_string());
    CHECK(st.code() == StatusCode::invalid_argument);
    CHECK(st.message().find(field) == 0);
  };
  auto with = [](auto set) { SamplingParams p; set(p); return p; };
  rejects(with([](auto& p) { p.temperature = -0.1f; }), "temperature");
  rejects(with([&](auto& p) { p.temperature = nan; }), "temperature");
  rejects(with([](auto& p) { p.temperature = kInf; }), "temperature");
  rejects(with([](auto& p) { p.top_k = -1; }), "top_k");
  rejects(with([](auto& p) { p.top_p = 0.0f; }), "top_p");
  rejects(with([](auto& p) { p.top_p = 1.01f; }), "top_p");
  rejects(with([&](auto& p) { p.top_p = nan; }), "top_p");
  rejects(with([](auto& p) { p.min_p = -0.01f; }), "min_p");
  rejects(with([](auto& p) { p.min_p = 1.5f; }), "min_p");
  rejects(with([&](auto& p) { p.min_p = nan; }), "min_p");
  rejects(with([](auto& p) { p.repeat_penalty = 0.0f; }), "repeat_penalty");
  rejects(with([](auto& p) { p.repeat_penalty = -1.1f; }), "repeat_penalty");
  rejects(with([](auto& p) { p.repeat_penalty = 1e-45f; }), "repeat_penalty");  // 1/x overflows
  rejects(with([&](auto& p) { p.repeat_penalty = nan; }), "repeat_penalty");
  rejects(with([](auto& p) { p.repeat_last_n = -2; }), "repeat_last_n");
  rejects(with([&](auto& p) { p.frequency_penalty = nan; }), "frequency_penalty");
  rejects(with([](auto& p) { p.presence_penalty = -kInf; }), "presence_penalty");
  CHECK(with([](auto& p) { p.temperature = -0.1f; }).validate().message() ==
        "temperature must be finite and >= 0 (0 = greedy), got -0.1");

  // The edges of each range are accepted.
  CHECK(with([](auto& p) { p.temperature = 0.0f; }).validate().is_ok());
  CHECK(with([](auto& p) { p.top_p = 1.0f; }).validate().is_ok());
  CHECK(with([](auto& p) { p.min_p = 0.0f; }).validate().is_ok());
  CHECK(with([](auto& p) { p.min_p = 1.0f; }).validate().is_ok());
  CHECK(with([](auto& p) { p.repeat_last_n = -1; }).validate().is_ok());
  CHECK(with([](auto& p) { p.frequency_penalty = -2.0f; p.presence_penalty = -2.0f; }).validate().is_ok());
}

TEST_CASE("the random stream is the xoshiro256** / SplitMix64 reference stream", "[sample]") {
  // Values from an independent Python implementation of the reference C code.
  Rng zero(0);
  CHECK(zero.next_u64() == 0x99ec5f36cb75f2b4ull);
  CHECK(zero.next_u64() == 0xbf6e1f784956452aull);
  CHECK(zero.next_u64() == 0x1a5f849d4933e6e0ull);
  CHECK(zero.next_u64() == 0x6aa594f1262d2d2cull);
  Rng r42(42);
  CHECK(r42.next_u64() == 0x15780b2e0c2ec716ull);
  CHECK(r42.next_u64() == 0x6104d9866d113a7eull);

  // next_unit is the top 53 bits scaled to [0, 1).
  Rng a(7), b(7);
  for (int i = 0; i < 1000; ++i) {
    const double u = a.next_unit();
    CHECK(u == static_cast<double>(b.next_u64() >> 11) / 9007199254740992.0);
    CHECK(u >= 0.0);
    CHECK(u < 1.0);
  }
}

TEST_CASE("each non-greedy sample consumes exactly one number, and the draw inverts the CDF", "[sample]") {
  // With uniform logits the draw is token floor(u * n); a call with one survivor still uses its u.
  const size_t n = 37;
  const std::vector<float> uniform(n, 0.25f);
  std::vector<float> single(n, -kInf);
  single[5] = 1.0f;
  Sampler s(plain(1.0f, 99));
  Rng reference(99);
  for (int i = 0; i < 200; ++i) {
    if (i % 3 == 0) {
      CHECK(s.sample(single, {}) == 5);
      reference.next_unit();
    } else {
      const auto expected = static_cast<int32_t>(std::floor(reference.next_unit() * static_cast<double>(n)));
      CHECK(s.sample(uniform, {}) == expected);
    }
  }
}

TEST_CASE("top-k never draws outside the k most likely tokens and draws each of them", "[sample]") {
  // Ten near-uniform leaders, forty clearly weaker tokens (each alone would still be drawn
  // hundreds of times without top-k).
  std::vector<float> logits = random_logits(50, 3, -0.5, 0.0);
  const std::vector<int32_t> leaders = {2, 7, 11, 19, 23, 30, 31, 40, 44, 49};
  for (int32_t id : leaders) logits[id] = 1.0f + 0.05f * static_cast<float>(id % 3);
  SamplingParams p = plain(1.0f, 5);
  p.top_k = 10;
  Sampler s(p);
  const auto counts = draw_counts(s, logits, 5000);
  CHECK(drawn_set(counts) == std::set<int32_t>(leaders.begin(), leaders.end()));

  // A skewed row: the draws follow the renormalized top-3 distribution.
  const std::vector<float> skewed = {0.1f, 2.0f, -1.0f, 1.5f, 0.9f, 1.2f, -3.0f};
  p.top_k = 3;
  Sampler s3(p);
  const auto c3 = draw_counts(s3, skewed, 20000);
  auto probs = softmax(skewed);
  const auto order = ids_by_probability(probs);
  for (size_t rank = 3; rank < order.size(); ++rank) probs[order[rank]] = 0.0;
  const double kept = probs[order[0]] + probs[order[1]] + probs[order[2]];
  for (double& x : probs) x /= kept;
  check_frequencies(c3, probs, 20000);
}

TEST_CASE("top-k larger than the vocabulary keeps every token", "[sample]") {
  const std::vector<float> logits = {0.0f, 0.1f, 0.2f, 0.3f};
  SamplingParams p = plain(1.0f, 8);
  p.top_k = 1000;
  Sampler s(p);
  const auto counts = draw_counts(s, logits, 20000);
  check_frequencies(counts, softmax(logits), 20000);
}

TEST_CASE("top-p keeps the smallest set of most likely tokens whose mass reaches p", "[sample]") {
  const std::vector<float> logits = random_logits(32, 11, -2.0, 2.0);
  const std::vector<double> probs = softmax(logits);
  const std::vector<int32_t> order = ids_by_probability(probs);
  for (float top_p : {0.3f, 0.5f, 0.8f, 0.95f}) {
    INFO("top_p " << top_p);
    std::set<int32_t> expected;
    std::vector<double> renormalized(logits.size(), 0.0);
    double mass = 0.0;
    for (int32_t id : order) {
      // The test's inputs stay clear of the boundary, where float and double could disagree.
      REQUIRE(std::abs(mass - top_p) > 1e-4);
      expected.insert(id);
      mass += probs[id];
      if (mass >= top_p) break;
    }
    for (int32_t id : expected) renormalized[id] = probs[id] / mass;

    SamplingParams p = plain(1.0f, 21);
    p.top_p = top_p;
    Sampler s(p);
    const auto counts = draw_counts(s, logits, 20000);
    CHECK(drawn_set(counts) == expected);
    check_frequencies(counts, renormalized, 20000);
  }
}

TEST_CASE("min-p never draws a token with p < min_p * p_max and keeps every other", "[sample]") {
  const std::vector<float> logits = random_logits(40, 12, -3.0, 1.0);
  const std::vector<double> probs = softmax(logits);
  const double p_max = *std::max_element(probs.begin(), probs.end());
  for (float min_p : {0.05f, 0.2f, 0.6f}) {
    INFO("min_p " << min_p);
    std::set<int32_t> expected;
    for (size_t i = 0; i < probs.size(); ++i) {
      REQUIRE(std::abs(probs[i] - min_p * p_max) > 1e-6);
      if (probs[i] >= min_p * p_max) expected.insert(static_cast<int32_t>(i));
    }
    SamplingParams p = plain(1.0f, 31);
    p.min_p = min_p;
    Sampler s(p);
    CHECK(drawn_set(draw_counts(s, logits, 20000)) == expected);
  }
}

TEST_CASE("the penalties change exactly the logits of tokens in the window, as defined", "[sample]") {
  const std::vector<float> logits = {2.6f, -1.5f, 0.0f, 3.0f, -0.25f, 1.0f, 0.5f, -4.0f, 7.0f, 0.75f};
  // Window of the last 6: {3, 1, 3, -1, 12, 3} -> 3 three times, 1 once; -1 and 12 are not tokens.
  const std::vector<int32_t> history = {8, 9, 0, 3, 1, 3, -1, 12, 3};
  SamplingParams p = plain(1.0f);
  p.repeat_penalty = 1.3f;
  p.frequency_penalty = 0.25f;
  p.presence_penalty = 0.5f;
  p.repeat_last_n = 6;

  auto expected = [&](size_t window) {
    std::map<int32_t, int> count;
    for (size_t i = history.size() - std::min(window, history.size()); i < history.size(); ++i) ++count[history[i]];
    std::vector<float> out = logits;
    for (auto [id, c] : count) {
      if (id < 0 || static_cast<size_t>(id) >= out.size()) continue;
      const float base = out[id] > 0.0f ? out[id] / p.repeat_penalty : out[id] * p.repeat_penalty;
      out[id] = base - (static_cast<float>(c) * p.frequency_penalty + p.presence_penalty);
    }
    return out;
  };

  std::vector<float> got = logits;
  Sampler(p).apply_penalties(got, history);
  CHECK(got == expected(6));
  CHECK(got[3] == Approx(3.0 / 1.3 - (3 * 0.25 + 0.5)));
  CHECK(got[1] == Approx(-1.5 * 1.3 - 0.75));  // a negative logit is multiplied, not divided
  CHECK(got[0] == logits[0]);                   // older than the window
  CHECK(got[8] == logits[8]);

  p.repeat_last_n = -1;  // the whole history
  got = logits;
  Sampler(p).apply_penalties(got, history);
  CHECK(got == expected(history.size()));
  CHECK(got[8] != logits[8]);

  p.repeat_last_n = 0;  // off
  got = logits;
  Sampler(p).apply_penalties(got, history);
  CHECK(got == logits);

  p.repeat_last_n = 64;
  p.repeat_penalty = 1.0f;
  p.frequency_penalty = 0.0f;
  p.presence_penalty = 0.0f;  // all three neutral: nothing changes
  got = logits;
  Sampler(p).apply_penalties(got, history);
  CHECK(got == logits);
}

TEST_CASE("sample applies the penalties before choosing", "[sample]") {
  const std::vector<float> logits = {0.0f, 2.0f, 1.9f};
  SamplingParams p = plain(0.0f);
  CHECK(Sampler(p).sample(logits, std::vector<int32_t>{1}) == 1);
  p.repeat_penalty = 1.1f;  // 2.0 / 1.1 < 1.9
  CHECK(Sampler(p).sample(logits, std::vector<int32_t>{1}) == 2);
  CHECK(Sampler(p).sample(logits, std::vector<int32_t>{2}) == 1);
  p.repeat_penalty = 1.0f;
  p.presence_penalty = 3.0f;
  CHECK(Sampler(p).sample(logits, std::vector<int32_t>{1, 2}) == 0);
}

TEST_CASE("temperature: draw frequencies match softmax(logits / T)", "[sample]") {
  const std::vector<float> logits = {1.0f, 0.5f, -0.3f, 2.0f, 0.0f, -1.2f, 1.5f, 0.7f};
  for (float t : {0.5f, 1.0f, 1.7f}) {
    INFO("temperature " << t);
    Sampler s(plain(t, 1234));
    check_frequencies(draw_counts(s, logits, 20000), softmax(logits, t), 20000);
  }
}

TEST_CASE("temperature applies after the filters: it reshapes only the survivors", "[sample]") {
  // At temperature 1, min-p 0.5 keeps {0, 1}; a high temperature must not readmit 2.
  const std::vector<float> logits = {1.0f, 0.6f, -2.0f};
  SamplingParams p = plain(50.0f, 4);
  p.min_p = 0.5f;
  Sampler s(p);
  const auto counts = draw_counts(s, logits, 20000);
  CHECK(counts[2] == 0);
  check_frequencies(counts, {softmax({1.0f, 0.6f}, 50.0)[0], softmax({1.0f, 0.6f}, 50.0)[1], 0.0}, 20000);
}

TEST_CASE("a fixed seed replays the same draws, different seeds differ", "[sample]") {
  const std::vector<float> logits = random_logits(100, 5, 0.0, 1.0);
  SamplingParams p;  // the default chain
  p.top_k = 0;
  p.seed = 2024;
  auto run = [&](Sampler& s) {
    std::vector<int32_t> out;
    std::vector<int32_t> history;
    for (int i = 0; i < 300; ++i) {
      out.push_back(s.sample(logits, history));
      history.push_back(out.back());
    }
    return out;
  };
  Sampler a(p), b(p);
  const auto first = run(a);
  CHECK(run(b) == first);
  a.reset(2024);
  CHECK(run(a) == first);
  p.seed = 2025;
  Sampler c(p);
  CHECK(run(c) != first);
}

TEST_CASE("greedy picks the arg-max, breaks ties to the lowest id and ignores the seed", "[sample]") {
  const std::vector<float> logits = random_logits(1000, 6, -5.0, 5.0);
  const auto best = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  for (uint64_t seed : {0ull, 1ull, 0xdeadbeefull}) {
    SamplingParams p = plain(0.0f, seed);
    Sampler s(p);
    for (int i = 0; i < 10; ++i) CHECK(s.sample(logits, {}) == best);
  }
  Sampler s(plain(0.0f));
  CHECK(s.sample(std::vector<float>{1.0f, 3.0f, 3.0f, 2.0f}, {}) == 1);
  CHECK(s.sample(std::vector<float>{-kInf, -kInf, -kInf}, {}) == 0);
}

TEST_CASE("edge cases: one finite logit, NaN, infinities, a vocabulary of one", "[sample]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  SamplingParams defaults;
  SamplingParams greedy = plain(0.0f);
  SamplingParams hot = plain(2.0f);
  for (const SamplingParams& p : {defaults, greedy, hot}) {
    Sampler s(p);
    std::vector<float> one_finite(500, -kInf);
    one_finite[123] = -7.0f;
    CHECK(s.sample(one_finite, {}) == 123);

    // NaN counts as -inf: never drawn, even where it sits among the largest values.
    std::vector<float> with_nan = {nan, 0.0f, nan, 0.1f, nan};
    for (int i = 0; i < 200; ++i) {
      const int32_t id = s.sample(with_nan, {});
      CHECK((id == 1 || id == 3));
    }

    CHECK(s.sample(std::vector<float>{4.0f, kInf, 1.0f}, {}) == 1);
    CHECK(s.sample(std::vector<float>{0.5f}, {}) == 0);
    CHECK(s.sample(std::vector<float>{nan}, {}) == 0);

    const int32_t id = s.sample(std::vector<float>(7, -kInf), {});
    CHECK((id >= 0 && id < 7));
  }
  // Every logit -inf: all tokens equally likely.
  Sampler s(plain(1.0f, 77));
  const auto counts = draw_counts(s, std::vector<float>(4, -kInf), 20000);
  check_frequencies(counts, {0.25, 0.25, 0.25, 0.25}, 20000);
}
