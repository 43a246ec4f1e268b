#include "sched/scheduler.hpp"

#include <algorithm>
#include <span>

#include "core/block_hash.hpp"

namespace infer {

Scheduler::Scheduler(SchedulerConfig config, BlockBudget& budget, std::unique_ptr<SchedulerPolicy> policy)
    : config_(config),
      budget_(budget),
      policy_(policy ? std::move(policy) : std::make_unique<PriorityPolicy>()),
      waiting_(Order{policy_.get()}) {}

void Scheduler::enqueue(SchedSequence* s) {
  s->running = false;
  s->in_queue = true;
  waiting_.insert(s);
}

void Scheduler::remove(SchedSequence* s) {
  if (s->in_queue) waiting_.erase(s);
  if (s->running) running_.erase(std::find(running_.begin(), running_.end(), s));
  s->in_queue = s->running = false;
  budget_.release(*s);
}

int64_t Scheduler::fit(const SchedSequence& s, int64_t want) const {
  if (want <= 0) return 0;
  if (budget_.can_append(s, want)) return want;
  int64_t lo = 0, hi = want;  // can_append(lo) holds, can_append(hi) does not
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (budget_.can_append(s, mid) ? lo : hi) = mid;
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
    if (!victim || policy_->preempts_before(*s, *victim)) victim = s;
  }
  return victim;
}

bool Scheduler::displace_for(const SchedSequence& w, StepPlan& plan, int64_t& budget) {
  SchedSequence* victim = nullptr;
  for (SchedSequence* s : running_)
    if (policy_->may_displace(w, *s) && (!victim || policy_->preempts_before(*s, *victim))) victim = s;
  if (!victim) return false;
  // Its rows of this step are not computed: the positions go back with its blocks.
  for (auto e = plan.entries.begin(); e != plan.entries.end(); ++e)
    if (e->seq == victim) {
      budget += e->n;
      plan.entries.erase(e);
      break;
    }
  preempt(victim, plan);
  return true;
}

void Scheduler::preempt(SchedSequence* s, StepPlan& plan) {
  running_.erase(std::find(running_.begin(), running_.end(), s));
  budget_.release(*s);
  s->n_computed = 0;
  ++s->preemptions;
  ++preemptions_;
  enqueue(s);
  plan.preempted.push_back(s);
}

void Scheduler::hash_blocks(SchedSequence& s, int64_t n_blocks) const {
  const auto bs = static_cast<size_t>(budget_.block_size());
  const size_t want = std::min(static_cast<size_t>(n_blocks), s.tokens.size() / bs);
  while (s.block_hashes.size() < want) {
    const size_t i = s.block_hashes.size();
    const uint64_t parent = i == 0 ? 0 : s.block_hashes[i - 1];
    s.block_hashes.push_back(chain_block_hash(parent, 0, std::span<const int32_t>(s.tokens).subspan(i * bs, bs)));
  }
}

const SchedSequence* Scheduler::prefix_in_flight(SchedSequence& w) {
  if (!config_.prefix_aware_admission || !budget_.shares_prefixes() || running_.empty()) return nullptr;
  const int64_t bs = budget_.block_size();
  int64_t lookup = static_cast<int64_t>(w.tokens.size());
  if (w.cache_limit >= 0) lookup = std::min(lookup, w.cache_limit);
  // The prefix cache serves at most this many blocks of w (its last token is always computed).
  const int64_t max_blocks = (lookup - 1) / bs;
  if (max_blocks <= 0) return nullptr;
  hash_blocks(w, max_blocks);
  for (SchedSequence* o : running_) {
    const int64_t computed_blocks = o->n_computed / bs;
    const int64_t limit = std::min<int64_t>(max_blocks, static_cast<int64_t>(o->tokens.size()) / bs);
    if (limit <= computed_blocks) continue;  // every full block w could share is in the cache already
    hash_blocks(*o, limit);
    int64_t shared = 0;
    while (shared < limit && o->block_hashes[static_cast<size_t>(shared)] == w.block_hashes[static_cast<size_t>(shared)]) ++shared;
    if (shared > computed_blocks) return o;
  }
  return nullptr;
}

std::string Scheduler::check() const {
  auto name = [](const SchedSequence* s) { return "sequence " + std::to_string(s->id); };
  if (static_cast<int64_t>(running_.size()) > config_.max_sequences)
    return std::to_string(running_.size()) + " sequences run, more than max_sequences";
  for (size_t i = 0; i < running_.size(); ++i) {
    const SchedSequence* s = running_[i];
    if (!s->running || s->in_queue) return name(s) + " is in the running list but not flagged running only";
    if (std::find(running_.begin() + static_cast<ptrdiff_t>(i) + 1, running_.end(), s) != running_.end())
      return name(s) + " is in the running list twice";
    if (waiting_.count(const_cast<SchedSequence*>(s))) return name(s) + " is both running and waiting";
  }
  for (const SchedSequence* s : waiting_)
    if (!s->in_queue || s->running) return name(s) + " is in the waiting queue but not flagged waiting only";
  return "";
}

