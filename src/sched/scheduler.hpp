// The continuous-batching scheduler: which sequences run in the next step, and how many of their
// tokens. It sees the KV cache only as a BlockBudget and asks a SchedulerPolicy for the order of
// admission and of preemption; it never sees the model or the concrete KV manager.
//
// One step, under a token budget (max_batch_tokens) and a sequence limit (max_sequences):
//   1. decodes: every running sequence whose prompt is done gets one row, in admission order of
//      the policy; when blocks run out the policy's first victim is preempted (its blocks
//      released; it waits again, keeping its place by arrival, and its tokens are recomputed
//      when it is readmitted);
//   2. prefill chunks of running sequences still in their prompt, then
//   3. waiting sequences admitted in the policy's order (the first that cannot be admitted for
//      lack of blocks or slots stops admission: it is never overtaken), each taking the longest
//      cached prefix of its tokens first; a prompt longer than what is left of the budget gets a
//      chunk now and the rest later, so a long prompt never stalls the decodes of others.
//      - Prefix-aware admission (on by default): a waiting sequence whose prompt shares full
//        blocks with a running sequence that has not computed them yet is held back (skipped, not
//        blocking the queue) until those blocks are computed and in the prefix cache, then it
//        takes them from the cache. A burst behind one system prompt computes it once, whatever
//        the timing. A holder that finishes, is cancelled or is preempted stops holding.
//      - Priority preemption (off by default): a waiting sequence that cannot be admitted for
//        lack of blocks or slots preempts running ones the policy lets it displace (by default
//        those of strictly lower priority), victims first, until it fits or none is left.
// If nothing at all could be scheduled while sequences hold blocks, the policy's first victim is
// preempted so that the others can move; a sequence that cannot make progress even alone (the
// pool is smaller than it) is reported as failed.
//
// Not thread-safe: the engine's worker owns it.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "sched/block_budget.hpp"
#include "sched/policy.hpp"
#include "sched/sequence.hpp"

namespace infer {

struct StepEntry {
  SchedSequence* seq = nullptr;
  int64_t first = 0;           // first position computed this step (== seq->n_computed)
  int64_t n = 0;               // positions computed this step
  bool wants_logits = false;   // the chunk reaches the last known token
};

struct StepPlan {
  std::vector<StepEntry> entries;
  std::vector<SchedSequence*> preempted;  // released this step and waiting again
  std::vector<SchedSequence*> failed;     // cannot progress even alone (KV pool too small)
  std::vector<SchedSequence*> held;       // waiting for a shared prefix another sequence computes
  int64_t rows = 0;
  void clear() {
    entries.clear();
    preempted.clear();
    failed.clear();
    held.clear();
    rows = 0;
  }
};

struct SchedulerConfig {
  int64_t max_batch_tokens = 512;     // rows of one step
  int max_sequences = 16;             // running sequences at most
  bool priority_preemption = false;   // a waiting sequence may preempt running ones of lower priority
  bool prefix_aware_admission = true; // hold back a prompt whose shared prefix is being computed
};

class Scheduler {
 public:
  // `budget` must outlive the scheduler. policy: nullptr = PriorityPolicy.
  Scheduler(SchedulerConfig config, BlockBudget& budget, std::unique_ptr<SchedulerPolicy> policy = nullptr);

  // A new (or preempted) sequence waits for admission.
  void enqueue(SchedSequence* s);
  // The sequence leaves for good (finished, cancelled, failed): out of every queue, blocks
  // released.
  void remove(SchedSequence* s);
  // Plans the next step into `plan` (cleared first). Positions the plan computes are already
  // allocated; after the forward pass the caller adds each entry's n to its n_computed (and, for
  // prefix-aware admission to pay, registers the newly full blocks in the prefix cache).
  void schedule(StepPlan& plan);

  int64_t running() const noexcept { return static_cast<int64_t>(running_.size()); }
  int64_t waiting() const noexcept { return static_cast<int64_t>(waiting_.size()); }
  const std::vector<SchedSequence*>& running_sequences() const noexcept { return running_; }
  int64_t preemptions() const noexcept { return preemptions_; }
  // Steps × sequences held back for a shared prefix in flight, since creation.
  int64_t held_back() const noexcept { return held_back_; }
  const SchedulerConfig& config() const noexcept { return config_; }
  // For tests: checks the bookkeeping between two steps (each running sequence is listed once,
  // flagged running and not queued; each waiting one flagged queued and not running; at most
  // max_sequences run). Returns "" when all hold, else a description of the first violation.
  std::string check() const;

 private:
  struct Order {  // the policy's admission order
    const SchedulerPolicy* policy;
    bool operator()(const SchedSequence* a, const SchedSequence* b) const { return policy->admits_before(*a, *b); }
  };
  // The largest n <= want that s can grow by now.
  int64_t fit(const SchedSequence& s, int64_t want) const;
  // The running sequence to preempt first among those not yet in the plan; nullptr when none.
  SchedSequence* pick_victim(const StepPlan& plan) const;
  // With priority preemption: preempts the first victim `w` may displace (taking it out of the
  // plan if it is there, its rows back into `budget`); false when there is none.
  bool displace_for(const SchedSequence& w, StepPlan& plan, int64_t& budget);
  void preempt(SchedSequence* s, StepPlan& plan);
  bool planned(const StepPlan& plan, const SchedSequence* s) const;
  // A running sequence still computing full blocks that w's prompt shares (and that w could take
  // from the prefix cache once computed); nullptr when none.
  const SchedSequence* prefix_in_flight(SchedSequence& w);
  // Extends s.block_hashes to cover min(n_blocks, full blocks of s.tokens) blocks.
  void hash_blocks(SchedSequence& s, int64_t n_blocks) const;

  SchedulerConfig config_;
  BlockBudget& budget_;
  std::unique_ptr<SchedulerPolicy> policy_;
  std::set<SchedSequence*, Order> waiting_;
  std::vector<SchedSequence*> running_;  // admission order
  uint64_t next_admission_ = 0;
  int64_t preemptions_ = 0;
  int64_t held_back_ = 0;
};

}  // namespace infer
