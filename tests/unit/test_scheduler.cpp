// The scheduler against a fake block budget (a counted pool and a prefix registry of whole-block
// token runs), driven step by step as the engine drives it: admission order, chunking, the block
// and sequence limits, preemption (for blocks; by priority, on and off) and prefix-aware
// admission (a prompt waits for the shared blocks another sequence is computing, then takes them
// from the cache). Expected values are worked out by hand from the rules in scheduler.hpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <span>
#include <vector>

#include "sched/block_budget.hpp"
#include "sched/scheduler.hpp"

using namespace infer;

namespace {

// A pool of `blocks` blocks; a sequence of p positions holds ceil(p / block_size) of them (cached
// prefixes too: the fake does not share physical blocks). Full blocks of computed positions are
// registered by commit(), as the engine registers them after each forward pass.
class FakeBudget final : public BlockBudget {
 public:
  FakeBudget(int block_size, int64_t blocks, bool shares = true) : bs_(block_size), free_(blocks), total_(blocks), shares_(shares) {}

  int block_size() const noexcept override { return bs_; }
  bool shares_prefixes() const noexcept override { return shares_; }
  int64_t take_cached_prefix(SchedSequence& s, std::span<const int32_t> tokens) override {
    REQUIRE(positions(s) == 0);
    if (!shares_ || tokens.empty()) return 0;
    const int64_t max_blocks = (static_cast<int64_t>(tokens.size()) - 1) / bs_;
    int64_t k = 0;
    while (k < max_blocks && registry_.count(std::vector<int32_t>(tokens.begin(), tokens.begin() + (k + 1) * bs_))) ++k;
    if (k == 0 || !append(s, k * bs_)) return 0;
    return k * bs_;
  }
  bool can_append(const SchedSequence& s, int64_t n) const override { return extra(s, n) <= free_; }
  bool append(SchedSequence& s, int64_t n) override {
    const int64_t e = extra(s, n);
    if (e > free_) return false;
    free_ -= e;
    held_[&s] += n;
    return true;
  }
  void release(SchedSequence& s) override {
    auto it = held_.find(&s);
    if (it == held_.end()) return;
    free_ += blocks_for(it->second);
    held_.erase(it);
  }

  // The engine's commit_full_blocks: the full blocks of s's computed positions are cached.
  void commit(const SchedSequence& s) {
    for (int64_t b = 1; b * bs_ <= s.n_computed; ++b) registry_.insert(std::vector<int32_t>(s.tokens.begin(), s.tokens.begin() + b * bs_));
  }
  int64_t positions(const SchedSequence& s) const {
    auto it = held_.find(&s);
    return it == held_.end() ? 0 : it->second;
  }
  int64_t used() const { return total_ - free_; }

 private:
  int64_t blocks_for(int64_t p) const { return (p + bs_ - 1) / bs_; }
  int64_t extra(const SchedSequence& s, int64_t n) const { return blocks_for(positions(s) + n) - blocks_for(positions(s)); }

  int bs_;
  int64_t free_, total_;
  bool shares_;
  std::map<const SchedSequence*, int64_t> held_;
  std::set<std::vector<int32_t>> registry_;
};

// The engine's side of a step: computed positions are counted and committed, a sequence whose
// chunk reaches its last token samples one (a token no other sequence has), and it ends after
// `generate` tokens.
struct Sim {
  FakeBudget budget;
  Scheduler sched;
  std::deque<SchedSequence> seqs;  // stable addresses
  std::map<uint64_t, int64_t> prompt_len, to_generate, generated;
  std::vector<uint64_t> finished;
  int64_t prompt_rows = 0;  // prompt positions computed, over all steps
  uint64_t next_arrival = 0;
  StepPlan plan;

  Sim(FakeBudget b, SchedulerConfig c) : budget(b), sched(c, budget) {}

