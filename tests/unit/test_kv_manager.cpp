// KvCacheManager: reference-counted blocks, the prefix cache with its LRU eviction, windowed pools.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "kv/kv_manager.hpp"

using namespace infer;

namespace {

constexpr int kBs = 4;  // positions per block in every config below

// Two full-attention layers, 2 heads of 8, blocks of 4 positions in f16:
// K and V x 2 layers x 2 heads x 4 slots x 8 dims x 2 bytes = 512 bytes per block.
KvCacheConfig full_shape(int64_t n_blocks) {
  KvCacheConfig c;
  c.n_layer = 2;
  c.n_kv_heads = 2;
  c.head_dim = 8;
  c.block_size = kBs;
  c.kv_type = DType::f16;
  c.budget_bytes = 512ull * static_cast<uint64_t>(n_blocks);
  return c;
}

// Four layers, the first three windowed (window 8): 256 bytes per full block, 768 per windowed
// block; one sequence stepping by at most 4 needs ceil((8 - 1 + 4) / 4) + 1 = 4 windowed blocks.
KvCacheConfig mixed_shape(int64_t full_blocks, int max_sequences = 1) {
  KvCacheConfig c = full_shape(0);
  c.n_layer = 4;
  c.groups = kv_cache_groups(4, {1, 1, 1, 0}, 8);  // group 0: layer 3; group 1: layers 0-2, windowed
  c.max_step_tokens = 4;
  c.max_sequences = max_sequences;
  c.budget_bytes = 256ull * static_cast<uint64_t>(full_blocks) + 768ull * 4 * static_cast<uint64_t>(max_sequences);
  return c;
}

// Two layers, both windowed (window 8): the whole budget is the windowed pool, 512 bytes a block.
KvCacheConfig windowed_only_shape(int64_t window_blocks) {
  KvCacheConfig c = full_shape(window_blocks);
  c.groups = kv_cache_groups(2, {1, 1}, 8);  // one group, windowed
  c.max_step_tokens = 4;
  return c;
}

KvCacheManager make(const KvCacheConfig& c, bool prefix_cache = true, uint64_t fingerprint = 0x5eed) {
  auto m = KvCacheManager::create(c, fingerprint, prefix_cache);
  REQUIRE(m.ok());
  return std::move(m).value();
}

// n consecutive token ids from `first`.
std::vector<int32_t> run(int32_t first, int n) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[static_cast<size_t>(i)] = first + i;
  return t;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::string check(const KvCacheManager& m, const std::vector<const KvSequence*>& live) { return m.check(live); }

// The manager's windowed group (every windowed config below has one), and its table of s.
int window_group(const KvCacheManager& m) {
  for (int g = 0; g < m.n_groups(); ++g)
    if (m.spec(g).windowed()) return g;
  FAIL("no windowed group");
  return -1;
}
const std::vector<int32_t>& window_table(const KvCacheManager& m, const KvSequence& s) {
  return s.kv.tables[static_cast<size_t>(window_group(m))];
}

// Takes what the cache holds of `tokens`, computes the rest and commits it; returns the reused positions.
int64_t prefill(KvCacheManager& m, KvSequence& s, const std::vector<int32_t>& tokens) {
  const int64_t hit = m.match_prefix(s, tokens);
  REQUIRE(m.append(s, static_cast<int64_t>(tokens.size()) - hit));
  m.commit_full_blocks(s, tokens);
  return hit;
}

// The invariants plus stats() against an independent count of what the live tables hold.
void require_consistent(const KvCacheManager& m, const std::vector<const KvSequence*>& live) {
  REQUIRE(check(m, live) == "");
  const KvManagerStats st = m.stats();
  REQUIRE(st.n_groups == m.n_groups());
  int64_t used = 0, cached = 0, free = 0, total = 0;
  for (int g = 0; g < m.n_groups(); ++g) {
    std::set<int32_t> held;
    for (const KvSequence* s : live)
      for (int32_t b : s->kv.tables[static_cast<size_t>(g)])
        if (b >= 0) held.insert(b);
    const KvGroupStats& gs = st.groups[static_cast<size_t>(g)];
    REQUIRE(gs.used_blocks == static_cast<int64_t>(held.size()));
    REQUIRE(gs.cached_blocks >= 0);
    REQUIRE(gs.free_blocks >= 0);
    REQUIRE(gs.used_blocks + gs.cached_blocks + gs.free_blocks == gs.total_blocks);
    used += gs.used_blocks;
    cached += gs.cached_blocks;
    free += gs.free_blocks;
    total += gs.total_blocks;
  }
  REQUIRE(st.used_blocks == used);
  REQUIRE(st.cached_blocks == cached);
  REQUIRE(st.free_blocks == free);
  REQUIRE(st.total_blocks == total);
}

bool same_kv(const KvSequence& a, const KvSequence& b) {
  return a.kv.tables == b.kv.tables && a.kv.n_tokens == b.kv.n_tokens &&
         a.block_keys == b.block_keys && a.cached_tokens == b.cached_tokens;
}

}  // namespace

TEST_CASE("the manager's pool holds budget / block bytes blocks, all free at first", "[kv_manager]") {
  const KvCacheManager m = make(full_shape(10));
  const KvManagerStats s = m.stats();
  CHECK(s.total_blocks == 10);
  CHECK(s.free_blocks == 10);
  CHECK(s.used_blocks == 0);
  CHECK(s.cached_blocks == 0);
  CHECK(s.n_groups == 1);
  CHECK(s.evictions == 0);
  CHECK(m.block_size() == kBs);
  CHECK(m.prefix_cache());
  CHECK(check(m, {}) == "");

  KvCacheConfig slack = full_shape(10);
  slack.budget_bytes += 511;  // not a whole block more
  CHECK(make(slack).stats().total_blocks == 10);

  auto none = KvCacheManager::create(full_shape(0), 1, true);
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().code() == StatusCode::out_of_range);

  const KvManagerStats w = make(mixed_shape(20)).stats();
  REQUIRE(w.n_groups == 2);
  CHECK(w.groups[0].total_blocks == 20);  // full attention
  CHECK(w.groups[1].total_blocks == 4);   // the window's
  CHECK(w.groups[1].free_blocks == 4);
  CHECK(w.total_blocks == 24);
  const KvManagerStats wo = make(windowed_only_shape(6)).stats();
  REQUIRE(wo.n_groups == 1);  // no full-attention layer, no full-attention pool
  CHECK(wo.groups[0].total_blocks == 6);
  CHECK(make(windowed_only_shape(6)).spec(0).windowed());
  CHECK(make(windowed_only_shape(6)).sequence_capacity() == INT64_MAX);
  CHECK(make(mixed_shape(20)).sequence_capacity() == 20 * kBs);
}

