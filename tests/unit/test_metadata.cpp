// Metadata: ordered map semantics, typed lookups, and the text/JSON renderings infer-inspect prints.
#include <catch2/catch.hpp>

#include "format/metadata.hpp"

using namespace infer;

TEST_CASE("metadata keeps insertion order, replaces in place, and erases", "[metadata]") {
  Metadata md;
  md.set("b", uint32_t{1});
  md.set("a", "x");
  CHECK_FALSE(md.insert("b", uint32_t{2}));
  md.set("b", int64_t{-3});
  REQUIRE(md.size() == 2);
  CHECK(md.entries()[0].key == "b");
  CHECK(md.get_integer("b") == -3);
  CHECK(md.erase("b"));
  CHECK_FALSE(md.contains("b"));
  CHECK(*md.get_string("a") == "x");
  CHECK(md.entries()[0].key == "a");
  // Typed lookups refuse other kinds.
  md.set("flag", true);
  md.set("f", 2.5f);
  CHECK(md.get_integer("flag") == std::nullopt);
  CHECK(md.get_bool("flag") == true);
  CHECK(md.get_number("f") == 2.5);
  CHECK(md.get_integer("f") == std::nullopt);
  CHECK(md.get_string("f") == nullptr);
  CHECK(md.get_array("a") == nullptr);
}

TEST_CASE("values render as shortest round-trip text and valid JSON", "[metadata]") {
  CHECK(value_to_string(Value(1e-5f)) == "1e-05");
  CHECK(value_to_string(Value(0.1)) == "0.1");
  CHECK(value_to_string(Value(10000.0f)) == "10000");
  CHECK(value_to_string(Value(uint64_t{18446744073709551615ull})) == "18446744073709551615");
  CHECK(value_to_string(Value(int8_t{-5})) == "-5");
  CHECK(value_to_string(Value(true)) == "true");
  CHECK(value_to_string(Value("a\"b\\c\nd")) == "\"a\\\"b\\\\c\\nd\"");
  // Invalid UTF-8 becomes U+FFFD; valid multi-byte sequences pass through; control bytes escape.
  CHECK(value_to_json(Value(std::string("\xff" "ok\xe2\x96\x81" "\x01"))) == "\"\xef\xbf\xbdok\xe2\x96\x81\\u0001\"");
  CHECK(json_quote(std::string("\xed\xa0\x80")) == "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");  // a surrogate
  CHECK(value_to_json(Value(std::nanf(""))) == "null");
  std::vector<int32_t> v = {1, 2, 3, 4, 5};
  const Value arr(Array::of(ValueType::i32, std::span<const int32_t>(v)));
  CHECK(value_to_string(arr, 3) == "[1, 2, 3, ... (5 items)]");
  CHECK(value_to_json(arr) == "[1, 2, 3, 4, 5]");
  CHECK(value_to_json(Value(Array::of_strings({"a", "b"}))) == "[\"a\", \"b\"]");
  const Value nested(Array::of_arrays({Array::of_strings({"x"}), Array::of_arrays({})}));
  CHECK(value_to_json(nested) == "[[\"x\"], []]");
}

TEST_CASE("array element accessors widen every numeric type", "[metadata]") {
  std::vector<uint16_t> u = {7, 65535};
  const Array a = Array::of(ValueType::u16, std::span<const uint16_t>(u));
  CHECK(a.integer_at(1) == 65535);
  CHECK(a.number_at(0) == 7.0);
  CHECK(a.integer_at(2) == std::nullopt);
  CHECK(a.as<uint16_t>().size() == 2);
  CHECK(a.as<uint32_t>().empty());  // wrong element size
  const Array s = Array::of_strings({"x"});
  CHECK(s.integer_at(0) == std::nullopt);
}

TEST_CASE("json_unquote decodes JSON string literals (RFC 8259) and rejects malformed ones", "[metadata]") {
  CHECK(json_unquote("\"\"").value().empty());
  CHECK(json_unquote(R"("plain text")").value() == "plain text");
  CHECK(json_unquote(R"("a\nb\tc\r\"q\" \\ \/ \b\f")").value() == "a\nb\tc\r\"q\" \\ / \b\f");
  CHECK(json_unquote(R"("\u0041\u00e9\u20AC")").value() == "A\xc3\xa9\xe2\x82\xac");  // A, e-acute, euro sign
  CHECK(json_unquote(R"("\ud83d\ude00")").value() == "\xf0\x9f\x98\x80");               // U+1F600 from a surrogate pair
  CHECK(json_unquote("\"caf\xc3\xa9\"").value() == "caf\xc3\xa9");                      // raw UTF-8 kept
  // The round trip through json_quote.
  const std::string text = "line 1\n\"line\" 2\t<|im_end|>\x01";
  CHECK(json_unquote(json_quote(text)).value() == text);
  for (const char* bad : {"", "\"", "abc", "\"abc", "\"a\"b\"", "\"\\\"", "\"\\x41\"", "\"\\u12\"", "\"\\u12G4\"",
                          "\"\\ud83d\"", "\"\\ud83d\\u0041\"", "\"\\ude00\"", "\"tab\there\""}) {
    INFO(bad);
    CHECK(json_unquote(bad).status().code() == StatusCode::invalid_argument);
  }
}
