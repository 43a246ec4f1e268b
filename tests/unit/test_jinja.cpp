// The Jinja interpreter's limits and errors: templates are untrusted input, so each hostile shape
// below must end in a Status that names the problem (and its line), never a crash, a hang or an
// unbounded allocation. That it renders as jinja2 does is proven against jinja2 itself by
// tests/integration/jinja_reference.py; the few renderings checked here follow from the
// definitions alone.
#include <catch2/catch.hpp>

#include <string>

#include "tokenizer/jinja/json.hpp"
#include "tokenizer/jinja/template.hpp"

using namespace infer;
using namespace infer::jinja;

namespace {

Result<std::string> render(const std::string& text, const Dict& vars = {}, const RenderOptions& options = {}) {
  auto t = Template::parse(text, options.limits);
  if (!t.ok()) return t.status();
  return t->render(vars, options);
}

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

void check_fails(const Result<std::string>& r, StatusCode code, const std::string& part) {
  INFO(r.status().to_string());
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == code);
  CHECK_THAT(r.status().message(), Catch::Contains(part));
}

}  // namespace

TEST_CASE("deep nesting in a template is a limit error, not a stack overflow", "[jinja]") {
  // Parentheses, lists, unary operators, not, a long chain of binary operators, nested blocks.
  check_fails(render("{{ " + repeat("(", 100000) + "1" + repeat(")", 100000) + " }}"), StatusCode::out_of_range, "nests deeper");
  check_fails(render("{{ " + repeat("[", 100000) + repeat("]", 100000) + " }}"), StatusCode::out_of_range, "nests deeper");
  check_fails(render("{{ " + repeat("-", 100000) + "1 }}"), StatusCode::out_of_range, "nests deeper");
  check_fails(render("{{ " + repeat("not ", 100000) + "1 }}"), StatusCode::out_of_range, "nests deeper");
  check_fails(render("{{ 1" + repeat(" + 1", 100000) + " }}"), StatusCode::out_of_range, "nests deeper");
  check_fails(render("{{ x" + repeat(".a", 100000) + " }}"), StatusCode::out_of_range, "nests deeper");
  check_fails(render("{{ 'a'" + repeat("|upper", 100000) + " }}"), StatusCode::out_of_range, "nests deeper");
  check_fails(render(repeat("{% if true %}", 100000) + repeat("{% endif %}", 100000)), StatusCode::out_of_range, "nests deeper");
  // Below the limit nesting is fine.
  CHECK(*render("{{ " + repeat("(", 50) + "7" + repeat(")", 50) + " }}") == "7");
}