  SchedSequence* add(uint64_t id, std::vector<int32_t> tokens, int priority = 0, int64_t generate = 2) {
    SchedSequence& s = seqs.emplace_back();
    s.id = id;
    s.priority = priority;
    s.arrival = next_arrival++;
    s.tokens = std::move(tokens);
    prompt_len[id] = static_cast<int64_t>(s.tokens.size());
    to_generate[id] = generate;
    sched.enqueue(&s);
    return &s;
  }
  SchedSequence* find(uint64_t id) {
    for (SchedSequence& s : seqs)
      if (s.id == id) return &s;
    return nullptr;
  }
  void step() {
    sched.schedule(plan);
    REQUIRE(sched.check() == "");
    for (const StepEntry& e : plan.entries) {
      SchedSequence* s = e.seq;
      REQUIRE(e.first == s->n_computed);
      REQUIRE(budget.positions(*s) == e.first + e.n);  // the plan's positions are allocated
      prompt_rows += std::max<int64_t>(0, std::min(e.first + e.n, prompt_len[s->id]) - e.first);
      s->n_computed += e.n;
      budget.commit(*s);
      if (!e.wants_logits) continue;
      REQUIRE(s->n_computed == static_cast<int64_t>(s->tokens.size()));
      if (++generated[s->id] >= to_generate[s->id]) {
        sched.remove(s);
        finished.push_back(s->id);
        REQUIRE(budget.positions(*s) == 0);
      } else {
        s->tokens.push_back(static_cast<int32_t>(100000 + s->id * 100 + static_cast<uint64_t>(generated[s->id])));
      }
    }
  }
  // Steps until nothing is left (at most `limit` steps).
  void run(int limit = 1000) {
    for (int i = 0; i < limit && (sched.running() > 0 || sched.waiting() > 0); ++i) step();
    REQUIRE(sched.running() == 0);
    REQUIRE(sched.waiting() == 0);
    REQUIRE(budget.used() == 0);
  }
  std::vector<uint64_t> ids(const std::vector<SchedSequence*>& v) const {
    std::vector<uint64_t> out;
    for (const SchedSequence* s : v) out.push_back(s->id);
    return out;
  }
  std::vector<uint64_t> planned_ids() const {
    std::vector<uint64_t> out;
    for (const StepEntry& e : plan.entries) out.push_back(e.seq->id);
    return out;
  }
  const StepEntry* entry(uint64_t id) const {
    for (const StepEntry& e : plan.entries)
      if (e.seq->id == id) return &e;
    return nullptr;
  }
};

std::vector<int32_t> tokens(int32_t from, int n) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[static_cast<size_t>(i)] = from + i;
  return t;
}

// A 12-token shared prefix (3 blocks of 4) and two tokens of the request's own.
std::vector<int32_t> behind_shared(int32_t own) {
  std::vector<int32_t> t = tokens(1, 12);
  t.push_back(own);
  t.push_back(own + 1);
  return t;
}

SchedulerConfig config(int64_t max_batch_tokens, int max_sequences) {
  SchedulerConfig c;
  c.max_batch_tokens = max_batch_tokens;
  c.max_sequences = max_sequences;
  return c;
}

}  // namespace

TEST_CASE("admission: higher priority first, then arrival, never more than max_sequences", "[sched]") {
  Sim sim(FakeBudget(4, 100), config(64, 2));
  sim.add(1, tokens(10, 3), 0, 1);
  sim.add(2, tokens(20, 3), 2, 1);
  sim.add(3, tokens(30, 3), 2, 1);
  sim.add(4, tokens(40, 3), 1, 1);
  sim.step();
  CHECK(sim.planned_ids() == std::vector<uint64_t>{2, 3});
  CHECK(sim.sched.running() == 0);  // both ended after their one token
  sim.step();
  CHECK(sim.planned_ids() == std::vector<uint64_t>{4, 1});
  CHECK(sim.finished == std::vector<uint64_t>{2, 3, 4, 1});
  sim.run();
}

