// The paged KV cache's block accounting.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <vector>

#include "kv/kv_cache.hpp"

using namespace infer;

namespace {
KvCacheConfig shape(uint64_t budget) {
  KvCacheConfig c;
  c.n_layer = 2;
  c.n_kv_heads = 2;
  c.head_dim = 8;
  c.block_size = 4;
  c.kv_type = DType::f16;
  c.budget_bytes = budget;
  return c;
}
}  // namespace

TEST_CASE("the pool holds budget / block bytes blocks, planned once", "[kv]") {
  // K and V x 2 layers x 2 heads x 4 slots x 8 dims x 2 bytes = 512 bytes per block.
  auto kv = KvCache::create(shape(512 * 10 + 100));
  REQUIRE(kv.ok());
  CHECK(kv->bytes_per_block() == 512);
  CHECK(kv->n_blocks() == 10);
  CHECK(kv->free_blocks() == 10);
  CHECK(KvCache::budget_for_tokens(shape(0), 9) == 3 * 512);
  auto none = KvCache::create(shape(511));
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().code() == StatusCode::out_of_range);
  KvCacheConfig bad = shape(4096);
  bad.kv_type = DType::q4_0;
  CHECK(KvCache::create(bad).status().code() == StatusCode::invalid_argument);
}

TEST_CASE("append is all or nothing and release returns every block", "[kv]") {
  auto kv = KvCache::create(shape(512 * 5)).value();
  SequenceKv a, b;
  REQUIRE(kv.append(a, 5));  // 2 blocks
  CHECK(a.blocks.size() == 2);
  CHECK(a.n_tokens == 5);
  REQUIRE(kv.append(a, 3));  // fills the second block: no new block
  CHECK(a.blocks.size() == 2);
  CHECK(kv.blocks_needed(a, 1) == 1);
  CHECK_FALSE(kv.append(b, 13));  // needs 4 blocks, 3 free: nothing taken
  CHECK(b.blocks.empty());
  CHECK(b.n_tokens == 0);
  CHECK(kv.free_blocks() == 3);
  REQUIRE(kv.append(b, 12));
  CHECK(kv.free_blocks() == 0);
  std::set<int32_t> ids(a.blocks.begin(), a.blocks.end());
  ids.insert(b.blocks.begin(), b.blocks.end());
  CHECK(ids.size() == 5);  // no block shared by mistake
  kv.release(a);
  kv.release(b);
  CHECK(kv.free_blocks() == 5);
  CHECK(a.blocks.empty());
}

TEST_CASE("truncate keeps the blocks of the first positions and returns the rest", "[kv]") {
  auto kv = KvCache::create(shape(512 * 5)).value();
  SequenceKv a;
  REQUIRE(kv.append(a, 13));  // 4 blocks of 4
  const std::vector<int32_t> blocks = a.blocks;
  REQUIRE(kv.truncate(a, 5));  // positions 0..4: 2 blocks
  CHECK(a.n_tokens == 5);
  CHECK(a.blocks == std::vector<int32_t>(blocks.begin(), blocks.begin() + 2));
  CHECK(kv.free_blocks() == 3);
  REQUIRE(kv.truncate(a, 5));  // no change
  CHECK(kv.free_blocks() == 3);
  REQUIRE(kv.append(a, 3));  // fills block 2 again without a new one
  CHECK(a.blocks.size() == 2);
  REQUIRE(kv.truncate(a, 0));
  CHECK(a.blocks.empty());
  CHECK(kv.free_blocks() == 5);
}

TEST_CASE("block views of different layers, blocks and heads never overlap", "[kv]") {
  auto kv = KvCache::create(shape(512 * 3)).value();
  const KvView& v = kv.view();
  const uint64_t head_bytes = 4 * 8 * 2;
  std::set<const uint8_t*> starts;
  for (int l = 0; l < 2; ++l)
    for (int b = 0; b < 3; ++b)
      for (int h = 0; h < 2; ++h) {
        starts.insert(v.k_block(l, b, h));
        starts.insert(v.v_block(l, b, h));
        CHECK(v.v_block(l, b, h) + head_bytes <= v.k_base + 512 * 3);
      }
  CHECK(starts.size() == 2u * 3 * 2 * 2);
  CHECK(v.k_block(1, 2, 1) + head_bytes == v.v_base);  // K region ends where V begins
}

