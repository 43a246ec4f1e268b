// The KV cache storage: how the budget is planned into one pool per cache group, and the view.
// (Block allocation is the manager's: test_kv_manager.cpp.)
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
  REQUIRE(kv->n_groups() == 1);
  CHECK(kv->spec(0).layers == std::vector<int32_t>{0, 1});
  CHECK_FALSE(kv->spec(0).windowed());
  CHECK(kv->bytes_per_block(0) == 512);
  CHECK(kv->n_blocks(0) == 10);
  CHECK(kv->bytes() == 512 * 10);
  CHECK(KvCache::budget_for_tokens(shape(0), 9) == 3 * 512);
  auto none = KvCache::create(shape(511));
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().code() == StatusCode::out_of_range);
  KvCacheConfig bad = shape(4096);
  bad.kv_type = DType::q4_0;
  CHECK(KvCache::create(bad).status().code() == StatusCode::invalid_argument);
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
        CHECK(v.v_block(l, b, h) + head_bytes <= v.groups[0].k_base + 512 * 3);
      }
  CHECK(starts.size() == 2u * 3 * 2 * 2);
  CHECK(v.k_block(1, 2, 1) + head_bytes == v.groups[0].v_base);  // K region ends where V begins
}

namespace {
// Four layers, the first three windowed (window 8), blocks of 4 positions.
KvCacheConfig windowed(uint64_t budget, int max_step = 4) {
  KvCacheConfig c = shape(budget);
  c.n_layer = 4;
  c.groups = kv_cache_groups(4, {1, 1, 1, 0}, 8);
  c.max_step_tokens = max_step;
  return c;
}
}  // namespace

TEST_CASE("sliding-window layers get a pool of their own, sized for one window plus one step", "[kv]") {
  // Full pool: 1 layer x 256 bytes per block; windowed pool: 3 layers x 256 = 768 per block.
  // A sequence needs at most ceil((8 - 1 + 4) / 4) + 1 = 4 windowed blocks.
  const KvCacheConfig c = windowed(256 * 20 + 768 * 4);
  CHECK(c.window_blocks_per_sequence(8) == 4);
  auto kv = KvCache::create(c).value();
  REQUIRE(kv.n_groups() == 2);
  CHECK(kv.spec(0) == KvCacheSpec{0, {3}});          // the full-attention group first
  CHECK(kv.spec(1) == KvCacheSpec{8, {0, 1, 2}});    // then the window's
  CHECK(kv.n_blocks(0) == 20);
  CHECK(kv.n_blocks(1) == 4);
  CHECK(kv.bytes_per_block(0) == 256);
  CHECK(kv.bytes_per_block(1) == 768);
  // budget_for_tokens plans exactly that: 80 positions = 20 full blocks + 4 windowed ones.
  CHECK(KvCache::budget_for_tokens(c, 80) == 256 * 20 + 768 * 4);
  // A budget too small for the window share gives both pools the same count.
  auto small = KvCache::create(windowed(1024 * 3)).value();
  CHECK(small.n_blocks(0) == 3);
  CHECK(small.n_blocks(1) == 3);
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
        CHECK(v.v_block(l, b, h) + head_bytes <= v.groups[0].k_base + 256 * 5 + 768 * 4);
      }
  CHECK(starts.size() == static_cast<size_t>(2 * 2 * (5 + 3 * 4)));
  CHECK(v.first_visible(0, 20) == 13);
  CHECK(v.first_visible(3, 20) == 0);
}

TEST_CASE("cache groups must cover every layer once, and at most four groups fit", "[kv]") {
  KvCacheConfig c = windowed(1 << 16);
  c.groups = {KvCacheSpec{0, {3}}, KvCacheSpec{8, {0, 1}}};  // layer 2 in none
  CHECK(KvCache::create(c).status().code() == StatusCode::invalid_argument);
  c.groups = {KvCacheSpec{0, {2, 3}}, KvCacheSpec{8, {0, 1, 2}}};  // layer 2 in two
  CHECK(KvCache::create(c).status().code() == StatusCode::invalid_argument);
  c.groups = {KvCacheSpec{0, {3}}, KvCacheSpec{8, {0, 1, 2}}, KvCacheSpec{4, {}}};  // an empty group
  CHECK(KvCache::create(c).status().code() == StatusCode::invalid_argument);
  c.n_layer = 5;
  c.groups = {{0, {0}}, {2, {1}}, {4, {2}}, {8, {3}}, {16, {4}}};
  CHECK(KvCache::create(c).status().code() == StatusCode::invalid_argument);
  // Two windows of their own: each windowed pool is sized for its window.
  c.groups = {{0, {0}}, {4, {1, 2}}, {8, {3, 4}}};
  auto kv = KvCache::create(c).value();
  REQUIRE(kv.n_groups() == 3);
  CHECK(kv.n_blocks(1) == c.window_blocks_per_sequence(4));
  CHECK(kv.n_blocks(2) == c.window_blocks_per_sequence(8));
  CHECK(kv.n_blocks(0) == static_cast<int64_t>(((1 << 16) - 512 * (kv.n_blocks(1) + kv.n_blocks(2))) / 256));
  CHECK(kv.view().first_visible(1, 20) == 17);
  CHECK(kv.view().first_visible(3, 20) == 13);
  CHECK(kv.view().first_visible(0, 20) == 0);
}