TEST_CASE("append is all or nothing: a refused append changes nothing, release returns every block", "[kv_manager]") {
  KvCacheManager m = make(full_shape(5));
  KvSequence a, b;
  REQUIRE(m.can_append(a, 5));
  REQUIRE(m.append(a, 5));  // 2 blocks
  CHECK(a.kv.n_tokens == 5);
  CHECK(a.kv.tables[0].size() == 2);
  REQUIRE(m.append(a, 3));  // fills the second block
  CHECK(a.kv.tables[0].size() == 2);
  require_consistent(m, {&a});

  // 13 positions need 4 blocks; 3 are free.
  const KvSequence b_before = b;
  const KvManagerStats before = m.stats();
  CHECK_FALSE(m.can_append(b, 13));
  CHECK_FALSE(m.append(b, 13));
  CHECK(same_kv(b, b_before));
  CHECK(m.stats().free_blocks == before.free_blocks);
  CHECK(m.stats().used_blocks == before.used_blocks);
  require_consistent(m, {&a, &b});

  REQUIRE(m.can_append(b, 12));
  REQUIRE(m.append(b, 12));
  CHECK(m.stats().free_blocks == 0);
  CHECK(m.stats().used_blocks == 5);
  std::set<int32_t> ids(a.kv.tables[0].begin(), a.kv.tables[0].end());
  ids.insert(b.kv.tables[0].begin(), b.kv.tables[0].end());
  CHECK(ids.size() == 5);  // no block handed out twice
  require_consistent(m, {&a, &b});

  // A full pool refuses even one more position in a new block, but not one in a block held.
  const KvSequence a_before = a;
  CHECK_FALSE(m.can_append(a, 1));
  CHECK_FALSE(m.append(a, 1));
  CHECK(same_kv(a, a_before));
  REQUIRE(m.append(a, 0));
  CHECK(same_kv(a, a_before));

  // Nothing was committed, so the blocks go back free rather than cached.
  m.release(a);
  CHECK(a.kv.tables[0].empty());
  CHECK(a.kv.n_tokens == 0);
  require_consistent(m, {&b});
  m.release(b);
  require_consistent(m, {});
  CHECK(m.stats().free_blocks == 5);
  CHECK(m.stats().cached_blocks == 0);
  CHECK(m.stats().evictions == 0);
}

TEST_CASE("a committed prompt is reused up to the last whole block before its final token", "[kv_manager]") {
  KvCacheManager m = make(full_shape(16));
  const std::vector<int32_t> p = run(100, 24);  // 6 full blocks
  KvSequence a;
  CHECK(prefill(m, a, p) == 0);
  CHECK(a.block_keys.size() == 6);
  const std::vector<int32_t> a_blocks = a.kv.tables[0];
  const std::vector<uint64_t> a_keys = a.block_keys;
  m.release(a);
  require_consistent(m, {});
  CHECK(m.stats().cached_blocks == 6);
  CHECK(m.stats().free_blocks == 10);

  int64_t queries = 1, query_tokens = 24, hit_tokens = 0;  // a's own lookup
  // Every prefix of p, and p plus one more token (which reuses all 6 blocks).
  for (int len = 1; len <= 25; ++len) {
    INFO("prompt of " << len << " tokens");
    const std::vector<int32_t> q = len <= 24 ? run(100, len) : concat(p, {7});
    const int64_t expected = static_cast<int64_t>((len - 1) / kBs) * kBs;
    const size_t n_blocks = static_cast<size_t>(expected / kBs);
    KvSequence s;
    const int64_t hit = m.match_prefix(s, q);
    CHECK(hit == expected);
    CHECK(s.kv.n_tokens == expected);
    CHECK(s.cached_tokens == expected);
    CHECK(s.kv.tables[0] == std::vector<int32_t>(a_blocks.begin(), a_blocks.begin() + static_cast<ptrdiff_t>(n_blocks)));
    CHECK(s.block_keys == std::vector<uint64_t>(a_keys.begin(), a_keys.begin() + static_cast<ptrdiff_t>(n_blocks)));
    CHECK(m.stats().used_blocks == static_cast<int64_t>(n_blocks));
    CHECK(m.stats().cached_blocks == 6 - static_cast<int64_t>(n_blocks));
    require_consistent(m, {&s});
    queries += 1;
    query_tokens += len;
    hit_tokens += expected;
    // The rest of the prompt computes into new blocks: the last token always has one.
    REQUIRE(m.append(s, len - hit));
    CHECK(s.kv.tables[0].size() == static_cast<size_t>((len + kBs - 1) / kBs));
    m.release(s);
    require_consistent(m, {});
  }
  // A prompt of exactly k blocks reuses k - 1 of them.
  for (int k = 1; k <= 6; ++k) {
    KvSequence s;
    CHECK(m.match_prefix(s, run(100, k * kBs)) == (k - 1) * kBs);
    m.release(s);
    queries += 1;
    query_tokens += k * kBs;
    hit_tokens += (k - 1) * kBs;
  }
  const KvManagerStats st = m.stats();
  CHECK(st.prefix_queries == queries);
  CHECK(st.prefix_query_tokens == query_tokens);
  CHECK(st.prefix_hit_tokens == hit_tokens);
  CHECK(st.cached_blocks == 6);  // queries and their private tails evicted nothing
  CHECK(st.evictions == 0);
  // An empty prompt reuses nothing.
  KvSequence e;
  CHECK(m.match_prefix(e, std::span<const int32_t>()) == 0);
  CHECK(e.kv.tables[0].empty());
}

