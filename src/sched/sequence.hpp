// What the scheduler knows of a sequence; the engine owns it (one per request).
#pragma once

#include <cstdint>
#include <vector>

namespace infer {

struct SchedSequence {
  uint64_t id = 0;
  int priority = 0;            // higher first
  uint64_t arrival = 0;        // submit order, kept across preemption
  uint64_t admitted = 0;       // admission order of the current run (most recent = largest)
  std::vector<int32_t> tokens; // prompt + generated so far
  int64_t n_computed = 0;      // positions whose K/V are in the cache
  bool running = false;
  bool in_queue = false;       // waiting
  int64_t preemptions = 0;
  int64_t cached_tokens = 0;   // positions the first admission took from the prefix cache
  bool ever_admitted = false;
  int64_t cache_limit = -1;    // prompt tokens the prefix-cache lookup may cover (-1: all); a scored
                               // prompt's scored rows must be computed, not taken from the cache
  int64_t held_back = 0;       // steps this sequence was held back for a shared prefix in flight
  void* owner = nullptr;       // the engine's request record
  void* budget_data = nullptr; // the block budget's record of this sequence's blocks (set by
                               // whoever owns the budget; the scheduler never reads it)
  // Scheduler-owned: chained hashes of the full blocks of `tokens` computed so far
  // (block_hashes[i] identifies tokens[0, (i + 1) * block_size)).
  std::vector<uint64_t> block_hashes;
};

}  // namespace infer