namespace {
// Four layers, the first three windowed (window 8), blocks of 4 positions.
KvCacheConfig windowed(uint64_t budget, int max_step = 4) {
  KvCacheConfig c = shape(budget);
  c.n_layer = 4;
  c.window_layers = {1, 1, 1, 0};
  c.sliding_window = 8;
  c.max_step_tokens = max_step;
  return c;
}
}  // namespace

TEST_CASE("sliding-window layers get a pool of their own, sized for one window plus one step", "[kv]") {
  // Full pool: 1 layer x 256 bytes per block; windowed pool: 3 layers x 256 = 768 per block.
  // A sequence needs at most ceil((8 - 1 + 4) / 4) + 1 = 4 windowed blocks.
  const KvCacheConfig c = windowed(256 * 20 + 768 * 4);
  CHECK(c.window_blocks_per_sequence() == 4);
  auto kv = KvCache::create(c).value();
  CHECK(kv.n_blocks() == 20);
  CHECK(kv.n_window_blocks() == 4);
  CHECK(kv.bytes_per_block() == 256);
  CHECK(kv.bytes_per_window_block() == 768);
  // budget_for_tokens plans exactly that: 80 positions = 20 full blocks + 4 windowed ones.
  CHECK(KvCache::budget_for_tokens(c, 80) == 256 * 20 + 768 * 4);
  // A budget too small for the window share gives both pools the same count.
  auto small = KvCache::create(windowed(1024 * 3)).value();
  CHECK(small.n_blocks() == 3);
  CHECK(small.n_window_blocks() == 3);
}

TEST_CASE("windowed blocks go back to the pool once the window has passed them", "[kv]") {
  auto kv = KvCache::create(windowed(256 * 20 + 768 * 4)).value();
  SequenceKv s;
  for (int step = 0; step < 20; ++step) {
    REQUIRE(kv.append(s, 4));  // 4 positions a step, 80 in all
    // Every windowed block a query at the newest positions can see is there...
    const int32_t first = std::max(0, s.n_tokens - 4 - 8 + 1);
    for (int32_t b = first / 4; b < (s.n_tokens + 3) / 4; ++b) REQUIRE(s.window_blocks[static_cast<size_t>(b)] >= 0);
    // ...and never more than the pool holds.
    CHECK(kv.free_window_blocks() >= 0);
  }
  CHECK(s.blocks.size() == 20);
  CHECK(s.window_blocks.size() == 20);
  CHECK(std::count(s.window_blocks.begin(), s.window_blocks.end(), -1) >= 16);
  CHECK_FALSE(kv.append(s, 1));  // the full pool is exhausted: nothing changes
  CHECK(s.n_tokens == 80);
  kv.release(s);
  CHECK(kv.free_blocks() == 20);
  CHECK(kv.free_window_blocks() == 4);
}

TEST_CASE("truncating into positions a windowed layer has dropped is refused", "[kv]") {
  auto kv = KvCache::create(windowed(256 * 20 + 768 * 4)).value();
  SequenceKv s;
  for (int step = 0; step < 6; ++step) REQUIRE(kv.append(s, 4));  // 24 positions; blocks 0.. dropped
  const SequenceKv before = s;
  CHECK_FALSE(kv.truncate(s, 4));  // a query at 4 would need positions 0..3, long gone
  CHECK(s.n_tokens == before.n_tokens);
  CHECK(s.window_blocks == before.window_blocks);
  REQUIRE(kv.truncate(s, 22));  // still inside what the window keeps
  CHECK(s.n_tokens == 22);
  CHECK(s.blocks.size() == 6);
  kv.release(s);
  CHECK(kv.free_blocks() == 20);
  CHECK(kv.free_window_blocks() == 4);
}

TEST_CASE("windowed and full layers' views never overlap", "[kv]") {
  auto kv = KvCache::create(windowed(256 * 5 + 768 * 4)).value();
  const KvView& v = kv.view();
  const uint64_t head_bytes = 4 * 8 * 2;
  std::set<const uint8_t*> starts;
  for (int l = 0; l < 4; ++l)
    for (int64_t b = 0; b < v.pool_blocks(l); ++b)
      for (int h = 0; h < 2; ++h) {
        starts.insert(v.k_block(l, b, h));
        starts.insert(v.v_block(l, b, h));
        CHECK(v.v_block(l, b, h) + head_bytes <= v.k_base + 256 * 5 + 768 * 4);
      }
  CHECK(starts.size() == static_cast<size_t>(2 * 2 * (5 + 3 * 4)));
  CHECK(v.first_visible(0, 20) == 13);
  CHECK(v.first_visible(3, 20) == 0);
}