TEST_CASE("admission: a request held back for a prefix in flight does not block the queue behind it", "[sched][prefix]") {
  Sim sim(FakeBudget(4, 100), config(16, 16));
  sim.add(1, behind_shared(100));
  sim.add(2, behind_shared(200));
  sim.add(3, tokens(50, 2));
  sim.step();  // 1 computes its 14 positions; 2 waits for them; 3 fills the rest of the budget
  CHECK(sim.planned_ids() == std::vector<uint64_t>{1, 3});
  CHECK(sim.ids(sim.plan.held) == std::vector<uint64_t>{2});
  sim.step();
  CHECK(sim.entry(2)->first == 12);
  sim.run();
}

TEST_CASE("chunking: a long prompt is split under the token budget, decodes first", "[sched]") {
  Sim sim(FakeBudget(4, 100), config(5, 4));
  sim.add(1, tokens(10, 2), 0, 10);
  sim.step();  // 1's prompt (2 rows)
  sim.add(2, tokens(20, 12), 0, 1);
  sim.step();
  REQUIRE(sim.plan.entries.size() == 2);
  CHECK(sim.plan.entries[0].seq->id == 1);
  CHECK(sim.plan.entries[0].n == 1);  // 1's decode first
  CHECK(sim.entry(2)->n == 4);
  CHECK_FALSE(sim.entry(2)->wants_logits);
  sim.step();
  CHECK(sim.entry(2)->first == 4);
  CHECK(sim.entry(2)->n == 4);
  CHECK_FALSE(sim.entry(2)->wants_logits);
  sim.step();
  CHECK(sim.entry(2)->first == 8);
  CHECK(sim.entry(2)->n == 4);
  CHECK(sim.entry(2)->wants_logits);  // the chunk reaches the prompt's last token
  CHECK(sim.plan.rows == 5);
  sim.run();
}

TEST_CASE("blocks run out in a decode: the lowest-priority, most recently admitted one is preempted", "[sched]") {
  // 6 blocks of 4. Three requests of 7 tokens (2 blocks each, all 6); the first decode that needs
  // a third block preempts the victim: priority 0 over 1, the later admitted of the two at 0.
  Sim sim(FakeBudget(4, 6), config(64, 4));
  sim.add(1, tokens(10, 7), 0, 4);
  sim.add(2, tokens(20, 7), 1, 4);
  sim.add(3, tokens(30, 7), 0, 4);
  sim.step();  // admitted 2, 1, 3; each samples its first token
  CHECK(sim.planned_ids() == std::vector<uint64_t>{2, 1, 3});
  CHECK(sim.budget.used() == 6);
  sim.step();  // the decodes at position 7 (8 positions) still fit 2 blocks each
  CHECK(sim.planned_ids() == std::vector<uint64_t>{2, 1, 3});
  CHECK(sim.plan.preempted.empty());
  sim.step();  // those at position 8 need a third block: 3 goes, then 1 fits
  CHECK(sim.ids(sim.plan.preempted) == std::vector<uint64_t>{3});
  CHECK(sim.planned_ids() == std::vector<uint64_t>{2, 1});
  CHECK(sim.find(3)->n_computed == 0);
  CHECK(sim.find(3)->preemptions == 1);
  sim.run();
  CHECK(sim.finished.size() == 3);
}

TEST_CASE("a sequence larger than the whole pool fails instead of stalling", "[sched]") {
  Sim sim(FakeBudget(4, 2), config(64, 4));
  sim.add(1, tokens(10, 8), 0, 10);  // 8 positions fill the pool; its first decode needs a 3rd block
  sim.step();
  REQUIRE(sim.plan.failed.empty());
  sim.step();
  CHECK(sim.ids(sim.plan.failed) == std::vector<uint64_t>{1});
}

