#include "sample/sampler.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

namespace infer {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// A strict total order (no NaN reaches it): higher logit first, then lower id. Because no two
// candidates compare equal, every sort gives one result whatever the standard library.
constexpr auto higher = [](const auto& a, const auto& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
};

float penalize(float logit, int32_t count, const SamplingParams& p) {
  // Dividing a negative logit would make the token more likely, so those are multiplied.
  logit = logit > 0.0f ? logit / p.repeat_penalty : logit * p.repeat_penalty;
  return logit - (static_cast<float>(count) * p.frequency_penalty + p.presence_penalty);
}

// exp((logit - max) / t); the equality test keeps an infinite maximum (inf - inf) out of exp.
double weight(float logit, double max, double t) {
  return logit == max ? 1.0 : std::exp((static_cast<double>(logit) - max) / t);
}

}  // namespace

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {
  assert(params.validate().is_ok() && "Sampler built from invalid SamplingParams");
}

void Sampler::reset(uint64_t seed) { rng_.reseed(seed); }

bool Sampler::penalties_active() const {
  return params_.repeat_last_n != 0 && (params_.repeat_penalty != 1.0f || params_.frequency_penalty != 0.0f ||
                                        params_.presence_penalty != 0.0f);
}

template <class Fn>
void Sampler::for_each_repeated(std::span<const int32_t> history, size_t vocab, Fn&& fn) {
  size_t n = history.size();
  if (params_.repeat_last_n > 0) n = std::min(n, static_cast<size_t>(params_.repeat_last_n));
  // Sorting a copy of the window counts repeats without a vocabulary-sized table.
  window_.assign(history.end() - static_cast<std::ptrdiff_t>(n), history.end());
  std::sort(window_.begin(), window_.end());
  for (size_t i = 0; i < window_.size();) {
    size_t j = i + 1;
    while (j < window_.size() && window_[j] == window_[i]) ++j;
    const int32_t id = window_[i];
    if (id >= 0 && static_cast<size_t>(id) < vocab) fn(id, static_cast<int32_t>(j - i));
    i = j;
  }
}

void Sampler::apply_penalties(std::span<float> logits, std::span<const int32_t> history) {
  if (!penalties_active()) return;
  for_each_repeated(history, logits.size(),
                    [&](int32_t id, int32_t count) { logits[id] = penalize(logits[id], count, params_); });
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
  assert(!logits.empty() && logits.size() <= static_cast<size_t>(std::numeric_limits<int32_t>::max()));
  const size_t n = logits.size();
  candidates_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const float l = logits[i];
    candidates_[i] = {static_cast<int32_t>(i), std::isnan(l) ? kNegInf : l, 0.0};
  }
  if (penalties_active()) {
    // Candidates are still in id order here, so candidates_[id] is the token's own entry.
    for_each_repeated(history, n, [&](int32_t id, int32_t count) {
      const float l = penalize(candidates_[id].logit, count, params_);
      candidates_[id].logit = std::isnan(l) ? kNegInf : l;
    });
  }

  if (params_.temperature <= 0.0f) {
    // Top-k, top-p and min-p all keep the maximum, so greedy skips them. Strict > keeps the lowest id.
    size_t best = 0;
    for (size_t i = 1; i < n; ++i)
      if (candidates_[i].logit > candidates_[best].logit) best = i;
    return candidates_[best].id;
  }

  size_t size = n;
  bool sorted = false;
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < n) {
    size = static_cast<size_t>(params_.top_k);
    std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(size),
                      candidates_.end(), higher);
    sorted = true;
  }
  if (params_.top_p < 1.0f) size = keep_top_p(size, sorted);
  if (params_.min_p > 0.0f) size = keep_min_p(size);
  return draw(size);
}

size_t Sampler::keep_top_p(size_t size, bool sorted) {
  const auto begin = candidates_.begin();
  double max = kNegInf;
  for (size_t i = 0; i < size; ++i) max = std::max(max, static_cast<double>(candidates_[i].logit));
  double total = 0.0;
  for (size_t i = 0; i < size; ++i) {
    candidates_[i].weight = weight(candidates_[i].logit, max, 1.0);
    total += candidates_[i].weight;
  }
  // Walk in descending order, sorting in doubling chunks: the kept set is usually a tiny part of
  // the vocabulary, and a full sort of 150k entries per token would dominate sampling.
  size_t sorted_end = sorted ? size : 0;
  double mass = 0.0;
  for (size_t i = 0; i < size; ++i) {
    if (i == sorted_end) {
      sorted_end = std::min(size, std::max<size_t>(64, 2 * sorted_end));
      std::partial_sort(begin + static_cast<std::ptrdiff_t>(i), begin + static_cast<std::ptrdiff_t>(sorted_end),
                        begin + static_cast<std::ptrdiff_t>(size), higher);
    }
    mass += candidates_[i].weight / total;
    if (mass >= params_.top_p) return i + 1;
  }
  return size;  // rounding kept the mass a hair under top_p: keep everything
}

size_t Sampler::keep_min_p(size_t size) {
  // p_i >= min_p * p_max  <=>  logit_i - logit_max >= log(min_p): no softmax needed.
  double max = kNegInf;
  for (size_t i = 0; i < size; ++i) max = std::max(max, static_cast<double>(candidates_[i].logit));
  const double min_gap = std::log(static_cast<double>(params_.min_p));
  size_t kept = 0;
  for (size_t i = 0; i < size; ++i) {
    const float l = candidates_[i].logit;
    // In-place and order-preserving, so the draw below sees a deterministic order.
    if (l == max || static_cast<double>(l) - max >= min_gap) candidates_[kept++] = candidates_[i];
  }
  return kept;
}

int32_t Sampler::draw(size_t size) {
  double max = kNegInf;
  for (size_t i = 0; i < size; ++i) max = std::max(max, static_cast<double>(candidates_[i].logit));
  const double t = params_.temperature;
  double total = 0.0;
  for (size_t i = 0; i < size; ++i) {
    candidates_[i].weight = weight(candidates_[i].logit, max, t);
    total += candidates_[i].weight;
  }
  const double target = rng_.next_unit() * total;
  double mass = 0.0;
  size_t last_positive = 0;
  for (size_t i = 0; i < size; ++i) {
    if (candidates_[i].weight <= 0.0) continue;  // underflowed to 0: never drawn
    mass += candidates_[i].weight;
    last_positive = i;
    if (mass > target) return candidates_[i].id;
  }
  return candidates_[last_positive].id;  // u * total rounded up to total
}

}  // namespace infer
