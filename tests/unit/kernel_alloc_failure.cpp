// Kernels that grow a thread's scratch on first use (the F16 / BF16 tiles over the layout packed at
// load, Q5_0's and Q4_1's AVX-512 expansion, the AVX-512 several-row dots) must let a failed
// allocation reach matmul's caller as std::bad_alloc, which the engine reports as out of memory:
// a noexcept kernel would call std::terminate and take the process down.
//
// Its own executable (infer-alloc-failure-tests): it replaces the global operator new with one
// that fails, while armed, every request of at least kFailFrom bytes. matmul's own buffers come
// from aligned_alloc, the weights are packed and the outputs sized before arming, so in the calls
// below only a kernel's scratch asks operator new for that much; each call runs on a new thread
// with a new pool, whose scratch is empty. After disarming, the same call succeeds and equals
// matmul_ref.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <thread>
#include <vector>

#include "backend/backend.hpp"
#include "core/cpu_features.hpp"
#include "core/tensor.hpp"
#include "core/thread_pool.hpp"
#include "kernels/cpu/dtype_traits.hpp"
#include "kernels/cpu/matmul.hpp"
#include "quant_test_util.hpp"

namespace {
std::atomic<size_t> g_fail_from{0};  // 0: never fail
std::atomic<int> g_failures{0};
}  // namespace

// GCC flags free() on what operator new returned, in the replacements themselves.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(std::size_t n) {
  const size_t from = g_fail_from.load(std::memory_order_relaxed);
  if (from != 0 && n >= from) {
    g_failures.fetch_add(1, std::memory_order_relaxed);
    throw std::bad_alloc();
  }
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
// The nothrow forms too (std::stable_sort's buffer comes from one and goes back through the plain
// delete): every form that the plain delete may free is this file's, so that the pairs match
// (AddressSanitizer checks that they do).
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return ::operator new(n);
  } catch (...) {
    return nullptr;
  }
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }

using namespace infer;
using namespace infer::test;

namespace {

constexpr size_t kFailFrom = size_t{1} << 18;

struct Armed {
  Armed() { g_fail_from.store(kFailFrom); }
  ~Armed() { g_fail_from.store(0); }
};

struct Case {
  const char* name;
  DType type;
  CpuIsa isa;
  bool packed;  // packed at load (else the file's rows, read in place)
  int64_t rows;
};

}  // namespace

TEST_CASE("a kernel's failed scratch allocation reaches matmul's caller as std::bad_alloc", "[matmul][alloc]") {
  // Rows of n elements: every kernel scratch below is 256 KiB or more (the F16 / BF16 tiles 64n
  // bytes a group, the Q5_0 / Q4_1 expansions 17n, the several-row dots' offsets n).
  const int64_t n = 262144, n_out = 16;
  const Case cases[] = {
      {"F16 packed at load, 8 rows (the tiles)", DType::f16, CpuIsa::avx2, true, 8},
      {"BF16 packed at load, 8 rows (the tiles)", DType::bf16, CpuIsa::avx512, true, 8},
      {"Q5_0 packed at load, 4 rows (the expansion)", DType::q5_0, CpuIsa::avx512, true, 4},
      {"Q4_1 packed at load, 4 rows (the expansion)", DType::q4_1, CpuIsa::avx512, true, 4},
      {"Q8_0 read in place, 1 row (the several-row dots)", DType::q8_0, CpuIsa::avx512, false, 1},
  };
  int ran = 0;
  for (const Case& c : cases) {
    if (detected_isa() < c.isa) continue;
    INFO(c.name);
    const auto bytes = random_weights(c.type, n_out, n, 7 + static_cast<uint64_t>(c.type), kTypicalScale);
    const TensorView file = TensorView::contiguous(c.type, 2, {n, n_out, 1, 1}, const_cast<uint8_t*>(bytes.data()));
    const auto x = activation_floats(c.rows * n, 11);
    std::vector<float> y(static_cast<size_t>(c.rows * n_out)), want(y.size());
    matmul_ref(file, x.data(), c.rows, n, want.data(), n_out);
    ThreadPool load_pool(2);
    CpuBackend backend(load_pool);
    TensorView w = file;
    {
      IsaScope scope(c.isa);
      if (c.packed) w = *backend.prepare_weight(file, Backend::WeightSource::kept);
    }
    REQUIRE((w.layout == Layout::cpu_packed) == c.packed);
    std::exception_ptr armed_error;
    bool armed_failed_in_operator_new = false, disarmed_ok = false;
    // A new thread and pool: every thread of the call starts with empty scratch.
    std::thread caller([&] {
      IsaScope scope(c.isa);
      ThreadPool pool(2);
      const int before = g_failures.load();
      try {
        Armed armed;
        matmul(w, x.data(), c.rows, n, y.data(), n_out, pool);
      } catch (...) {
        armed_error = std::current_exception();
      }
      armed_failed_in_operator_new = g_failures.load() > before;
      matmul(w, x.data(), c.rows, n, y.data(), n_out, pool);
      disarmed_ok = true;
    });
    caller.join();
    REQUIRE(armed_error);
    REQUIRE_THROWS_AS(std::rethrow_exception(armed_error), std::bad_alloc);
    REQUIRE(armed_failed_in_operator_new);
    REQUIRE(disarmed_ok);
    REQUIRE(std::memcmp(y.data(), want.data(), y.size() * sizeof(float)) == 0);
    ++ran;
  }
  if (detected_isa() >= CpuIsa::avx2) REQUIRE(ran >= 1);
}
