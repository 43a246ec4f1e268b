// Status/Result, the dtype table, aligned buffers, tensor views, logging, the C API basics.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "core/aligned_buffer.hpp"
#include "core/checked_math.hpp"
#include "core/dtype.hpp"
#include "core/log.hpp"
#include "core/status_macros.hpp"
#include "core/tensor.hpp"
#include "core/weight_arena.hpp"
#include "infer.h"
#include "infer/status.hpp"

using namespace infer;

namespace {
Result<int> parse_positive(int v) {
  if (v <= 0) return invalid_argument("not positive: " + std::to_string(v));
  return v;
}
Result<int> doubled(int v) {
  INFER_ASSIGN_OR_RETURN(int x, parse_positive(v));
  return 2 * x;
}
}  // namespace

TEST_CASE("Result carries a value or the failed status, and the macros propagate it", "[core]") {
  auto ok = doubled(21);
  REQUIRE(ok.ok());
  CHECK(*ok == 42);
  CHECK(ok.status().is_ok());
  auto bad = doubled(-1);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == StatusCode::invalid_argument);
  CHECK(bad.status().message() == "not positive: -1");
  CHECK(bad.status().to_string() == "invalid_argument: not positive: -1");
  CHECK(bad.status().with_context("arg").message() == "arg: not positive: -1");
}

TEST_CASE("C status codes and names match the C++ codes", "[core][capi]") {
  CHECK(static_cast<int>(StatusCode::malformed_file) == INFER_ERR_MALFORMED_FILE);
  CHECK(static_cast<int>(StatusCode::overloaded) == INFER_ERR_OVERLOADED);
  CHECK(std::string(infer_status_name(INFER_ERR_MALFORMED_FILE)) == "INFER_ERR_MALFORMED_FILE");
  CHECK(std::string(infer_status_name(static_cast<infer_status>(999))) == "INFER_ERR_UNKNOWN");
  CHECK(std::string(infer_version()) == INFER_VERSION_STRING);
  CHECK(infer_version_number() == INFER_VERSION_NUMBER);
  CHECK(infer_log_set_level(static_cast<infer_log_level>(7)) == INFER_ERR_INVALID_ARGUMENT);
}

TEST_CASE("checked arithmetic detects every overflow", "[core]") {
  CHECK(checked_add(UINT64_MAX, 1) == std::nullopt);
  CHECK(checked_add(UINT64_MAX - 1, 1) == UINT64_MAX);
  CHECK(checked_mul(1ull << 32, 1ull << 32) == std::nullopt);
  CHECK(checked_mul((1ull << 32) - 1, 1ull << 32) == ((1ull << 32) - 1) << 32);
  CHECK(checked_align_up(33, 32) == 64);
  CHECK(checked_align_up(64, 32) == 64);
  CHECK(checked_align_up(UINT64_MAX - 3, 32) == std::nullopt);
  CHECK(is_power_of_two(1));
  CHECK_FALSE(is_power_of_two(0));
  CHECK_FALSE(is_power_of_two(48));
}

TEST_CASE("the dtype table is consistent: ids, names, block layouts", "[core][dtype]") {
  for (const auto& t : all_dtypes()) {
    INFO(t.name);
    REQUIRE(dtype_traits(t.type) == &t);
    CHECK(dtype_from_name(t.name) == t.type);
    CHECK(dtype_name(t.type) == t.name);
    CHECK(t.block_size >= 1);
    CHECK(t.block_bytes >= 1);
    CHECK(t.quantized == (t.block_size > 1));
    // A row of two blocks takes two blocks' bytes; a partial block is refused.
    CHECK(dtype_row_bytes(t.type, 2ull * t.block_size) == 2ull * t.block_bytes + t.row_extra_bytes);
    CHECK((t.row_extra_bytes == 0 || t.internal));
    if (t.block_size > 1) CHECK(dtype_row_bytes(t.type, t.block_size + 1) == std::nullopt);
  }
  // Removed ids and ids past the end are unknown.
  for (uint32_t id : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 43u, 1000u, UINT32_MAX}) CHECK(dtype_traits(id) == nullptr);
  CHECK(dtype_from_name("q4_k") == DType::q4_k);
  CHECK(dtype_from_name("Q4_K_M") == std::nullopt);
  CHECK(dtype_name(static_cast<DType>(77)) == "type#77");
  CHECK(dtype_row_bytes(DType::f32, UINT64_MAX / 2) == std::nullopt);
}

