// The continuous-batching scheduler: which sequences run in the next step, and how many of their
// tokens. It asks the KV-cache manager for blocks, never the model.
//
// One step, under a token budget (max_batch_tokens) and a sequence limit (max_sequences):
//   1. decodes: every running sequence whose prompt is done gets one row, by priority then
//      arrival; when blocks run out the lowest-priority, most recently admitted sequence is
//      preempted (its blocks released; it waits again, keeping its place by arrival, and its
//      tokens are recomputed when it is readmitted);
//   2. prefill chunks of running sequences still in their prompt, then
//   3. waiting sequences admitted by priority, then arrival (first come first served; the queue
//      head is never skipped), each taking the longest cached prefix of its tokens first;
//      a prompt longer than what is left of the budget gets a chunk now and the rest later, so a
//      long prompt never stalls the decodes of others.
// If nothing at all could be scheduled while sequences hold blocks, the lowest-priority, most
// recently admitted one is preempted so that the others can move; a sequence that cannot make
// progress even alone (the pool is smaller than it) is reported as failed.
//
// Not thread-safe: the engine's worker owns it.
#pragma once

#include <cstdint>
#include <set>
#include <vector>

#include "kv/kv_manager.hpp"

namespace infer {

// What the scheduler needs to know of a sequence; the engine owns it.
struct SchedSequence {
  uint64_t id = 0;
  int priority = 0;            // higher first
  uint64_t arrival = 0;        // submit order, kept across preemption
  uint64_t admitted = 0;       // admission order of the current run (most recent = largest)
  std::vector<int32_t> tokens; // prompt + generated so far
  int64_t n_computed = 0;      // positions whose K/V are in the cache
  KvSequence kv;
  bool running = false;
  bool in_queue = false;       // waiting
  int64_t preemptions = 0;
  int64_t cached_tokens = 0;   // positions the last admission took from the prefix cache
  bool ever_admitted = false;
  int64_t cache_limit = -1;    // prompt tokens the prefix-cache lookup may cover (-1: all); a scored
                               // prompt's scored rows must be computed, not taken from the cache
  void* owner = nullptr;       // the engine's request record
};

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
  int64_t rows = 0;
  void clear() {
    entries.clear();
    preempted.clear();
    failed.clear();
    rows = 0;
  }
};

struct SchedulerConfig {
  int64_t max_batch_tokens = 512;
  int max_sequences = 16;
};

class Scheduler {
 public:
  Scheduler(SchedulerConfig config, KvCacheManager& kv) : config_(config), kv_(kv) {}

  // A new (or preempted) sequence waits for admission.
  void enqueue(SchedSequence* s);
  // The sequence leaves for good (finished, cancelled, failed): out of every queue, blocks
  // released.
  void remove(SchedSequence* s);
  // Plans the next step into `plan` (cleared first). Positions the plan computes are already
  // allocated; after the forward pass the caller adds each entry's n to its n_computed.
  void schedule(StepPlan& plan);

  int64_t running() const noexcept { return static_cast<int64_t>(running_.size()); }
  int64_t waiting() const noexcept { return static_cast<int64_t>(waiting_.size()); }
  const std::vector<SchedSequence*>& running_sequences() const noexcept { return running_; }
  int64_t preemptions() const noexcept { return preemptions_; }

 private:
  struct Order {  // priority first, then arrival
    bool operator()(const SchedSequence* a, const SchedSequence* b) const {
      if (a->priority != b->priority) return a->priority > b->priority;
      return a->arrival < b->arrival;
    }
  };
  // The largest n <= want that seq can grow by now.
  int64_t fit(const SchedSequence& s, int64_t want) const;
  // Preempts the running sequence preempted first (lowest priority, most recently admitted) among
  // those not yet in the plan; nullptr when there is none.
  SchedSequence* pick_victim(const StepPlan& plan) const;
  void preempt(SchedSequence* s, StepPlan& plan);
  bool planned(const StepPlan& plan, const SchedSequence* s) const;

  SchedulerConfig config_;
  KvCacheManager& kv_;
  std::set<SchedSequence*, Order> waiting_;
  std::vector<SchedSequence*> running_;  // admission order
  uint64_t next_admission_ = 0;
  int64_t preemptions_ = 0;
};

}  // namespace infer
