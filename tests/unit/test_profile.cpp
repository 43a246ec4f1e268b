// The op profile of INFER_PROFILE (core/profile.hpp): its accounting, on a clock the test moves.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "core/profile.hpp"

using namespace infer;

namespace {

int64_t g_fake_ns = 0;
int64_t fake_clock() { return g_fake_ns; }

// One call of `op` that lasts `ns` on the fake clock.
void timed_call(OpProfile& p, const char* op, const char* variant, int64_t ns) {
  const OpTimer timer(&p, op, variant);
  g_fake_ns += ns;
}

}  // namespace

TEST_CASE("the op profile sums calls and time per op and variant, largest total first", "[core][profile]") {
  OpProfile p(&fake_clock);
  g_fake_ns = 1'000'000'000;  // any origin: only differences count
  timed_call(p, "matmul", "Q4_0", 1'000'000);
  timed_call(p, "rms_norm", "", 200'000);
  timed_call(p, "matmul", "F16", 300'000);
  timed_call(p, "matmul", "Q4_0", 500'000);
  g_fake_ns += 7'000'000;  // time between ops belongs to no op

  const std::vector<OpProfile::Row> rows = p.rows();
  REQUIRE(rows.size() == 3);
  CHECK((rows[0].op == "matmul" && rows[0].variant == "Q4_0" && rows[0].calls == 2 && rows[0].total_ns == 1'500'000));
  CHECK((rows[1].op == "matmul" && rows[1].variant == "F16" && rows[1].calls == 1 && rows[1].total_ns == 300'000));
  CHECK((rows[2].op == "rms_norm" && rows[2].variant.empty() && rows[2].calls == 1 && rows[2].total_ns == 200'000));

  // 2 ms in all: 75 %, 15 %, 10 %; µs per call = total / calls.
  const std::string table = p.table();
  CHECK(table.find("4 calls, 2.000 ms in all") != std::string::npos);
  CHECK(table.find("| op | calls | total ms | % of total | µs per call |") != std::string::npos);
  CHECK(table.find("| matmul Q4_0 | 2 | 1.500 | 75.0 | 750.00 |") != std::string::npos);
  CHECK(table.find("| matmul F16 | 1 | 0.300 | 15.0 | 300.00 |") != std::string::npos);
  CHECK(table.find("| rms_norm | 1 | 0.200 | 10.0 | 200.00 |") != std::string::npos);
  CHECK(table.find("| matmul Q4_0") < table.find("| matmul F16"));

  p.clear();
  CHECK(p.rows().empty());
  CHECK(p.table().empty());
}

TEST_CASE("an op timer without a profile records nothing", "[core][profile]") {
  OpProfile p(&fake_clock);
  { const OpTimer timer(nullptr, "matmul", "Q8_0"); }
  { const OpTimer timer(nullptr, "matmul", DType::q8_0); }
  CHECK(p.rows().empty());
  CHECK(p.table().empty());
}

TEST_CASE("a matmul's timer names its weight type as the dtype table does", "[core][profile]") {
  OpProfile p(&fake_clock);
  {
    const OpTimer timer(&p, "matmul", DType::q4_k);
    g_fake_ns += 10;
  }
  const auto rows = p.rows();
  REQUIRE(rows.size() == 1);
  CHECK((rows[0].variant == "Q4_K" && rows[0].calls == 1 && rows[0].total_ns == 10));
}

TEST_CASE("the op profile counts every call made from several threads", "[core][profile]") {
  OpProfile p(&fake_clock);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&p, t] {
      for (int i = 0; i < 1000; ++i) p.add(t % 2 ? "add" : "glu", "", 3);
    });
  for (std::thread& t : threads) t.join();
  const auto rows = p.rows();
  REQUIRE(rows.size() == 2);
  CHECK((rows[0].calls == 2000 && rows[0].total_ns == 6000 && rows[1].calls == 2000 && rows[1].total_ns == 6000));
}

TEST_CASE("INFER_PROFILE turns profiling on unless it is empty or 0", "[core][profile]") {
  const char* saved = std::getenv("INFER_PROFILE");
  const std::string saved_value = saved ? saved : "";
  ::unsetenv("INFER_PROFILE");
  CHECK_FALSE(profile_requested_by_environment());
  ::setenv("INFER_PROFILE", "", 1);
  CHECK_FALSE(profile_requested_by_environment());
  ::setenv("INFER_PROFILE", "0", 1);
  CHECK_FALSE(profile_requested_by_environment());
  ::setenv("INFER_PROFILE", "1", 1);
  CHECK(profile_requested_by_environment());
  if (saved) ::setenv("INFER_PROFILE", saved_value.c_str(), 1);
  else ::unsetenv("INFER_PROFILE");
}