TEST_CASE("priority preemption off: a higher-priority request waits for a slot", "[sched]") {
  Sim sim(FakeBudget(4, 100), config(64, 1));
  sim.add(1, tokens(10, 4), 0, 3);
  sim.step();
  sim.add(2, tokens(20, 4), 9, 1);
  sim.step();
  CHECK(sim.planned_ids() == std::vector<uint64_t>{1});
  CHECK(sim.plan.preempted.empty());
  sim.run();
  CHECK(sim.finished == std::vector<uint64_t>{1, 2});
  CHECK(sim.sched.preemptions() == 0);
}

TEST_CASE("priority preemption on: a waiting request displaces the lowest-priority, most recent running one", "[sched]") {
  SchedulerConfig c = config(64, 3);
  c.priority_preemption = true;
  Sim sim(FakeBudget(4, 100), c);
  sim.add(1, tokens(10, 4), 0, 10);
  sim.add(2, tokens(20, 4), 0, 10);
  sim.add(3, tokens(30, 4), 1, 10);
  sim.step();  // admitted 3, 1, 2 (priority, then arrival)
  CHECK(sim.planned_ids() == std::vector<uint64_t>{3, 1, 2});
  sim.add(4, tokens(40, 4), 0, 1);  // equal to the lowest running: waits
  sim.step();
  CHECK(sim.plan.preempted.empty());
  CHECK(sim.entry(4) == nullptr);
  sim.add(5, tokens(50, 4), 5, 1);  // higher: 2 goes (priority 0, admitted after 1), its decode row given back
  sim.step();
  CHECK(sim.ids(sim.plan.preempted) == std::vector<uint64_t>{2});
  CHECK(sim.planned_ids() == std::vector<uint64_t>{3, 1, 5});
  CHECK(sim.plan.rows == 1 + 1 + 4);
  CHECK(sim.budget.positions(*sim.find(2)) == 0);
  CHECK(sim.find(2)->in_queue);
  sim.run();
  CHECK(sim.sched.preemptions() == 1);
}

TEST_CASE("priority preemption on: a request that finds no blocks displaces a lower-priority one", "[sched]") {
  for (bool on : {false, true}) {
    INFO("priority_preemption " << on);
    SchedulerConfig c = config(64, 4);
    c.priority_preemption = on;
    Sim sim(FakeBudget(4, 4), c);
    sim.add(1, tokens(10, 14), 0, 3);  // 15 positions after its first token: 4 blocks, all of them
    sim.step();
    REQUIRE(sim.budget.used() == 4);
    sim.add(2, tokens(20, 4), 5, 1);
    sim.step();  // 1's decode fits its 4th block; 2 needs a block that is not there
    if (on) {
      CHECK(sim.ids(sim.plan.preempted) == std::vector<uint64_t>{1});
      CHECK(sim.planned_ids() == std::vector<uint64_t>{2});
    } else {
      CHECK(sim.plan.preempted.empty());
      CHECK(sim.planned_ids() == std::vector<uint64_t>{1});
    }
    sim.run();
    CHECK(sim.finished.size() == 2);
  }
}

TEST_CASE("prefix-aware admission: a burst behind one prefix computes it once", "[sched][prefix]") {
  // Blocks of 4; four prompts of 14 tokens share their first 12 (3 blocks); 8 rows a step.
  //   step 0: 1 admitted, rows 0-7 (the whole budget)
  //   step 1: 1 computes 8-13; the others share blocks 1 has not computed yet: held
  //   step 2: 1 decodes; 2, 3 and 4 take 12 positions from the cache and compute their last 2
  Sim sim(FakeBudget(4, 100), config(8, 16));
  for (uint64_t id = 1; id <= 4; ++id) sim.add(id, behind_shared(static_cast<int32_t>(100 + 10 * id)));
  sim.step();
  CHECK(sim.planned_ids() == std::vector<uint64_t>{1});
  sim.step();
  CHECK(sim.planned_ids() == std::vector<uint64_t>{1});
  CHECK(sim.ids(sim.plan.held) == std::vector<uint64_t>{2, 3, 4});
  sim.step();
  CHECK(sim.planned_ids() == std::vector<uint64_t>{1, 2, 3, 4});
  CHECK(sim.plan.held.empty());
  for (uint64_t id = 2; id <= 4; ++id) {
    CHECK(sim.entry(id)->first == 12);
    CHECK(sim.find(id)->cached_tokens == 12);
  }
  sim.run();
  CHECK(sim.prompt_rows == 14 + 3 * 2);
  CHECK(sim.find(1)->cached_tokens == 0);
  CHECK(sim.sched.held_back() == 3);
}

