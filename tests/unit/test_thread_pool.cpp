#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/thread_pool.hpp"

using infer::ThreadPool;

TEST_CASE("parallel_for visits every index exactly once", "[core][threads]") {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    REQUIRE(pool.size() == threads);
    for (size_t n : {0, 1, 2, 7, 64, 1000, 100003}) {
      for (size_t grain : {0, 1, 3, 1000}) {
        // (Catch2's assertions are not thread-safe: tasks count, the test checks afterwards.)
        std::vector<std::atomic<int>> hits(n);
        std::atomic<int> bad_ranges{0};
        pool.parallel_for(
            n,
            [&](size_t b, size_t e) {
              if (!(b < e && e <= n)) {
                bad_ranges.fetch_add(1);
                return;
              }
              for (size_t i = b; i < e; ++i) hits[i].fetch_add(1, std::memory_order_relaxed);
            },
            grain);
        size_t wrong = 0;
        for (auto& h : hits) wrong += h.load() != 1;
        INFO("threads " << threads << " n " << n << " grain " << grain);
        CHECK(bad_ranges == 0);
        CHECK(wrong == 0);
      }
    }
  }
}

TEST_CASE("work is shared among the pool's threads", "[core][threads]") {
  ThreadPool pool(4);
  std::atomic<int> distinct{0};
  std::vector<std::thread::id> seen(64);
  pool.parallel_for(
      64,
      [&](size_t b, size_t) {
        seen[b] = std::this_thread::get_id();
        // Long enough for the workers to wake and take chunks.
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      },
      1);
  std::sort(seen.begin(), seen.end());
  distinct = static_cast<int>(std::unique(seen.begin(), seen.end()) - seen.begin());
  CHECK(distinct > 1);
}

TEST_CASE("nested parallel_for on the same pool runs inline and completes", "[core][threads]") {
  ThreadPool pool(4);
  std::vector<std::atomic<int>> hits(32 * 32);
  std::atomic<int> inline_calls{0}, outside_task{0};
  pool.parallel_for(
      32,
      [&](size_t b, size_t e) {
        for (size_t i = b; i < e; ++i) {
          if (!pool.in_task()) outside_task.fetch_add(1);
          pool.parallel_for(32, [&](size_t b2, size_t e2) {
            inline_calls.fetch_add(1);
            for (size_t j = b2; j < e2; ++j) hits[i * 32 + j].fetch_add(1);
          });
        }
      },
      1);
  for (auto& h : hits) REQUIRE(h.load() == 1);
  CHECK(outside_task.load() == 0);
  CHECK(inline_calls.load() > 0);
  CHECK_FALSE(pool.in_task());
}

TEST_CASE("several outside threads may call parallel_for at once", "[core][threads]") {
  ThreadPool pool(3);
  std::vector<std::thread> callers;
  std::atomic<long> total{0};
  for (int c = 0; c < 4; ++c)
    callers.emplace_back([&] {
      for (int rep = 0; rep < 50; ++rep)
        pool.parallel_for(1000, [&](size_t b, size_t e) { total.fetch_add(static_cast<long>(e - b)); });
    });
  for (auto& t : callers) t.join();
  CHECK(total.load() == 4L * 50 * 1000);
}

TEST_CASE("an exception in a task reaches the caller and the pool stays usable", "[core][threads]") {
  ThreadPool pool(4);
  CHECK_THROWS_AS(pool.parallel_for(
                      100,
                      [&](size_t b, size_t) {
                        if (b == 37) throw std::runtime_error("boom");
                      },
                      1),
                  std::runtime_error);
  std::atomic<size_t> count{0};
  pool.parallel_for(100, [&](size_t b, size_t e) { count += e - b; }, 1);
  CHECK(count.load() == 100);
}
