#include "sched/scheduler.hpp"

#include <algorithm>
#include <span>

namespace infer {

void Scheduler::enqueue(SchedSequence* s) {
  s->running = false;
  s->in_queue = true;
  waiting_.insert(s);
}

void Scheduler::remove(SchedSequence* s) {
  if (s->in_queue) waiting_.erase(s);
  if (s->running) running_.erase(std::find(running_.begin(), running_.end(), s));
  s->in_queue = s->running = false;
  kv_.release(s->kv);
}

int64_t Scheduler::fit(const SchedSequence& s, int64_t want) const {
  if (want <= 0) return 0;
  if (kv_.can_append(s.kv, want)) return want;
  int64_t lo = 0, hi = want;  // can_append(lo) holds, can_append(hi) does not
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (kv_.can_append(s.kv, mid) ? lo : hi) = mid;
  }
  return lo;
}

bool Scheduler::planned(const StepPlan& plan, const SchedSequence* s) const {
  for (const StepEntry& e : plan.entries)
    if (e.seq == s) return true;
  return false;
}

SchedSequence* Scheduler::pick_victim(const StepPlan& plan) const {
  SchedSequence* victim = nullptr;
  for (SchedSequence* s : running_) {
    if (planned(plan, s)) continue;
    if (!victim || s->priority < victim->priority || (s->priority == victim->priority && s->admitted > victim->admitted))
      victim = s;
  }
  return victim;
}

void Scheduler::preempt(SchedSequence* s, StepPlan& plan) {
  running_.erase(std::find(running_.begin(), running_.end(), s));
  kv_.release(s->kv);
  s->n_computed = 0;
  ++s->preemptions;
  ++preemptions_;
  enqueue(s);
  plan.preempted.push_back(s);
}

void Scheduler::schedule(StepPlan& plan) {
  plan.clear();
  // A pass can end with nothing planned although sequences hold blocks (several half-done
  // prompts filling the pool): then one is preempted and the pass runs again.
  for (size_t attempt = 0;; ++attempt) {
    int64_t budget = config_.max_batch_tokens;
    std::vector<SchedSequence*> order = running_;
    std::stable_sort(order.begin(), order.end(), Order{});

    // 1. One row for each running sequence past its prompt.
    for (SchedSequence* s : order) {
      if (budget == 0) break;
      if (!s->running || s->n_computed + 1 != static_cast<int64_t>(s->tokens.size())) continue;
      while (!kv_.can_append(s->kv, 1)) {
        SchedSequence* victim = pick_victim(plan);
        if (!victim) break;
        preempt(victim, plan);
        if (victim == s) break;
      }
      if (!s->running || !kv_.append(s->kv, 1)) continue;
      plan.entries.push_back({s, s->n_computed, 1, true});
      --budget;
    }

    // 2. Prompt chunks of running sequences still in their prompt.
    for (SchedSequence* s : order) {
      if (budget == 0) break;
      if (!s->running || planned(plan, s)) continue;
      const int64_t remaining = static_cast<int64_t>(s->tokens.size()) - s->n_computed;
      const int64_t n = fit(*s, std::min(remaining, budget));
      if (n <= 0 || !kv_.append(s->kv, n)) continue;
      plan.entries.push_back({s, s->n_computed, n, s->n_computed + n == static_cast<int64_t>(s->tokens.size())});
      budget -= n;
    }

    // 3. Admission: the queue's head first, never skipped.
    while (budget > 0 && !waiting_.empty() && static_cast<int>(running_.size()) < config_.max_sequences) {
      SchedSequence* s = *waiting_.begin();
      std::span<const int32_t> lookup(s->tokens);
      if (s->cache_limit >= 0) lookup = lookup.first(std::min<size_t>(lookup.size(), static_cast<size_t>(s->cache_limit)));
      const int64_t cached = kv_.match_prefix(s->kv, lookup);
      s->n_computed = cached;
      const int64_t remaining = static_cast<int64_t>(s->tokens.size()) - s->n_computed;
      const int64_t n = fit(*s, std::min(remaining, budget));
      if (n <= 0 || !kv_.append(s->kv, n)) {
        kv_.release(s->kv);
        s->n_computed = 0;
        break;
      }
      waiting_.erase(waiting_.begin());
      s->in_queue = false;
      s->running = true;
      s->admitted = next_admission_++;
      if (!s->ever_admitted) s->cached_tokens = cached;
      s->ever_admitted = true;
      running_.push_back(s);
      plan.entries.push_back({s, s->n_computed, n, s->n_computed + n == static_cast<int64_t>(s->tokens.size())});
      budget -= n;
    }

    if (!plan.entries.empty() || running_.empty()) break;
    // Nothing could move although sequences hold blocks.
    if (running_.size() == 1 && waiting_.empty()) {
      // It cannot grow even with the whole pool to itself.
      plan.failed.push_back(running_.front());
      break;
    }
    if (running_.size() == 1) {
      // Alone and stuck while others wait: it cannot fit the pool at all.
      plan.failed.push_back(running_.front());
      break;
    }
    if (attempt > running_.size() + 1) break;  // defensive: never loop forever
    preempt(pick_victim(plan), plan);
  }
  for (const StepEntry& e : plan.entries) plan.rows += e.n;
}

}  // namespace infer
