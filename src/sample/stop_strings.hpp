// StopMatcher: finds stop strings in streamed generated text.
//
// Text arrives in deltas (one per token, cut anywhere, even inside a UTF-8 character). push()
// returns the part that is safe to show: it holds back only the longest suffix that could
// still begin a stop string, plus an unfinished UTF-8 character at the end, so what it emits
// is valid UTF-8 whenever the whole input is. When a stop string completes, push() returns the
// rest of the text before it and stopped = true; the stop string and everything after it are
// never emitted.
//
// Which stop wins does not depend on how the text is cut: it is the occurrence that ends first
// in the text, and of those ending at the same byte the one that starts first (the longest).
// With stops {"ab", "bc"} the text "xabc" gives "x"; with {"abcd", "bc"} "abcd" gives "a".
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "infer/status.hpp"

namespace infer {

class StopMatcher {
 public:
  struct Out {
    std::string text;      // ready to show
    bool stopped = false;  // a stop string completed: generation should end
  };

  // invalid_argument if a stop string is empty. No stop strings is fine: nothing ever stops.
  static Result<StopMatcher> create(std::vector<std::string> stops);

  // Feeds the next piece of generated text. After a stop, further pushes return {"", true}.
  Out push(std::string_view delta);

  // Generation ended without a stop: returns the text still held back (empty after a stop).
  std::string flush();

 private:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  size_t safe_prefix() const;

  std::vector<std::string> stops_;
  std::string pending_;  // received, not yet emitted; never contains a whole stop string
  bool stopped_ = false;
};

}  // namespace infer