TEST_CASE("a prompt differing in one token of block j reuses only the blocks before j", "[kv_manager]") {
  KvCacheManager m = make(full_shape(20));
  const std::vector<int32_t> p = concat(run(100, 24), {7});  // 6 full blocks and a last token
  KvSequence a;
  prefill(m, a, p);
  // The full blocks: the seventh (the last token alone) is never registered, and freed.
  const std::vector<int32_t> a_blocks(a.kv.tables[0].begin(), a.kv.tables[0].begin() + 6);
  m.release(a);
  REQUIRE(m.stats().cached_blocks == 6);

  for (int j = 0; j < 6; ++j)
    for (int offset : {0, kBs - 1}) {
      INFO("block " << j << ", slot " << offset);
      std::vector<int32_t> q = p;
      q[static_cast<size_t>(j * kBs + offset)] = 5000;  // blocks after j keep their tokens
      KvSequence s;
      CHECK(m.match_prefix(s, q) == j * kBs);
      CHECK(s.kv.tables[0] == std::vector<int32_t>(a_blocks.begin(), a_blocks.begin() + j));
      m.release(s);
      require_consistent(m, {});
    }

  // Computing and committing the divergent prompt caches it beside the original.
  std::vector<int32_t> q = p;
  q[2 * kBs + 1] = 5000;
  KvSequence s;
  CHECK(prefill(m, s, q) == 2 * kBs);
  const std::vector<int32_t> s_blocks = s.kv.tables[0];
  m.release(s);
  require_consistent(m, {});
  KvSequence t;
  CHECK(m.match_prefix(t, q) == 6 * kBs);
  CHECK(t.kv.tables[0] == std::vector<int32_t>(s_blocks.begin(), s_blocks.begin() + 6));
  CHECK(std::equal(a_blocks.begin(), a_blocks.begin() + 2, t.kv.tables[0].begin()));
  for (size_t i = 2; i < 6; ++i) CHECK(std::find(a_blocks.begin(), a_blocks.end(), t.kv.tables[0][i]) == a_blocks.end());
  m.release(t);
  KvSequence u;
  CHECK(m.match_prefix(u, p) == 6 * kBs);  // the original is still whole
  CHECK(u.kv.tables[0] == a_blocks);
  m.release(u);
  CHECK(m.stats().evictions == 0);
}

TEST_CASE("block keys follow the tokens, the parent's key and the model fingerprint, not block ids", "[kv_manager]") {
  KvCacheManager m1 = make(full_shape(12), true, 1);
  KvCacheManager m1b = make(full_shape(12), true, 1);
  KvCacheManager m2 = make(full_shape(12), true, 2);
  const std::vector<int32_t> p = concat(run(100, 16), {7});
  KvSequence s1, s1b, s2, pad;
  prefill(m1, s1, p);
  REQUIRE(m1b.append(pad, 2 * kBs));  // the same prompt lands in other blocks of m1b
  prefill(m1b, s1b, p);
  prefill(m2, s2, p);
  REQUIRE(s1.block_keys.size() == 4);
  CHECK(s1b.kv.tables[0] != s1.kv.tables[0]);
  CHECK(s1b.block_keys == s1.block_keys);
  for (size_t i = 0; i < 4; ++i) CHECK(s2.block_keys[i] != s1.block_keys[i]);
  CHECK(std::set<uint64_t>(s1.block_keys.begin(), s1.block_keys.end()).size() == 4);

  // Blocks 1..3 hold the same tokens, but their parents differ: so do their keys.
  std::vector<int32_t> q = p;
  q[0] = 5000;
  KvSequence t;
  prefill(m1, t, q);
  for (size_t i = 0; i < 4; ++i) CHECK(t.block_keys[i] != s1.block_keys[i]);
  // The same block content at another position (another parent) does not match either.
  KvSequence shifted;
  CHECK(m1.match_prefix(shifted, concat(run(104, 12), {7})) == 0);
  require_consistent(m1, {&s1, &t, &shifted});
}

namespace {
// A 9-token prompt through match / append / commit / release / match: no key, no hit, no cached
// block, every block free again; both queries counted.
void require_caches_nothing(KvCacheManager& m) {
  const std::vector<int32_t> p = concat(run(100, 8), {7});
  KvSequence a, b;
  CHECK(m.match_prefix(a, p) == 0);
  REQUIRE(m.append(a, 9));
  m.commit_full_blocks(a, p);
  CHECK(a.block_keys.empty());
  require_consistent(m, {&a});
  m.release(a);
  require_consistent(m, {});
  CHECK(m.stats().cached_blocks == 0);
  CHECK(m.stats().free_blocks == m.stats().total_blocks);
  CHECK(m.match_prefix(b, p) == 0);
  CHECK(b.kv.tables[0].empty());
  CHECK(b.kv.n_tokens == 0);
  CHECK(b.cached_tokens == 0);
  const KvManagerStats st = m.stats();
  CHECK(st.prefix_queries == 2);
  CHECK(st.prefix_query_tokens == 18);
  CHECK(st.prefix_hit_tokens == 0);
}
}  // namespace

TEST_CASE("without prefix caching nothing is registered, matched or cached", "[kv_manager]") {
  KvCacheManager m = make(full_shape(8), false);
  CHECK_FALSE(m.prefix_cache());
  require_caches_nothing(m);
  CHECK(m.stats().free_blocks == 8);
}

TEST_CASE("sequences sharing a cached prefix each hold a reference, and the blocks are cached once both are gone",
          "[kv_manager]") {
  KvCacheManager m = make(full_shape(10));
  const std::vector<int32_t> p = concat(run(100, 12), {7});  // 3 full blocks and a last token
  KvSequence a, b, c;
  CHECK(prefill(m, a, p) == 0);
  REQUIRE(a.kv.tables[0].size() == 4);
  require_consistent(m, {&a});
  CHECK(m.stats().used_blocks == 4);

  // b matches the blocks a holds and is still using.
  CHECK(m.match_prefix(b, p) == 12);
  CHECK(b.kv.tables[0] == std::vector<int32_t>(a.kv.tables[0].begin(), a.kv.tables[0].begin() + 3));
  CHECK(m.stats().used_blocks == 4);
  require_consistent(m, {&a, &b});
  REQUIRE(m.append(b, 1));
  CHECK(std::find(a.kv.tables[0].begin(), a.kv.tables[0].end(), b.kv.tables[0][3]) == a.kv.tables[0].end());
  m.commit_full_blocks(b, p);
  CHECK(m.stats().used_blocks == 5);
  require_consistent(m, {&a, &b});
  // c shares the first block only.
  std::vector<int32_t> q = p;
  q[kBs] = 5000;
  CHECK(prefill(m, c, q) == kBs);
  CHECK(c.kv.tables[0][0] == a.kv.tables[0][0]);
  require_consistent(m, {&a, &b, &c});

  const std::vector<int32_t> shared = b.kv.tables[0];
  m.release(a);  // a's own last block (not full, never registered) is freed; the shared ones stay used
  require_consistent(m, {&b, &c});
  CHECK(m.stats().cached_blocks == 0);
  m.release(b);
  require_consistent(m, {&c});
  CHECK(m.stats().cached_blocks == 2);  // shared[1], shared[2]; shared[0] is c's too
  m.release(c);
  require_consistent(m, {});
  const KvManagerStats st = m.stats();
  CHECK(st.used_blocks == 0);
  CHECK(st.cached_blocks == 3 + 2);  // a's three full blocks and c's two of its own
  KvSequence d;
  CHECK(m.match_prefix(d, p) == 12);
  CHECK(d.kv.tables[0] == std::vector<int32_t>(shared.begin(), shared.begin() + 3));
}

