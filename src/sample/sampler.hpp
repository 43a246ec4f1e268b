// Sampler: turns one row of logits into a token id for one sequence, through the chain
//
//   penalties -> top-k -> top-p -> min-p -> temperature -> draw from the softmax
//
// which is llama.cpp's default order: the filters see the penalized logits at temperature 1,
// so temperature only reshapes the distribution among the survivors. temperature == 0 is
// greedy: the arg-max of the penalized logits, ties to the lowest id, no random number used.
//
// Reproducibility: the random stream is xoshiro256** from `seed` (see rng.hpp), identical on
// every platform, and every non-greedy sample() consumes exactly one number from it, however
// many candidates survive. So the same seed, logits and history give the same token sequence.
//
// A Sampler serves one sequence at a time and is not thread-safe. Its candidate and
// penalty-window buffers are reused: once they have grown to the largest vocabulary and window
// seen, sample() allocates nothing.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sample/rng.hpp"
#include "sample/sampling_params.hpp"

namespace infer {

class Sampler {
 public:
  // `params` must pass validate().
  explicit Sampler(const SamplingParams& params);

  // The next token id in [0, logits.size()). `logits` holds one value per vocabulary entry (at
  // least one); NaN counts as -inf. `history` is the sequence's tokens so far, oldest first
  // (whether the prompt is part of it is the caller's choice); the penalties look at its last
  // repeat_last_n entries, and ids outside the vocabulary are ignored. If every logit is -inf,
  // every token is equally likely.
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history);

  // Restarts the random stream as if the Sampler had been built with this seed.
  void reset(uint64_t seed);

  // The chain's first stage alone, in place: for each token that occurs c > 0 times in the
  // penalty window,
  //   logit = (logit > 0 ? logit / repeat_penalty : logit * repeat_penalty)
  //           - (c * frequency_penalty + presence_penalty)
  void apply_penalties(std::span<float> logits, std::span<const int32_t> history);

  const SamplingParams& params() const { return params_; }

 private:
  struct Candidate {
    int32_t id;
    float logit;
    double weight;  // unnormalized probability, filled by the stage that needs it
  };

  bool penalties_active() const;
  // Calls fn(id, count) once per distinct in-vocabulary token of the penalty window.
  template <class Fn>
  void for_each_repeated(std::span<const int32_t> history, size_t vocab, Fn&& fn);
  size_t keep_top_p(size_t size, bool sorted);
  size_t keep_min_p(size_t size);
  int32_t draw(size_t size);

  SamplingParams params_;
  Rng rng_;
  std::vector<Candidate> candidates_;
  std::vector<int32_t> window_;  // sorted copy of the penalty window
};

}  // namespace infer
