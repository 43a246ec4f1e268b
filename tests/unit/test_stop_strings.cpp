// StopMatcher against an independent whole-text reference, over every way of cutting the text.
#include <catch2/catch.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "sample/stop_strings.hpp"

using namespace infer;

namespace {

struct Outcome {
  std::string text;
  bool stopped = false;
  bool operator==(const Outcome&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Outcome& o) {
  return os << "{\"" << o.text << "\", " << (o.stopped ? "stopped" : "not stopped") << "}";
}

// The reference: the stop occurrence that ends first in the whole text (ties: starts first);
// the output is everything before it.
Outcome reference(const std::string& text, const std::vector<std::string>& stops) {
  size_t best_start = std::string::npos, best_end = std::string::npos;
  for (const auto& stop : stops) {
    for (size_t start = 0; start + stop.size() <= text.size(); ++start) {
      if (text.compare(start, stop.size(), stop) != 0) continue;
      const size_t end = start + stop.size();
      if (end < best_end || (end == best_end && start < best_start)) best_start = start, best_end = end;
      break;
    }
  }
  if (best_start == std::string::npos) return {text, false};
  return {text.substr(0, best_start), true};
}

bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += n;
  }
  return true;
}

// Streams `text` cut at `cuts` (increasing byte offsets); every emitted piece must be valid UTF-8.
Outcome stream(const std::string& text, const std::vector<std::string>& stops, const std::vector<size_t>& cuts) {
  auto m = StopMatcher::create(stops);
  REQUIRE(m.ok());
  Outcome out;
  size_t from = 0;
  std::vector<size_t> ends = cuts;
  ends.push_back(text.size());
  for (size_t to : ends) {
    auto piece = m->push(std::string_view(text).substr(from, to - from));
    CHECK(valid_utf8(piece.text));
    out.text += piece.text;
    from = to;
    if (piece.stopped) {
      out.stopped = true;
      CHECK(m->push("more").stopped);
      CHECK(m->flush().empty());
      return out;
    }
  }
  const std::string rest = m->flush();
  CHECK(valid_utf8(rest));
  out.text += rest;
  return out;
}

// Every cut into two and three pieces, and byte by byte.
void check_every_split(const std::string& text, const std::vector<std::string>& stops) {
  const Outcome expected = reference(text, stops);
  INFO("text \"" << text << "\"");
  CHECK(stream(text, stops, {}) == expected);
  std::vector<size_t> bytes;
  for (size_t i = 1; i < text.size(); ++i) bytes.push_back(i);
  CHECK(stream(text, stops, bytes) == expected);
  for (size_t i = 0; i <= text.size(); ++i) {
    CHECK(stream(text, stops, {i}) == expected);
    for (size_t j = i; j <= text.size(); ++j) CHECK(stream(text, stops, {i, j}) == expected);
  }
}

}  // namespace

TEST_CASE("a stop string split across deltas at every possible point is found", "[sample][stop]") {
  const std::vector<std::string> stops = {"</s>", "\nUser:"};
  check_every_split("Hello there.</s>ignored", stops);
  check_every_split("line one\nUser: hi", stops);
  check_every_split("a < b and </ but </s", stops);  // near misses, no stop
}

TEST_CASE("overlapping stops: the occurrence that ends first wins, then the longest", "[sample][stop]") {
  const std::vector<std::string> stops = {"ab", "abc", "bc"};
  for (const char* text : {"xabcx", "xbcx", "abab", "aabc", "xaby", "bbc", "ac"}) check_every_split(text, stops);
  CHECK(reference("xabcx", stops) == Outcome{"x", true});
  CHECK(reference("xbcx", stops) == Outcome{"x", true});
  CHECK(reference("abcd", {"abcd", "bc"}) == Outcome{"a", true});
  check_every_split("abcd", {"abcd", "bc"});
  check_every_split("aaab", {"aab", "aaaa"});
}

TEST_CASE("a stop string at the very start stops with empty text", "[sample][stop]") {
  check_every_split("</s>tail", {"</s>"});
  auto m = StopMatcher::create({"</s>"});
  REQUIRE(m.ok());
  CHECK(m->push("</").text.empty());
  const auto out = m->push("s>tail");
  CHECK(out.text.empty());
  CHECK(out.stopped);
}

TEST_CASE("without a stop everything is emitted, and flush returns what was held back", "[sample][stop]") {
  check_every_split("no stop in here at all", {"STOP"});
  check_every_split("plain text", {});

  auto m = StopMatcher::create({"</s>"});
  REQUIRE(m.ok());
  auto out = m->push("hello </");
  CHECK(out.text == "hello ");
  CHECK_FALSE(out.stopped);
  CHECK(m->flush() == "</");
  CHECK(m->flush().empty());
}

TEST_CASE("only the longest suffix that could begin a stop string is held back", "[sample][stop]") {
  const std::vector<std::string> stops = {"world", "wow", "ooo"};
  const std::string text = "hello wo wor woro oo worl";
  auto m = StopMatcher::create(stops);
  REQUIRE(m.ok());
  std::string emitted;
  for (size_t i = 0; i < text.size(); ++i) {
    auto out = m->push(text.substr(i, 1));
    REQUIRE_FALSE(out.stopped);
    emitted += out.text;
    // Brute force: the longest suffix of what was received that is a proper prefix of a stop.
    const std::string received = text.substr(0, i + 1);
    size_t hold = 0;
    for (const auto& s : stops)
      for (size_t k = 1; k < s.size() && k <= received.size(); ++k)
        if (received.compare(received.size() - k, k, s, 0, k) == 0) hold = std::max(hold, k);
    CHECK(emitted == received.substr(0, received.size() - hold));
  }
}

TEST_CASE("multi-byte UTF-8: never emitted mid-character, stops found across byte cuts", "[sample][stop]") {
  const std::string text = "h\xC3\xA9llo w\xC3\xB6rld \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\xF0\x9F\x99\x82 end";
  REQUIRE(valid_utf8(text));
  check_every_split(text, {"\xE8\xAA\x9E\xF0\x9F\x99\x82"});  // "語🙂"
  check_every_split(text, {"\xC3\xB6r"});                      // "ör"
  check_every_split(text, {"\xF0\x9F\x99\x83"});               // 🙃 shares three bytes with 🙂
  check_every_split(text, {});

  // A character cut by token boundaries comes out whole, once complete.
  auto m = StopMatcher::create({"zz"});
  REQUIRE(m.ok());
  CHECK(m->push("a\xF0\x9F").text == "a");
  CHECK(m->push("\x99").text.empty());
  CHECK(m->push("\x82!").text == "\xF0\x9F\x99\x82!");
}

TEST_CASE("an empty stop string is rejected", "[sample][stop]") {
  auto m = StopMatcher::create({"ok", ""});
  REQUIRE_FALSE(m.ok());
  CHECK(m.status().code() == StatusCode::invalid_argument);
  CHECK(m.status().message().find("stop string 1 is empty") == 0);
  CHECK(StopMatcher::create({}).ok());
}