TEST_CASE("check() fails when the live list leaves out or repeats a sequence", "[kv_manager]") {
  KvCacheManager m = make(full_shape(10));
  KvSequence a, b;
  prefill(m, a, concat(run(100, 8), {7}));
  CHECK(m.match_prefix(b, concat(run(100, 8), {8})) == 8);
  REQUIRE(check(m, {&a, &b}) == "");
  CHECK(check(m, {&a}) != "");
  CHECK(check(m, {&b}) != "");
  CHECK(check(m, {}) != "");
  CHECK(check(m, {&a, &b, &b}) != "");

  KvCacheManager w = make(mixed_shape(10));
  KvSequence s;
  REQUIRE(w.append(s, 3));
  REQUIRE(check(w, {&s}) == "");
  CHECK(check(w, {}) != "");

  KvCacheManager wo = make(windowed_only_shape(4));
  KvSequence t;
  REQUIRE(wo.append(t, 3));
  REQUIRE(check(wo, {&t}) == "");
  CHECK(check(wo, {}) != "");  // only windowed blocks are held
}

TEST_CASE("eviction takes the least recently used chain first, and a chain's tail before its head",
          "[kv_manager]") {
  KvCacheManager m = make(full_shape(6));
  const std::vector<int32_t> pa = run(0, 8), pb = run(100, 8);  // two blocks each
  const std::vector<int32_t> qa = concat(pa, {7}), qb = concat(pb, {7});
  KvSequence a, b, c;
  prefill(m, a, pa);
  const std::vector<int32_t> ab = a.kv.tables[0];
  m.release(a);
  prefill(m, b, pb);
  const std::vector<int32_t> bb = b.kv.tables[0];
  m.release(b);
  require_consistent(m, {});
  REQUIRE(m.stats().cached_blocks == 4);
  REQUIRE(m.stats().free_blocks == 2);

  const auto hits = [&](const std::vector<int32_t>& q, std::vector<int32_t> want) {
    KvSequence s;
    const int64_t hit = m.match_prefix(s, q);
    CHECK(s.kv.tables[0] == want);
    require_consistent(m, {&s, &c});
    m.release(s);  // touched: now the most recently used
    return hit;
  };

  // Free blocks go first; the third is a's tail (a is older than b).
  REQUIRE(m.can_append(c, 12));
  REQUIRE(m.append(c, 12));
  CHECK(m.stats().evictions == 1);
  CHECK(std::find(c.kv.tables[0].begin(), c.kv.tables[0].end(), ab[1]) != c.kv.tables[0].end());
  require_consistent(m, {&c});
  CHECK(hits(qa, {ab[0]}) == 4);  // a's head outlived its tail, and is now the newest

  // The least recently used is now b's chain: tail, then head.
  REQUIRE(m.append(c, 4));
  CHECK(m.stats().evictions == 2);
  CHECK(c.kv.tables[0].back() == bb[1]);
  CHECK(hits(qb, {bb[0]}) == 4);
  CHECK(hits(qa, {ab[0]}) == 4);  // a's head, used after b's: b's head goes first
  REQUIRE(m.append(c, 4));
  CHECK(m.stats().evictions == 3);
  CHECK(c.kv.tables[0].back() == bb[0]);
  CHECK(hits(qb, {}) == 0);
  CHECK(hits(qa, {ab[0]}) == 4);
  REQUIRE(m.append(c, 4));
  CHECK(m.stats().evictions == 4);
  CHECK(c.kv.tables[0].back() == ab[0]);
  CHECK(hits(qa, {}) == 0);

  // Every block is c's now: nothing free or evictable is left.
  const KvSequence c_before = c;
  CHECK_FALSE(m.can_append(c, 1));
  CHECK_FALSE(m.append(c, 1));
  CHECK(same_kv(c, c_before));
  CHECK(m.stats().evictions == 4);
  m.release(c);
  require_consistent(m, {});
  CHECK(m.stats().free_blocks == 6);
}

TEST_CASE("a long chain is evicted one block at a time from its tail, so its prefixes stay reusable",
          "[kv_manager]") {
  KvCacheManager m = make(full_shape(4));
  const std::vector<int32_t> p = run(0, 12);
  const std::vector<int32_t> q = concat(p, {7});
  KvSequence a, c;
  prefill(m, a, p);
  const std::vector<int32_t> ab = a.kv.tables[0];
  m.release(a);
  REQUIRE(m.stats().cached_blocks == 3);

  const auto hit = [&]() {
    KvSequence s;
    const int64_t h = m.match_prefix(s, q);
    CHECK(s.kv.tables[0] == std::vector<int32_t>(ab.begin(), ab.begin() + h / kBs));
    m.release(s);
    return h;
  };
  REQUIRE(m.append(c, 8));  // the free block, then a's third
  CHECK(m.stats().evictions == 1);
  CHECK(hit() == 8);
  REQUIRE(m.append(c, 4));
  CHECK(m.stats().evictions == 2);
  CHECK(hit() == 4);
  REQUIRE(m.append(c, 4));
  CHECK(m.stats().evictions == 3);
  CHECK(hit() == 0);
  require_consistent(m, {&c});
}

