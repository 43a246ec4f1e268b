// The chained hash of a block of token ids, shared by the KV manager's prefix cache (its block
// keys) and the scheduler (which finds requests sharing blocks with a prefill in flight): equal
// hashes at block i mean, but for a 64-bit collision, equal tokens in blocks 0..i (and an equal
// salt, the model's fingerprint for the prefix cache).
#pragma once

#include <cstdint>
#include <span>

namespace infer {

// splitmix64's finalizer: a bijection on 64 bits with full avalanche.
constexpr uint64_t hash_mix64(uint64_t x) noexcept {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

// Folds one value into a running hash: rotate-xor then the finalizer (order-dependent).
constexpr uint64_t hash_fold(uint64_t h, uint64_t v) noexcept {
  return hash_mix64(((h << 23) | (h >> 41)) ^ (v + 0x9e3779b97f4a7c15ull));
}

// fold over (parent, salt, the block's token ids).
inline uint64_t chain_block_hash(uint64_t parent, uint64_t salt, std::span<const int32_t> block) noexcept {
  uint64_t h = hash_fold(parent, salt);
  for (int32_t t : block) h = hash_fold(h, static_cast<uint32_t>(t));
  return h;
}

}  // namespace infer