TEST_CASE("prefix-aware admission: the same cache hits whatever step each request arrives in", "[sched][prefix]") {
  for (int spread = 0; spread <= 3; ++spread) {
    INFO("a request arrives every " << spread << " steps");
    Sim sim(FakeBudget(4, 100), config(8, 16));
    for (uint64_t id = 1; id <= 4; ++id) {
      sim.add(id, behind_shared(static_cast<int32_t>(100 + 10 * id)));
      for (int k = 0; k < spread; ++k) sim.step();
    }
    sim.run();
    CHECK(sim.find(1)->cached_tokens == 0);
    for (uint64_t id = 2; id <= 4; ++id) CHECK(sim.find(id)->cached_tokens == 12);
    CHECK(sim.prompt_rows == 14 + 3 * 2);
  }
}

TEST_CASE("prefix-aware admission off: requests admitted together compute the shared blocks again", "[sched][prefix]") {
  SchedulerConfig c = config(8, 16);
  c.prefix_aware_admission = false;
  Sim sim(FakeBudget(4, 100), c);
  for (uint64_t id = 1; id <= 4; ++id) sim.add(id, behind_shared(static_cast<int32_t>(100 + 10 * id)));
  //   step 0: 1 computes 0-7 (the whole budget)
  //   step 1: 1 computes 8-13; 2 is admitted with the 2 blocks cached after step 0, computes 8-9
  //   step 2: 1 decodes; 2 computes 10-13 (block 2 again); 3 and 4 find all 3 blocks cached
  sim.step();
  sim.step();
  CHECK(sim.planned_ids() == std::vector<uint64_t>{1, 2});
  CHECK(sim.entry(2)->first == 8);
  CHECK(sim.entry(2)->n == 2);
  sim.run();
  CHECK(sim.find(2)->cached_tokens == 8);
  CHECK(sim.find(3)->cached_tokens == 12);
  CHECK(sim.find(4)->cached_tokens == 12);
  CHECK(sim.prompt_rows == 14 + 6 + 2 + 2);
  CHECK(sim.sched.held_back() == 0);
}

TEST_CASE("prefix-aware admission: no hold when prefixes are not shared or nothing is in flight", "[sched][prefix]") {
  SECTION("the budget does not share prefixes (prefix caching off)") {
    Sim sim(FakeBudget(4, 100, /*shares=*/false), config(8, 16));
    sim.add(1, behind_shared(100));
    sim.add(2, behind_shared(200));
    sim.step();
    sim.step();
    CHECK(sim.planned_ids() == std::vector<uint64_t>{1, 2});
    sim.run();
    CHECK(sim.sched.held_back() == 0);
  }
  SECTION("a prompt that shares less than a full block") {
    Sim sim(FakeBudget(4, 100), config(32, 16));
    sim.add(1, tokens(1, 11));
    sim.add(2, {1, 2, 3, 99, 5, 6, 7, 8});   // differs inside block 0: shares no full block
    sim.add(3, {1, 2, 3, 4, 50, 51});         // shares block 0, which 1 is computing
    sim.step();
    CHECK(sim.planned_ids() == std::vector<uint64_t>{1, 2});
    CHECK(sim.ids(sim.plan.held) == std::vector<uint64_t>{3});
    sim.step();
    CHECK(sim.entry(3)->first == 4);
    sim.run();
  }
  SECTION("the shared prefix is at most the request's last token: nothing to take from the cache") {
    Sim sim(FakeBudget(4, 100), config(16, 16));
    sim.add(1, tokens(1, 12));
    sim.add(2, tokens(1, 4));  // its one full block ends at its last token, which it must compute
    sim.step();
    CHECK(sim.planned_ids() == std::vector<uint64_t>{1, 2});
    sim.run();
  }
  SECTION("a scored prompt's cache limit bounds what it waits for") {
    Sim sim(FakeBudget(4, 100), config(8, 16));
    sim.add(1, behind_shared(100));
    SchedSequence* s = sim.add(2, behind_shared(200));
    s->cache_limit = 1;  // scores from token 1: the cache may serve nothing
    sim.step();
    sim.step();
    CHECK(sim.entry(2) != nullptr);
    CHECK(sim.entry(2)->first == 0);
    sim.run();
  }
}

