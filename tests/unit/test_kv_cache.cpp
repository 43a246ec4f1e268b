// The paged KV cache's block accounting.
#include <catch2/catch.hpp>

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