TEST_CASE("a block whose content another block already caches stays private and is freed on release",
          "[kv_manager]") {
  KvCacheManager m = make(full_shape(8));
  const std::vector<int32_t> p = run(100, 8);
  const std::vector<int32_t> q = concat(p, {7});
  KvSequence s1, s2;
  // Both compute the prompt before either commits.
  CHECK(m.match_prefix(s1, p) == 0);
  CHECK(m.match_prefix(s2, p) == 0);
  REQUIRE(m.append(s1, 8));
  REQUIRE(m.append(s2, 8));
  m.commit_full_blocks(s1, p);
  m.commit_full_blocks(s2, p);
  CHECK(s2.block_keys == s1.block_keys);  // same content, same keys
  CHECK(s2.kv.tables[0] != s1.kv.tables[0]);
  require_consistent(m, {&s1, &s2});
  const std::vector<int32_t> first = s1.kv.tables[0];
  const std::vector<uint64_t> first_keys = s1.block_keys;

  m.release(s2);
  require_consistent(m, {&s1});
  CHECK(m.stats().cached_blocks == 0);
  CHECK(m.stats().free_blocks == 6);
  m.release(s1);
  require_consistent(m, {});
  CHECK(m.stats().cached_blocks == 2);
  CHECK(m.stats().free_blocks == 6);
  KvSequence s0;
  CHECK(m.match_prefix(s0, q) == 8);  // the registered copy is the one reused
  CHECK(s0.kv.tables[0] == first);
  m.release(s0);

  // The key is held by a cached block: recomputing the content makes private copies again, but
  // the block after them, new content, is registered under its chained key.
  const std::vector<int32_t> longer = concat(p, run(200, 4));
  KvSequence s3;
  REQUIRE(m.append(s3, 12));
  m.commit_full_blocks(s3, longer);
  CHECK(std::vector<uint64_t>(s3.block_keys.begin(), s3.block_keys.begin() + 2) == first_keys);
  require_consistent(m, {&s3});
  const int32_t third = s3.kv.tables[0][2];
  m.release(s3);
  require_consistent(m, {});
  CHECK(m.stats().cached_blocks == 3);  // s1's two and s3's third
  CHECK(m.stats().free_blocks == 5);
  KvSequence s4;
  CHECK(m.match_prefix(s4, concat(longer, {9})) == 12);
  CHECK(s4.kv.tables[0] == std::vector<int32_t>{first[0], first[1], third});
  require_consistent(m, {&s4});
}

namespace {
// After s grew from n0 positions: every windowed block a query among the new positions sees is
// held, and every block wholly before the window of the first new position (at n0) is handed back.
void require_window_kept(const KvCacheManager& m, const KvSequence& s, int64_t n0) {
  const int64_t n1 = s.kv.n_tokens;
  const std::vector<int32_t>& table = window_table(m, s);
  REQUIRE(static_cast<int64_t>(table.size()) == (n1 + kBs - 1) / kBs);
  const int64_t first_seen = std::max<int64_t>(0, n0 - m.spec(window_group(m)).sliding_window + 1);
  for (int64_t i = 0; i < static_cast<int64_t>(table.size()); ++i) {
    INFO("windowed block " << i << " after growing " << n0 << " -> " << n1);
    if (i >= first_seen / kBs)
      REQUIRE(table[static_cast<size_t>(i)] >= 0);
    else
      REQUIRE(table[static_cast<size_t>(i)] == -1);
  }
}

void append_windowed(KvCacheManager& m, KvSequence& s, int64_t n) {
  const int64_t n0 = s.kv.n_tokens;
  REQUIRE(m.can_append(s, n));
  REQUIRE(m.append(s, n));
  REQUIRE(s.kv.n_tokens == n0 + n);
  require_window_kept(m, s, n0);
}
}  // namespace

TEST_CASE("windowed blocks go back as the window passes, so a long sequence fits a small windowed pool",
          "[kv_manager]") {
  SECTION("some layers windowed") {
    KvCacheManager m = make(mixed_shape(20));
    REQUIRE(m.stats().groups[1].total_blocks == 4);
    KvSequence s;
    for (int step = 0; step < 20; ++step) {  // 80 positions: 20 windowed blocks over time
      append_windowed(m, s, 4);
      require_consistent(m, {&s});
    }
    CHECK(s.kv.tables[0].size() == 20);
    CHECK(std::count(s.kv.tables[1].begin(), s.kv.tables[1].end(), -1) >= 16);
    // The full pool is spent: refused, and the windowed blocks the window passed are not handed back either.
    const KvSequence before = s;
    CHECK_FALSE(m.can_append(s, 1));
    CHECK_FALSE(m.append(s, 1));
    CHECK(same_kv(s, before));
    require_consistent(m, {&s});
    m.release(s);
    require_consistent(m, {});
    CHECK(m.stats().groups[0].free_blocks == 20);
    CHECK(m.stats().groups[1].free_blocks == 4);
  }
  SECTION("every layer windowed") {
    KvCacheManager m = make(windowed_only_shape(4));
    KvSequence s;
    for (int step = 0; step < 100; ++step) {  // 250 positions in 4 blocks
      append_windowed(m, s, step % 4 + 1);
      require_consistent(m, {&s});
    }
    CHECK(m.n_groups() == 1);
    CHECK(s.kv.n_tokens == 250);
    // One step of 17 positions needs 5 blocks at once: more than the pool.
    KvSequence t;
    m.release(s);
    CHECK_FALSE(m.can_append(t, 17));
    CHECK_FALSE(m.append(t, 17));
    CHECK(t.kv.tables[0].empty());
    append_windowed(m, t, 16);
    // A second sequence gets nothing while t holds the pool; t itself moves on.
    KvSequence u;
    CHECK_FALSE(m.can_append(u, 1));
    CHECK_FALSE(m.append(u, 1));
    append_windowed(m, t, 4);  // blocks 0 and 1 go back first, block 4 is new
    append_windowed(m, u, 4);  // one of them
    require_consistent(m, {&t, &u});
  }
}

TEST_CASE("on windowed models can_append agrees with append over random steps, and the pools stay consistent",
          "[kv_manager]") {
  for (const KvCacheConfig& c : {mixed_shape(40, 2), windowed_only_shape(8)}) {
    INFO(c.n_layer << " layers");
    KvCacheManager m = make(c);
    std::mt19937 rng(1234);
    std::vector<KvSequence> seqs(3);
    int refused = 0, granted = 0;
    for (int op = 0; op < 3000; ++op) {
      INFO("op " << op);
      KvSequence& s = seqs[rng() % seqs.size()];
      if (rng() % 8 == 0 || s.kv.n_tokens > 60) {
        m.release(s);
      } else {
        const int64_t n = static_cast<int64_t>(rng() % 12) + 1;
        const KvSequence before = s;
        const bool can = m.can_append(s, n);
        const bool did = m.append(s, n);
        REQUIRE(can == did);
        if (did) {
          ++granted;
          REQUIRE(s.kv.n_tokens == before.kv.n_tokens + n);
          require_window_kept(m, s, before.kv.n_tokens);
        } else {
          ++refused;
          REQUIRE(same_kv(s, before));
        }
      }
      require_consistent(m, {&seqs[0], &seqs[1], &seqs[2]});
    }
    CHECK(refused > 0);  // the pools really ran short
    CHECK(granted > refused);
    for (KvSequence& s : seqs) m.release(s);
    require_consistent(m, {});
    CHECK(m.stats().free_blocks == m.stats().total_blocks);
  }
}

