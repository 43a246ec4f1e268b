// The scheduler's BlockBudget over the engine's KvCacheManager: the one place that translates
// between the two, so that a change of the manager's interface changes only this file.
//
// Each SchedSequence's budget_data points at the KvSequence that holds its blocks (the engine's
// request record owns it and sets the pointer before the sequence is enqueued).
#pragma once

#include "kv/kv_manager.hpp"
#include "sched/block_budget.hpp"
#include "sched/sequence.hpp"

namespace infer {

class KvBlockBudget final : public BlockBudget {
 public:
  explicit KvBlockBudget(KvCacheManager& kv) : kv_(kv) {}

  static KvSequence& kv_of(SchedSequence& s) noexcept { return *static_cast<KvSequence*>(s.budget_data); }
  static const KvSequence& kv_of(const SchedSequence& s) noexcept { return *static_cast<const KvSequence*>(s.budget_data); }

  int block_size() const noexcept override { return kv_.block_size(); }
  bool shares_prefixes() const noexcept override { return kv_.prefix_cache(); }
  int64_t take_cached_prefix(SchedSequence& s, std::span<const int32_t> tokens) override { return kv_.match_prefix(kv_of(s), tokens); }
  bool can_append(const SchedSequence& s, int64_t n) const override { return kv_.can_append(kv_of(s), n); }
  bool append(SchedSequence& s, int64_t n) override { return kv_.append(kv_of(s), n); }
  void release(SchedSequence& s) override { kv_.release(kv_of(s)); }

 private:
  KvCacheManager& kv_;
};

}  // namespace infer