void Scheduler::schedule(StepPlan& plan) {
  plan.clear();
  // A pass can end with nothing planned although sequences hold blocks (several half-done
  // prompts filling the pool): then one is preempted and the pass runs again.
  for (size_t attempt = 0;; ++attempt) {
    int64_t budget = config_.max_batch_tokens;
    plan.held.clear();
    std::vector<SchedSequence*> order = running_;
    std::stable_sort(order.begin(), order.end(), Order{policy_.get()});

    // 1. One row for each running sequence past its prompt.
    for (SchedSequence* s : order) {
      if (budget == 0) break;
      if (!s->running || s->n_computed + 1 != static_cast<int64_t>(s->tokens.size())) continue;
      while (!budget_.can_append(*s, 1)) {
        SchedSequence* victim = pick_victim(plan);
        if (!victim) break;
        if (victim == s && running_.size() == 1) {
          // Alone, it cannot grow even with the whole pool: preempting it would only bring it back.
          plan.failed.push_back(s);
          break;
        }
        preempt(victim, plan);
        if (victim == s) break;
      }
      if (!s->running || !budget_.append(*s, 1)) continue;
      plan.entries.push_back({s, s->n_computed, 1, true});
      --budget;
    }

    // 2. Prompt chunks of running sequences still in their prompt.
    for (SchedSequence* s : order) {
      if (budget == 0) break;
      if (!s->running || planned(plan, s)) continue;
      const int64_t remaining = static_cast<int64_t>(s->tokens.size()) - s->n_computed;
      const int64_t n = fit(*s, std::min(remaining, budget));
      if (n <= 0 || !budget_.append(*s, n)) continue;
      plan.entries.push_back({s, s->n_computed, n, s->n_computed + n == static_cast<int64_t>(s->tokens.size())});
      budget -= n;
    }

    // 3. Admission in the policy's order. A sequence held back for a prefix in flight is passed
    // over; one that finds no slot or no blocks stops the pass (after displacing lower-priority
    // running ones, with priority preemption).
    auto it = waiting_.begin();
    while (budget > 0 && it != waiting_.end()) {
      if (static_cast<int>(running_.size()) >= config_.max_sequences && !config_.priority_preemption) break;
      SchedSequence* s = *it;
      if (prefix_in_flight(*s)) {
        plan.held.push_back(s);
        ++it;
        continue;
      }
      if (static_cast<int>(running_.size()) >= config_.max_sequences) {
        if (!displace_for(*s, plan, budget)) break;
        it = waiting_.find(s);
        continue;
      }
      std::span<const int32_t> lookup(s->tokens);
      if (s->cache_limit >= 0) lookup = lookup.first(std::min<size_t>(lookup.size(), static_cast<size_t>(s->cache_limit)));
      const int64_t cached = budget_.take_cached_prefix(*s, lookup);
      s->n_computed = cached;
      const int64_t remaining = static_cast<int64_t>(s->tokens.size()) - s->n_computed;
      const int64_t n = fit(*s, std::min(remaining, budget));
      if (n <= 0 || !budget_.append(*s, n)) {
        budget_.release(*s);
        s->n_computed = 0;
        if (config_.priority_preemption && displace_for(*s, plan, budget)) {
          it = waiting_.find(s);
          continue;
        }
        break;
      }
      it = waiting_.erase(it);
      s->in_queue = false;
      s->running = true;
      s->admitted = next_admission_++;
      if (!s->ever_admitted) s->cached_tokens = cached;
      s->ever_admitted = true;
      running_.push_back(s);
      plan.entries.push_back({s, s->n_computed, n, s->n_computed + n == static_cast<int64_t>(s->tokens.size())});
      budget -= n;
    }

    if (!plan.entries.empty() || running_.empty() || !plan.failed.empty()) break;
    // Nothing could move although sequences hold blocks.
    if (running_.size() == 1) {
      // Alone and stuck (whether or not others wait): it cannot grow even with the whole pool.
      plan.failed.push_back(running_.front());
      break;
    }
    if (attempt > running_.size() + 1) break;  // defensive: never loop forever
    preempt(pick_victim(plan), plan);
  }
  held_back_ += static_cast<int64_t>(plan.held.size());
  for (const StepEntry& e : plan.entries) plan.rows += e.n;
}

}  // namespace infer
