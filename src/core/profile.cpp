#include "core/profile.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace infer {

bool profile_requested_by_environment() noexcept {
  const char* v = std::getenv("INFER_PROFILE");
  return v && *v && std::strcmp(v, "0") != 0;
}

void OpProfile::add(std::string_view op, std::string_view variant, int64_t ns) noexcept {
  std::lock_guard lock(mutex_);
  for (Row& r : rows_)
    if (r.op == op && r.variant == variant) {
      ++r.calls;
      r.total_ns += ns;
      return;
    }
  try {
    rows_.push_back(Row{std::string(op), std::string(variant), 1, ns});
  } catch (...) {
  }
}

std::vector<OpProfile::Row> OpProfile::rows() const {
  std::vector<Row> out;
  {
    std::lock_guard lock(mutex_);
    out = rows_;
  }
  std::sort(out.begin(), out.end(), [](const Row& a, const Row& b) {
    if (a.total_ns != b.total_ns) return a.total_ns > b.total_ns;
    return a.op != b.op ? a.op < b.op : a.variant < b.variant;
  });
  return out;
}

std::string OpProfile::table() const {
  const std::vector<Row> rs = rows();
  if (rs.empty()) return "";
  int64_t total_ns = 0, calls = 0;
  for (const Row& r : rs) {
    total_ns += r.total_ns;
    calls += r.calls;
  }
  char line[256];
  std::snprintf(line, sizeof line, "INFER_PROFILE: wall time per op, %lld calls, %.3f ms in all\n", static_cast<long long>(calls),
                static_cast<double>(total_ns) * 1e-6);
  std::string out = line;
  out += "| op | calls | total ms | % of total | µs per call |\n| --- | ---: | ---: | ---: | ---: |\n";
  for (const Row& r : rs) {
    const std::string name = r.variant.empty() ? r.op : r.op + " " + r.variant;
    const double ms = static_cast<double>(r.total_ns) * 1e-6;
    const double share = total_ns > 0 ? 100.0 * static_cast<double>(r.total_ns) / static_cast<double>(total_ns) : 0.0;
    std::snprintf(line, sizeof line, "| %s | %lld | %.3f | %.1f | %.2f |\n", name.c_str(), static_cast<long long>(r.calls), ms, share,
                  r.calls > 0 ? ms * 1e3 / static_cast<double>(r.calls) : 0.0);
    out += line;
  }
  return out;
}

void OpProfile::clear() {
  std::lock_guard lock(mutex_);
  rows_.clear();
}

OpProfile& OpProfile::global() {
  static OpProfile profile;
  return profile;
}

}  // namespace infer