TEST_CASE("copy_block copies one block of every layer of its group and nothing else", "[kv]") {
  auto kv = KvCache::create(windowed(256 * 5 + 768 * 4)).value();
  const KvView& v = kv.view();
  const uint64_t head_bytes = 4 * 8 * 2;
  // Distinct bytes everywhere in the windowed group's pool.
  for (int l = 0; l < 3; ++l)
    for (int64_t b = 0; b < 4; ++b)
      for (int h = 0; h < 2; ++h)
        for (uint64_t i = 0; i < head_bytes; ++i) {
          v.k_block(l, b, h)[i] = static_cast<uint8_t>(l * 31 + b * 7 + h * 3 + i);
          v.v_block(l, b, h)[i] = static_cast<uint8_t>(l * 17 + b * 5 + h * 11 + i + 1);
        }
  kv.copy_block(1, 2, 0);
  for (int l = 0; l < 3; ++l)
    for (int64_t b = 0; b < 4; ++b)
      for (int h = 0; h < 2; ++h)
        for (uint64_t i = 0; i < head_bytes; ++i) {
          const int64_t src = b == 0 ? 2 : b;  // block 0 now holds block 2's content
          REQUIRE(v.k_block(l, b, h)[i] == static_cast<uint8_t>(l * 31 + src * 7 + h * 3 + i));
          REQUIRE(v.v_block(l, b, h)[i] == static_cast<uint8_t>(l * 17 + src * 5 + h * 11 + i + 1));
        }
}

TEST_CASE("the storage comes from the caller's allocator, and its failure is an error", "[kv]") {
  std::vector<size_t> asked;
  const uint8_t* given = nullptr;
  auto counting = [&](size_t n) -> Result<AlignedBuffer> {
    asked.push_back(n);
    auto b = AlignedBuffer::zeros(n);
    if (b.ok()) given = b->data();
    return b;
  };
  auto kv = KvCache::create(shape(512 * 10 + 100), counting);
  REQUIRE(kv.ok());
  CHECK(asked == std::vector<size_t>{512 * 10});
  // Every block lives in the buffer the allocator returned.
  const KvView& v = kv->view();
  for (int64_t b = 0; b < 10; ++b) {
    CHECK(v.k_block(1, b, 1) >= given);
    CHECK(v.v_block(1, b, 1) + 4 * 8 * 2 <= given + 512 * 10);
  }
  auto failing = [](size_t) -> Result<AlignedBuffer> { return out_of_memory("device memory exhausted"); };
  auto none = KvCache::create(shape(4096), failing);
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().code() == StatusCode::out_of_memory);
  CHECK(none.status().message().find("KV cache") != std::string::npos);
  CHECK(none.status().message().find("device memory exhausted") != std::string::npos);
}

TEST_CASE("a Q8_0 cache with heads of a multiple of 64 is rotated: K in the largest power-of-two block up to 512, V in 64",
          "[kv]") {
  struct Case {
    DType type;
    int head_dim;
    bool rotate;
    int k, v;
  };
  for (const Case& t : std::vector<Case>{{DType::q8_0, 64, true, 64, 64},   {DType::q8_0, 128, true, 128, 64},
                                         {DType::q8_0, 256, true, 256, 64},  {DType::q8_0, 192, true, 64, 64},
                                         {DType::q8_0, 1024, true, 512, 64}, {DType::q8_0, 96, true, 0, 0},
                                         {DType::q8_0, 32, true, 0, 0},      {DType::q8_0, 128, false, 0, 0},
                                         {DType::f16, 128, true, 0, 0},      {DType::bf16, 128, true, 0, 0},
                                         {DType::f8_e4m3, 128, true, 0, 0}}) {
    KvCacheConfig c = shape(1 << 20);
    c.kv_type = t.type;
    c.head_dim = t.head_dim;
    c.rotate = t.rotate;
    INFO(dtype_name(t.type) << " head " << t.head_dim << " rotate " << t.rotate);
    CHECK(kv_rotation(c).k == t.k);
    CHECK(kv_rotation(c).v == t.v);
    auto kv = KvCache::create(c);
    REQUIRE(kv.ok());
    CHECK(kv->view().k_rotation == t.k);
    CHECK(kv->view().v_rotation == t.v);
  }
}