TEST_CASE("random traffic over shared prompts keeps every invariant and never reuses a block's stale content",
          "[kv_manager]") {
  // One full-attention group, then a full-attention and a windowed group (window 8) together.
  for (const KvCacheConfig& config : {full_shape(24), mixed_shape(24, 6)}) {
  INFO(config.n_layer << " layers");
  KvCacheManager m = make(config);
  const int n_groups = m.n_groups();
  std::mt19937 rng(20240607);
  const auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };

  // Three prompt stems; the second shares its first two blocks with the first.
  std::vector<std::vector<int32_t>> stems = {run(1000, 24), run(2000, 24), run(3000, 24)};
  std::copy(stems[0].begin(), stems[0].begin() + 8, stems[1].begin());

  // Per group, what each block holds, as the sequence that wrote it put it there (-1: not
  // written since taken).
  std::vector<std::vector<std::vector<int32_t>>> shadow;
  for (int g = 0; g < n_groups; ++g)
    shadow.emplace_back(static_cast<size_t>(m.stats().groups[static_cast<size_t>(g)].total_blocks), std::vector<int32_t>(kBs, -1));
  struct Live {
    KvSequence seq;
    std::vector<int32_t> tokens;  // prompt, then generated tokens
  };
  std::vector<std::unique_ptr<Live>> live;
  const auto live_list = [&]() {
    std::vector<const KvSequence*> v;
    for (const auto& l : live) v.push_back(&l->seq);
    return v;
  };
  const auto holders = [&](size_t g, int32_t b) {
    int n = 0;
    for (const auto& l : live) n += static_cast<int>(std::count(l->seq.kv.tables[g].begin(), l->seq.kv.tables[g].end(), b));
    return n;
  };
  // Every block a sequence holds has the sequence's tokens at its positions below n_tokens.
  const auto require_content = [&](const Live& l) {
    for (size_t g = 0; g < static_cast<size_t>(n_groups); ++g)
      for (size_t i = 0; i < l.seq.kv.tables[g].size(); ++i) {
        const int32_t b = l.seq.kv.tables[g][i];
        if (b < 0) continue;
        for (size_t j = 0; j < kBs && i * kBs + j < static_cast<size_t>(l.seq.kv.n_tokens); ++j)
          REQUIRE(shadow[g][static_cast<size_t>(b)][j] == l.tokens[i * kBs + j]);
      }
  };

  int64_t queries = 0, query_tokens = 0, hit_tokens = 0, refused = 0, truncated = 0, window_hits = 0;
  for (int op = 0; op < 4000; ++op) {
    INFO("op " << op);
    const int kind = pick(11);
    if (kind < 3 && live.size() < 6) {
      // A new sequence: a stem's first tokens, then a few from a small vocabulary (so unrelated
      // prompts often repeat a block's content).
      auto l = std::make_unique<Live>();
      const auto& stem = stems[static_cast<size_t>(pick(3))];
      l->tokens.assign(stem.begin(), stem.begin() + pick(25));
      for (int i = 0, n = 1 + pick(8); i < n; ++i) l->tokens.push_back(pick(3));
      const int64_t len = static_cast<int64_t>(l->tokens.size());
      const int64_t hit = m.match_prefix(l->seq, l->tokens);
      REQUIRE(hit % kBs == 0);
      REQUIRE(hit <= (len - 1) / kBs * kBs);
      REQUIRE(l->seq.kv.n_tokens == hit);
      REQUIRE(l->seq.cached_tokens == hit);
      REQUIRE(static_cast<int64_t>(l->seq.block_keys.size()) == hit / kBs);
      for (size_t g = 0; g < static_cast<size_t>(n_groups); ++g) {
        const auto& table = l->seq.kv.tables[g];
        REQUIRE(static_cast<int64_t>(table.size()) == hit / kBs);
        // A windowed group holds exactly the blocks a query at `hit` sees; the rest are -1.
        const int w = m.spec(static_cast<int>(g)).sliding_window;
        const int64_t first = w > 0 ? std::max<int64_t>(0, hit - w + 1) / kBs : 0;
        for (int64_t i = 0; i < static_cast<int64_t>(table.size()); ++i)
          REQUIRE((table[static_cast<size_t>(i)] >= 0) == (i >= first));
        if (w > 0 && first > 0) ++window_hits;
      }
      // Each reused block holds exactly the prompt's tokens at its positions.
      require_content(*l);
      queries += 1;
      query_tokens += len;
      hit_tokens += hit;
      live.push_back(std::move(l));
    } else if (kind < 8 && !live.empty()) {
      Live& l = *live[static_cast<size_t>(pick(static_cast<int>(live.size())))];
      const int64_t n = 1 + pick(10);
      const int64_t n0 = l.seq.kv.n_tokens;
      while (static_cast<int64_t>(l.tokens.size()) < n0 + n) l.tokens.push_back(pick(3));
      const KvSequence before = l.seq;
      const bool can = m.can_append(l.seq, n);
      const bool did = m.append(l.seq, n);
      REQUIRE(can == did);
      if (!did) {
        REQUIRE(same_kv(l.seq, before));
        ++refused;
      } else {
        for (size_t g = 0; g < static_cast<size_t>(n_groups); ++g) {
          const auto& was = before.kv.tables[g];
          const auto& now = l.seq.kv.tables[g];
          for (size_t i = 0; i < was.size(); ++i) REQUIRE((now[i] == was[i] || now[i] == -1));  // only dropped
          for (size_t i = was.size(); i < now.size(); ++i) shadow[g][static_cast<size_t>(now[i])].assign(kBs, -1);
          // The model writes the new positions: only into blocks this sequence holds alone.
          for (int64_t p = n0; p < n0 + n; ++p) {
            const int32_t b = now[static_cast<size_t>(p / kBs)];
            REQUIRE(b >= 0);
            REQUIRE(holders(g, b) == 1);
            shadow[g][static_cast<size_t>(b)][static_cast<size_t>(p % kBs)] = l.tokens[static_cast<size_t>(p)];
          }
        }
        m.commit_full_blocks(l.seq, l.tokens);
        REQUIRE(static_cast<int64_t>(l.seq.block_keys.size()) == l.seq.kv.n_tokens / kBs);
      }
      // Long sequences end, so the pool keeps turning over.
      if (l.seq.kv.n_tokens > 40) {
        m.release(l.seq);
        live.erase(std::find_if(live.begin(), live.end(), [&](const auto& x) { return x.get() == &l; }));
      }
    } else if (kind < 9 && !live.empty()) {
      // Back up a few positions (as a rejected draft would): the kept positions stay readable.
      Live& l = *live[static_cast<size_t>(pick(static_cast<int>(live.size())))];
      const int64_t n = std::max<int64_t>(0, l.seq.kv.n_tokens - pick(9));
      const KvSequence before = l.seq;
      if (m.truncate(l.seq, n)) {
        ++truncated;
        REQUIRE(l.seq.kv.n_tokens == n);
        REQUIRE(static_cast<int64_t>(l.seq.block_keys.size()) <= n / kBs);
        for (size_t g = 0; g < static_cast<size_t>(n_groups); ++g) {
          const auto& was = before.kv.tables[g];
          const auto& now = l.seq.kv.tables[g];
          REQUIRE(static_cast<int64_t>(now.size()) == (n + kBs - 1) / kBs);
          for (size_t i = 0; i < now.size(); ++i) {
            if (now[i] == was[i]) continue;
            // Only a shared last block is replaced, by a copy of its content.
            REQUIRE(i + 1 == now.size());
            REQUIRE(n % kBs != 0);
            shadow[g][static_cast<size_t>(now[i])] = shadow[g][static_cast<size_t>(was[i])];
          }
        }
        l.tokens.resize(static_cast<size_t>(n));
        require_content(l);
      } else {
        REQUIRE(same_kv(l.seq, before));
      }
    } else if (!live.empty()) {
      const size_t i = static_cast<size_t>(pick(static_cast<int>(live.size())));
      m.release(live[i]->seq);
      const KvSequence& s = live[i]->seq;
      for (const auto& table : s.kv.tables) REQUIRE(table.empty());
      REQUIRE(s.kv.n_tokens == 0);
      REQUIRE(s.block_keys.empty());
      REQUIRE(s.cached_tokens == 0);
      live.erase(live.begin() + static_cast<ptrdiff_t>(i));
    }
    require_consistent(m, live_list());
  }

  const KvManagerStats mid = m.stats();
  CHECK(mid.prefix_queries == queries);
  CHECK(mid.prefix_query_tokens == query_tokens);
  CHECK(mid.prefix_hit_tokens == hit_tokens);
  // The run exercised what it is meant to: reuse, eviction, refusal and truncation (and, with a
  // window, hits whose first blocks the window had dropped).
  CHECK(hit_tokens > 0);
  CHECK(mid.evictions > 0);
  CHECK(refused > 0);
  CHECK(truncated > 0);
  if (n_groups > 1) CHECK(window_hits > 0);

  for (auto& l : live) m.release(l->seq);
  live.clear();
  require_consistent(m, {});
  const KvManagerStats end = m.stats();
  CHECK(end.used_blocks == 0);
  CHECK(end.cached_blocks + end.free_blocks == end.total_blocks);
  }
}

