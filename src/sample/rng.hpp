// The sampler's random number generator: xoshiro256** seeded through SplitMix64, both as their
// authors define them (https://prng.di.unimi.it). Every operation is exact integer arithmetic
// and the [0, 1) conversion is ours, so a seed yields the same stream on every platform and
// compiler; std:: distributions are implementation-defined and are deliberately not used.
#pragma once

#include <cstdint>

namespace infer {

class Rng {
 public:
  explicit Rng(uint64_t seed) { reseed(seed); }

  // The state is four consecutive SplitMix64 outputs: never all zero, and nearby seeds give
  // unrelated streams.
  void reseed(uint64_t seed) {
    for (uint64_t& word : s_) {
      seed += 0x9e3779b97f4a7c15ull;
      uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      word = z ^ (z >> 31);
    }
  }

  uint64_t next_u64() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1) on the grid k * 2^-53: the top 53 bits fill a double's mantissa exactly.
  double next_unit() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

  uint64_t s_[4];
};

}  // namespace infer