TEST_CASE("work, iterations, sizes and recursion of a render are bounded", "[jinja]") {
  check_fails(render("{{ 'a' * 1000000000 }}"), StatusCode::out_of_range, "larger than");
  check_fails(render("{{ 'ab' * 9223372036854775807 }}"), StatusCode::out_of_range, "larger than");
  check_fails(render("{{ [1, 2] * 1000000000 }}"), StatusCode::out_of_range, "larger than");
  // A string that doubles each iteration.
  check_fails(render("{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"),
              StatusCode::out_of_range, "larger than");
  // Nested loops of 10^10 iterations.
  check_fails(render("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"),
              StatusCode::out_of_range, "loop iterations");
  check_fails(render("{{ range(1000001)|length }}"), StatusCode::out_of_range, "range()");
  check_fails(render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"), StatusCode::out_of_range, "macro calls nested");
  // Output that grows without bound under a small work budget.
  RenderOptions small;
  small.limits.max_work = 10000;
  check_fails(render("{% for i in range(100000) %}x{% endfor %}", {}, small), StatusCode::out_of_range, "steps of work");
  RenderOptions tight;
  tight.limits.max_output_bytes = 100;
  check_fails(render("{% for i in range(1000) %}xx{% endfor %}", {}, tight), StatusCode::out_of_range, "larger than 100 bytes");
  CHECK(render("{% for i in range(40) %}xx{% endfor %}", {}, tight)->size() == 80);
  // Integer overflow is an error, not wrapped arithmetic.
  check_fails(render("{{ 9223372036854775807 + 1 }}"), StatusCode::unsupported, "overflow");
  check_fails(render("{{ 2 ** 64 }}"), StatusCode::unsupported, "overflow");
}

TEST_CASE("values built in a loop cannot nest without bound, and a namespace holding itself does not print forever", "[jinja]") {
  // A list a million levels deep would overflow the stack when printed, compared or freed.
  check_fails(render("{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}"),
              StatusCode::out_of_range, "nested deeper than");
  check_fails(render("{% set ns = namespace(x={}) %}{% for i in range(100000) %}{% set ns.x = {'k': ns.x} %}{% endfor %}"),
              StatusCode::out_of_range, "nested deeper than");
  check_fails(render("{% set ns = namespace() %}{% set ns.me = [ns] %}{{ ns }}"), StatusCode::out_of_range, "too deeply to print");
  // A chain of namespaces is fine to build and to free.
  CHECK(*render("{% set ns = namespace(n=none) %}{% for i in range(10000) %}{% set ns.n = namespace(n=ns.n) %}{% endfor %}ok") == "ok");
  // A recursive macro around a deep expression: the evaluation depth is bounded as well.
  check_fails(render("{% macro f(n) %}{{ " + repeat("-", 150) + "f(n + 1) }}{% endmacro %}{{ f(0) }}"),
              StatusCode::out_of_range, "evaluation nested deeper");
}

TEST_CASE("errors name the line and what went wrong", "[jinja]") {
  check_fails(render("a\nb\n{{ x.y }}"), StatusCode::invalid_argument, "line 3: 'x' is undefined");
  check_fails(render("{% for m in [1] %}\n{{ m + 'a' }}{% endfor %}"), StatusCode::invalid_argument, "line 2: unsupported operand");
  check_fails(render("ok\n{% if x %}"), StatusCode::invalid_argument, "expected 'elif' or 'else' or 'endif'");
  check_fails(render("{{ 1 +\n}}"), StatusCode::invalid_argument, "syntax error");
  check_fails(render("\n\n{% include 'x.jinja' %}"), StatusCode::unsupported, "line 3: the 'include' statement is not supported");
  check_fails(render("{% for x in xs recursive %}{% endfor %}"), StatusCode::unsupported, "recursive");
  check_fails(render("{{ 'x'|truncate(3) }}"), StatusCode::unsupported, "the filter 'truncate' is not supported");
  check_fails(render("{{ x|no_such_filter }}"), StatusCode::invalid_argument, "no filter named 'no_such_filter'");
  check_fails(render("\n{{ raise_exception('Only user and assistant roles are supported!') }}"), StatusCode::invalid_argument,
              "line 2: raise_exception: Only user and assistant roles are supported!");
  // The sandbox: lists and dicts cannot be changed.
  Dict vars;
  vars.set(Value("xs"), json_parse("[1, 2]"));
  check_fails(render("{{ xs.append(3) }}", vars), StatusCode::invalid_argument, "unsafe");
}

TEST_CASE("strftime_now formats the clock of the render options", "[jinja]") {
  RenderOptions o;
  std::tm t{};
  t.tm_year = 2024 - 1900;
  t.tm_mon = 1;
  t.tm_mday = 29;
  t.tm_hour = 13;
  t.tm_min = 5;
  o.now = t;
  CHECK(*render("{{ strftime_now('%Y-%m-%d %H:%M') }}|{{ strftime_now('%d %b %Y') }}", {}, o) == "2024-02-29 13:05|29 Feb 2024");
}

TEST_CASE("a parsed template renders the same twice, and values shared between renders are not changed", "[jinja]") {
  auto t = Template::parse("{% set g = xs|select('odd') %}{{ g|list }}{{ g|list }}{% set ns = namespace(n=0) %}"
                           "{% for x in xs %}{% set ns.n = ns.n + x %}{% endfor %}{{ ns.n }}{% set ns.me = ns %}");
  REQUIRE(t.ok());
  Dict vars;
  vars.set(Value("xs"), json_parse("[1, 2, 3]"));
  auto first = t->render(vars);
  auto second = t->render(vars);
  REQUIRE(first.ok());
  // A generator is iterable once (the second |list is empty), the namespace is new each time.
  CHECK(*first == "[1, 3][]6");
  CHECK(*second == *first);
}

TEST_CASE("JSON reads into ordered dicts and writes as Python's json.dumps", "[jinja]") {
  const Value v = json_parse(R"({"b": 1, "a": [1.5, 1e20, -0.0, true, null, "é\n\u00e9\ud83d\ude00"], "big": 12345678901234567890})");
  REQUIRE(v.is_dict());
  CHECK(v.as_dict().entries()[0].first.as_string() == "b");
  CHECK(v.as_dict().find_str("big")->is_float());
  JsonDumpOptions o;
  CHECK(json_dump(v, o) == "{\"b\": 1, \"a\": [1.5, 1e+20, -0.0, true, null, \"é\\né😀\"], \"big\": 1.2345678901234567e+19}");
  o.ensure_ascii = true;
  o.sort_keys = true;
  o.indent = std::string(1, ' ');  // (assigning a literal trips a false -Wrestrict in GCC 12)
  CHECK(json_dump(json_parse(R"({"b": "é😀", "a": []})"), o) == "{\n \"a\": [],\n \"b\": \"\\u00e9\\ud83d\\ude00\"\n}");
  for (const char* bad : {"", "{", "[1,]", "{\"a\" 1}", "\"\\x\"", "01x", "[1] 2"}) {
    INFO(bad);
    CHECK_THROWS_AS(json_parse(bad), Error);
  }
  CHECK_THROWS_AS(json_parse(repeat("[", 100000)), Error);  // too deep: an error, not a stack overflow
}