TEST_CASE("prefix-aware admission: cancelling the sequence in flight releases its waiters", "[sched][prefix]") {
  // 4 blocks of 4. 9 (8 tokens) takes 2 blocks, so 1 gets only 8 of its 14 positions (2 blocks):
  // 2 and 3 wait for 1's third shared block. 1 is cancelled: 2 takes the 2 registered blocks and
  // computes the third itself, 3 now waits for 2, and takes all 3 blocks.
  Sim sim(FakeBudget(4, 4), config(20, 16));
  sim.add(9, tokens(50, 8), 0, 1);
  for (uint64_t id = 1; id <= 3; ++id) sim.add(id, behind_shared(static_cast<int32_t>(100 + 10 * id)));
  sim.step();
  CHECK(sim.planned_ids() == std::vector<uint64_t>{9, 1});
  CHECK(sim.entry(1)->n == 8);
  CHECK(sim.ids(sim.plan.held) == std::vector<uint64_t>{2, 3});
  sim.sched.remove(sim.find(1));  // cancelled between steps, as the engine does
  sim.step();
  CHECK(sim.planned_ids() == std::vector<uint64_t>{2});
  CHECK(sim.entry(2)->first == 8);
  CHECK(sim.entry(2)->n == 6);
  CHECK(sim.ids(sim.plan.held) == std::vector<uint64_t>{3});
  sim.run();
  CHECK(sim.find(2)->cached_tokens == 8);
  CHECK(sim.find(3)->cached_tokens == 12);
}

TEST_CASE("prefix-aware admission: a preempted sequence in flight stops holding and the waiter takes over", "[sched][prefix]") {
  // One slot, priority preemption on. 1 (priority -1) is computing the shared prefix when 9
  // (priority 9, unrelated) and 2 (priority 0, behind the same prefix) arrive: 9 displaces 1, and
  // 2, no longer held by anyone, goes next with the 2 blocks 1 registered; 1 then waits for 2.
  SchedulerConfig c = config(8, 1);
  c.priority_preemption = true;
  Sim sim(FakeBudget(4, 100), c);
  sim.add(1, behind_shared(100), -1, 2);
  sim.step();  // 1 computes 0-7
  sim.add(9, tokens(50, 4), 9, 1);
  sim.add(2, behind_shared(200), 0, 2);
  sim.step();
  CHECK(sim.ids(sim.plan.preempted) == std::vector<uint64_t>{1});
  CHECK(sim.planned_ids() == std::vector<uint64_t>{9});
  CHECK(sim.plan.held.empty());
  sim.step();  // 9 ended with its first token
  CHECK(sim.planned_ids() == std::vector<uint64_t>{2});
  CHECK(sim.entry(2)->first == 8);
  CHECK(sim.ids(sim.plan.held) == std::vector<uint64_t>{1});
  int64_t first_of_1 = -1;
  for (int i = 0; i < 20 && first_of_1 < 0; ++i) {
    sim.step();
    if (const StepEntry* e = sim.entry(1)) first_of_1 = e->first;
  }
  CHECK(first_of_1 == 12);
  sim.run();
  CHECK(sim.find(1)->preemptions == 1);
  CHECK(sim.find(2)->cached_tokens == 8);
  CHECK(sim.finished.size() == 3);
}
