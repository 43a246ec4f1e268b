#include "sample/stop_strings.hpp"

#include <algorithm>

namespace infer {
namespace {

bool is_continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// Where a UTF-8 sequence still missing bytes starts at the end of `text`, or text.size().
size_t incomplete_tail(std::string_view text) {
  const size_t size = text.size();
  for (size_t back = 1; back <= std::min<size_t>(3, size); ++back) {
    const auto lead = static_cast<unsigned char>(text[size - back]);
    if (is_continuation(static_cast<char>(lead))) continue;
    const size_t length = (lead & 0xE0) == 0xC0 ? 2 : (lead & 0xF0) == 0xE0 ? 3 : (lead & 0xF8) == 0xF0 ? 4 : 1;
    return length > back ? size - back : size;
  }
  return size;
}

}  // namespace

Result<StopMatcher> StopMatcher::create(std::vector<std::string> stops) {
  for (size_t i = 0; i < stops.size(); ++i)
    if (stops[i].empty())
      return invalid_argument("stop string " + std::to_string(i) + " is empty (it would match before any text)");
  return StopMatcher(std::move(stops));
}

StopMatcher::Out StopMatcher::push(std::string_view delta) {
  if (stopped_) return {{}, true};
  pending_.append(delta);

  // pending_ held no whole stop before this delta, so every occurrence found ends inside it.
  size_t best_start = std::string::npos;
  size_t best_end = std::string::npos;
  for (const std::string& stop : stops_) {
    const size_t start = pending_.find(stop);
    if (start == std::string::npos) continue;
    const size_t end = start + stop.size();
    if (end < best_end || (end == best_end && start < best_start)) {
      best_start = start;
      best_end = end;
    }
  }
  if (best_start != std::string::npos) {
    stopped_ = true;
    Out out{pending_.substr(0, best_start), true};
    pending_.clear();
    return out;
  }

  const size_t safe = safe_prefix();
  Out out{pending_.substr(0, safe), false};
  pending_.erase(0, safe);
  return out;
}

size_t StopMatcher::safe_prefix() const {
  const size_t size = pending_.size();
  size_t hold = 0;  // longest suffix of pending_ that is a proper prefix of some stop
  for (const std::string& stop : stops_) {
    for (size_t k = std::min(stop.size() - 1, size); k > hold; --k) {
      if (pending_.compare(size - k, k, stop, 0, k) == 0) {
        hold = k;
        break;
      }
    }
  }
  size_t safe = std::min(size - hold, incomplete_tail(pending_));
  // Only a stop string that itself starts mid-character can leave `safe` there; back up to the
  // character's first byte (at most 3 steps, so invalid input cannot make us hold everything).
  for (int step = 0; step < 3 && safe > 0 && safe < size && is_continuation(pending_[safe]); ++step) --safe;
  return safe;
}

std::string StopMatcher::flush() {
  std::string out = std::move(pending_);
  pending_.clear();
  return out;
}

}  // namespace infer
