// What the scheduler sees of the KV cache: a budget of blocks, never the concrete manager.
//
// The engine implements it over its KV-cache manager (src/engine/kv_block_budget.hpp); the
// scheduler's unit tests implement it with a plain counter. Each sequence's block bookkeeping is
// the budget's own business: the scheduler passes SchedSequence::budget_data back untouched.
#pragma once

#include <cstdint>
#include <span>

namespace infer {

struct SchedSequence;

class BlockBudget {
 public:
  virtual ~BlockBudget() = default;

  // Positions per block.
  virtual int block_size() const noexcept = 0;
  // Whether full blocks computed by one sequence are served to others with the same prefix
  // (prefix caching on): only then is it worth holding a request back for a prefix in flight.
  virtual bool shares_prefixes() const noexcept = 0;
  // Gives an empty sequence the longest cached prefix of `tokens`, leaving at least the last token
  // to compute; returns the positions served (a multiple of block_size(); 0 when nothing is
  // cached or sharing is off). On success the sequence holds those blocks.
  virtual int64_t take_cached_prefix(SchedSequence& s, std::span<const int32_t> tokens) = 0;
  // Whether s can grow by n positions now (blocks free or evictable).
  virtual bool can_append(const SchedSequence& s, int64_t n) const = 0;
  // Grows s by n positions, all or nothing; false (nothing changed) when blocks run out.
  virtual bool append(SchedSequence& s, int64_t n) = 0;
  // Drops every block s holds; s is left empty. A no-op on an empty sequence.
  virtual void release(SchedSequence& s) = 0;
};

}  // namespace infer