TEST_CASE("truncate keeps the first positions' blocks, copies a shared last block and unregisters a private one",
          "[kv_manager]") {
  KvCacheManager m = make(full_shape(10));
  const std::vector<int32_t> p = concat(run(100, 12), {7});
  KvSequence a, b;
  prefill(m, a, p);  // 4 blocks, 3 registered
  const std::vector<int32_t> blocks = a.kv.tables[0];
  REQUIRE(m.truncate(a, 13));  // no change
  CHECK(a.kv.tables[0] == blocks);
  REQUIRE(m.truncate(a, 9));   // blocks 0..2; block 2 keeps positions 8 only
  CHECK(a.kv.n_tokens == 9);
  CHECK(a.kv.tables[0] == std::vector<int32_t>(blocks.begin(), blocks.begin() + 3));
  CHECK(a.block_keys.size() == 2);
  require_consistent(m, {&a});
  // Block 2 will be written again: it left the prefix cache.
  KvSequence probe;
  CHECK(m.match_prefix(probe, p) == 8);
  m.release(probe);
  m.commit_full_blocks(a, p);
  REQUIRE(m.append(a, 3));
  m.commit_full_blocks(a, p);  // block 2 is full again, with p's tokens: registered once more
  CHECK(m.match_prefix(b, p) == 12);
  require_consistent(m, {&a, &b});
  // b shares blocks 0..2 with a: truncating b into block 2 gives b a copy, a keeps its block.
  const int64_t free_before = m.stats().free_blocks;
  REQUIRE(m.truncate(b, 10));
  CHECK(b.kv.tables[0][0] == a.kv.tables[0][0]);
  CHECK(b.kv.tables[0][1] == a.kv.tables[0][1]);
  CHECK(b.kv.tables[0][2] != a.kv.tables[0][2]);
  CHECK(m.stats().free_blocks == free_before - 1);
  require_consistent(m, {&a, &b});
  KvSequence c;
  CHECK(m.match_prefix(c, p) == 12);  // a's block 2 is still cached under its key
  CHECK(c.kv.tables[0] == std::vector<int32_t>(a.kv.tables[0].begin(), a.kv.tables[0].begin() + 3));
  REQUIRE(m.truncate(c, 0));
  CHECK(c.kv.tables[0].empty());
  m.release(a);
  m.release(b);
  require_consistent(m, {&c});
  m.release(c);
  CHECK(m.stats().free_blocks + m.stats().cached_blocks == 10);
}

TEST_CASE("truncating into positions a windowed group has dropped is refused", "[kv_manager]") {
  KvCacheManager m = make(mixed_shape(20));
  KvSequence s;
  for (int step = 0; step < 6; ++step) REQUIRE(m.append(s, 4));  // 24 positions; the first blocks dropped
  const KvSequence before = s;
  CHECK_FALSE(m.truncate(s, 4));  // a query at 4 would need positions 0..3, long gone
  CHECK(same_kv(s, before));
  REQUIRE(m.truncate(s, 22));  // still inside what the window keeps
  CHECK(s.kv.n_tokens == 22);
  CHECK(s.kv.tables[0].size() == 6);
  require_consistent(m, {&s});
  m.release(s);
  CHECK(m.stats().groups[0].free_blocks == 20);
  CHECK(m.stats().groups[1].free_blocks == 4);
}