TEST_CASE("aligned buffers are 64-byte aligned, movable, and report huge sizes as out of memory", "[core]") {
  // Below and above kLazyZerosBytes (fresh mapped pages there), each moved and assigned over
  // a buffer of the other kind, so that each is freed the way it was allocated.
  const size_t lazy = AlignedBuffer::kLazyZerosBytes;
  for (size_t n : {size_t{1}, size_t{63}, size_t{64}, size_t{65}, size_t{4096}, size_t{1000003}, lazy, lazy + 3, 3 * lazy}) {
    auto b = AlignedBuffer::zeros(n);
    REQUIRE(b.ok());
    CHECK(reinterpret_cast<uintptr_t>(b->data()) % 64 == 0);
    CHECK(b->size() == n);
    CHECK(std::all_of(b->data(), b->data() + n, [](uint8_t v) { return v == 0; }));
    std::memset(b->data(), 0xab, n);
    AlignedBuffer moved = std::move(b).value();
    CHECK(moved.size() == n);
    CHECK(moved.data()[n - 1] == 0xab);
    auto other = AlignedBuffer::zeros(n < lazy ? lazy : 64);
    REQUIRE(other.ok());
    moved = std::move(other).value();
    CHECK(moved.size() == (n < lazy ? lazy : 64));
  }
  for (auto* make : {&AlignedBuffer::allocate, &AlignedBuffer::zeros}) {
    auto huge = make(SIZE_MAX - 8);
    REQUIRE_FALSE(huge.ok());
    CHECK(huge.status().code() == StatusCode::out_of_memory);
  }
  auto empty = AlignedBuffer::allocate(0);
  REQUIRE(empty.ok());
  CHECK(empty->empty());
}

TEST_CASE("the weight arena hands out aligned, disjoint pieces that keep their bytes, slabs on huge-page boundaries", "[core]") {
  WeightArena arena;
  // Small pieces share the first slab; a piece past a slab's room opens the next, larger one;
  // one larger than the biggest slab gets its own; a later small piece fills a gap.
  const std::vector<size_t> sizes{1, 63, 64, 65, 1000003, 3u << 20, WeightArena::kMaxSlab + 5, 4096, 100};
  std::vector<std::pair<uint8_t*, size_t>> pieces;
  uint64_t total = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    auto p = arena.allocate(sizes[i]);
    REQUIRE(p.ok());
    CHECK(reinterpret_cast<uintptr_t>(*p) % 64 == 0);
    std::memset(*p, static_cast<int>(i + 1), sizes[i]);
    pieces.emplace_back(*p, sizes[i]);
    total += sizes[i];
  }
  CHECK(arena.used_bytes() == total);
  CHECK(arena.reserved_bytes() >= total);
  CHECK(arena.reserved_bytes() % WeightArena::kHugePage == 0);
  for (size_t i = 0; i < pieces.size(); ++i) {
    const auto [p, n] = pieces[i];
    CHECK(p[0] == static_cast<uint8_t>(i + 1));
    CHECK(p[n - 1] == static_cast<uint8_t>(i + 1));
    for (size_t j = 0; j < i; ++j) {
      const auto [q, m] = pieces[j];
      CHECK((p + n <= q || q + m <= p));
    }
  }
  auto huge = arena.allocate(SIZE_MAX - 8);
  REQUIRE_FALSE(huge.ok());
  CHECK(huge.status().code() == StatusCode::out_of_memory);
}

TEST_CASE("tensor views compute contiguous strides per dtype", "[core]") {
  std::vector<uint8_t> storage(4 * 64 * 34 / 32);
  auto q = TensorView::contiguous(DType::q8_0, 2, {64, 4, 1, 1}, storage.data());
  CHECK(q.row_bytes() == 68);
  CHECK(q.nbytes() == storage.size());
  CHECK(q.row<uint8_t>(3) == storage.data() + 3 * 68);
  CHECK(q.is_contiguous());
  CHECK(shape_string(q) == "[64, 4]");
  auto f = TensorView::contiguous(DType::f32, 3, {5, 3, 2, 1}, storage.data());
  CHECK(f.stride[0] == 4);
  CHECK(f.stride[1] == 20);
  CHECK(f.stride[2] == 60);
  CHECK(f.numel() == 30);
  f.stride[1] = 24;  // padded rows
  CHECK_FALSE(f.is_contiguous());
}

namespace {
struct Captured {
  std::vector<std::pair<LogLevel, std::string>> lines;
};
void capture_sink(LogLevel level, const char* message, void* user) {
  static_cast<Captured*>(user)->lines.emplace_back(level, message);
}
void capture_c(infer_log_level level, const char* message, void* user) {
  static_cast<Captured*>(user)->lines.emplace_back(static_cast<LogLevel>(level), message);
}
}  // namespace

TEST_CASE("the log sink can be replaced, filters by level, and formats long messages", "[core][log]") {
  Captured got;
  set_log_sink(capture_sink, &got);
  set_log_level(LogLevel::info);
  INFER_LOG_DEBUG("dropped %d", 1);
  INFER_LOG_INFO("kept %d", 2);
  const std::string long_text(2000, 'x');
  INFER_LOG_ERROR("long %s end", long_text.c_str());
  set_log_sink(nullptr, nullptr);
  set_log_level(LogLevel::warn);
  REQUIRE(got.lines.size() == 2);
  CHECK(got.lines[0].first == LogLevel::info);
  CHECK(got.lines[0].second == "kept 2");
  CHECK(got.lines[1].second == "long " + long_text + " end");

  Captured c_got;
  infer_log_set_callback(capture_c, &c_got);
  REQUIRE(infer_log_set_level(INFER_LOG_DEBUG) == INFER_OK);
  INFER_LOG_DEBUG("through C %s", "callback");
  infer_log_set_callback(nullptr, nullptr);
  infer_log_set_level(INFER_LOG_WARN);
  REQUIRE(c_got.lines.size() == 1);
  CHECK(c_got.lines[0].second == "through C callback");
}