namespace {
// Computes `tokens` in steps of `step` positions, committing after each (as the engine does);
// returns the block the windowed group (1) held at each block position before the window passed it.
std::vector<int32_t> prefill_steps(KvCacheManager& m, KvSequence& s, const std::vector<int32_t>& tokens, int64_t step) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  std::vector<int32_t> held;
  for (int64_t done = s.kv.n_tokens; done < n; done = s.kv.n_tokens) {
    REQUIRE(m.append(s, std::min(step, n - done)));
    m.commit_full_blocks(s, tokens);
    held.resize(s.kv.tables[1].size(), -1);
    for (size_t i = 0; i < held.size(); ++i)
      if (s.kv.tables[1][i] >= 0) held[i] = s.kv.tables[1][i];
  }
  return held;
}
}  // namespace

TEST_CASE("a windowed model reuses a cached prompt: every full-attention block, and the window's last blocks",
          "[kv_manager][window]") {
  // Full group 20 blocks, windowed group (window 8) 8 blocks; blocks of 4 positions.
  KvCacheManager m = make(mixed_shape(20, 2));
  REQUIRE(m.prefix_cache());
  const std::vector<int32_t> p = concat(run(100, 24), {7});  // 6 full blocks and a last token
  KvSequence a;
  CHECK(m.match_prefix(a, p) == 0);
  const std::vector<int32_t> window = prefill_steps(m, a, p, 4);
  REQUIRE(a.block_keys.size() == 6);
  // The window passed blocks 0..3 (a query at 24 sees 17..24): handed back, but cached.
  CHECK(a.kv.tables[1] == std::vector<int32_t>{-1, -1, -1, -1, window[4], window[5], window[6]});
  CHECK(std::set<int32_t>(window.begin(), window.end()).size() == 7);
  const std::vector<int32_t> full = a.kv.tables[0];
  m.release(a);
  require_consistent(m, {});
  CHECK(m.stats().groups[0].cached_blocks == 6);
  CHECK(m.stats().groups[1].cached_blocks == 6);  // blocks 0..5; the last token's block is free
  CHECK(m.stats().evictions == 0);

  // The same prompt: 24 positions from the cache. The full group holds all 6 blocks; the windowed
  // group only blocks 4 and 5 (positions 16..23: a query at 24 sees from 17).
  KvSequence b;
  CHECK(m.match_prefix(b, p) == 24);
  CHECK(b.cached_tokens == 24);
  CHECK(b.kv.tables[0] == std::vector<int32_t>(full.begin(), full.begin() + 6));
  CHECK(b.kv.tables[1] == std::vector<int32_t>{-1, -1, -1, -1, window[4], window[5]});
  CHECK(m.stats().groups[1].used_blocks == 2);
  require_consistent(m, {&b});
  REQUIRE(m.append(b, 1));  // the last token: a new block in each group
  require_consistent(m, {&b});

  // Shorter prompts need the window's blocks further back: [max(0, L - 7) / 4, L / 4).
  // A prompt of 13 tokens may reuse 12 positions: it needs windowed blocks 1 and 2, cached.
  KvSequence c;
  CHECK(m.match_prefix(c, std::vector<int32_t>(p.begin(), p.begin() + 13)) == 12);
  CHECK(c.kv.tables[1] == std::vector<int32_t>{-1, window[1], window[2]});
  require_consistent(m, {&b, &c});
  m.release(b);
  m.release(c);
  require_consistent(m, {});
  CHECK(m.stats().prefix_hit_tokens == 36);
}

TEST_CASE("a windowed lookup rejects a prefix whose window blocks were evicted, and takes a shorter one it holds",
          "[kv_manager][window]") {
  KvCacheManager m = make(mixed_shape(40, 2));  // windowed pool: 8 blocks
  const std::vector<int32_t> p = concat(run(100, 24), {7});
  KvSequence a;
  m.match_prefix(a, p);
  const std::vector<int32_t> window = prefill_steps(m, a, p, 4);
  m.release(a);
  REQUIRE(m.stats().groups[1].cached_blocks == 6);
  REQUIRE(m.stats().groups[1].free_blocks == 2);

  // Cached windowed blocks are evicted least recently used first: 0, 1, 2, 3 (dropped as the
  // window passed), then 5 and 4 (released tail first). Unrelated sequences take one block each
  // (and one full-attention block, of 34 free).
  std::vector<KvSequence> others(7);
  const auto take_window_blocks = [&](size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) REQUIRE(m.append(others[i], 4));
  };
  take_window_blocks(0, 3);  // the 2 free blocks, then block 0
  CHECK(m.stats().groups[1].cached_blocks == 5);
  // Full prompt: its window (blocks 4, 5) is still there.
  KvSequence q;
  CHECK(m.match_prefix(q, p) == 24);
  m.release(q);  // touched: blocks 4 and 5 are now the most recently used
  // A 9-token prompt would reuse 8 positions with windowed blocks 0 and 1: block 0 is gone. A
  // query at 4 needs block 0 too. Nothing is reused, although the full group holds both blocks.
  CHECK(m.match_prefix(q, std::vector<int32_t>(p.begin(), p.begin() + 9)) == 0);
  CHECK(q.kv.tables[0].empty());
  // A 17-token prompt: 16 positions need windowed blocks 2 and 3, both still cached.
  KvSequence r;
  CHECK(m.match_prefix(r, std::vector<int32_t>(p.begin(), p.begin() + 17)) == 16);
  CHECK(r.kv.tables[1] == std::vector<int32_t>{-1, -1, window[2], window[3]});
  m.release(r);  // now 3 and 2 are the most recently used; LRU order: 1, 5, 4, 3, 2
  take_window_blocks(3, 6);  // evicts 1, 4, 5
  CHECK(m.stats().groups[1].cached_blocks == 2);
  // The whole prompt's window is gone: the longest prefix every group accepts is 16 positions.
  CHECK(m.match_prefix(q, p) == 16);
  CHECK(q.kv.tables[0].size() == 4);
  CHECK(q.kv.tables[1] == std::vector<int32_t>{-1, -1, window[2], window[3]});
  CHECK(m.stats().groups[0].cached_blocks == 2);  // the full group evicted nothing: q holds 4 of its 6
  CHECK(m.stats().evictions == 4);                 // windowed blocks 0, 1, 5, 4
  std::vector<const KvSequence*> live{&q};
  for (const KvSequence& o : others) live.push_back(&o);
  require_consistent(m, live);
}
