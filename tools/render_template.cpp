// infer-render-template: a Jinja chat template rendered by libinfer's interpreter, for the
// comparison with Python's jinja2 (tests/integration/jinja_reference.py).
//
//   infer-render-template TEMPLATE VARIABLES.json [--now "YYYY-MM-DD HH:MM:SS"]
//
// VARIABLES.json is a JSON object; each key is a template variable (messages, tools,
// add_generation_prompt, bos_token, ...). --now fixes the time strftime_now() formats. Prints the
// rendering exactly (nothing added) to stdout. Exit status: 0; 1 when the template cannot be
// parsed or rendered (one line on stderr: the error); 2 on a usage error.
#include <cstdio>
#include <ctime>
#include <string>

#include "cli_common.hpp"
#include "tokenizer/jinja/json.hpp"
#include "tokenizer/jinja/template.hpp"

namespace {

constexpr const char* kTool = "infer-render-template";
constexpr const char* kUsage = "usage: infer-render-template TEMPLATE VARIABLES.json [--now \"YYYY-MM-DD HH:MM:SS\"]\n";

}  // namespace

int main(int argc, char** argv) {
  using namespace infer;
  std::string paths[2];
  int n_paths = 0;
  jinja::RenderOptions options;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--now") {
      const char* v = cli::flag_value(kTool, kUsage, argc, argv, i);
      std::tm t{};
      if (std::sscanf(v, "%d-%d-%d %d:%d:%d", &t.tm_year, &t.tm_mon, &t.tm_mday, &t.tm_hour, &t.tm_min, &t.tm_sec) != 6)
        cli::usage_error(kTool, "--now: expected \"YYYY-MM-DD HH:MM:SS\"", kUsage);
      t.tm_year -= 1900;
      t.tm_mon -= 1;
      std::tm normalized = t;
      timegm(&normalized);  // fills in the weekday and the day of the year
      options.now = normalized;
    } else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (n_paths < 2 && !a.starts_with("-")) {
      paths[n_paths++] = a;
    } else {
      cli::usage_error(kTool, "unexpected argument " + a, kUsage);
    }
  }
  if (n_paths != 2) cli::usage_error(kTool, "TEMPLATE and VARIABLES.json are required", kUsage);

  const std::string text = cli::read_text_file(kTool, paths[0]);
  const std::string json = cli::read_text_file(kTool, paths[1]);
  jinja::Value variables;
  try {
    variables = jinja::json_parse(json);
  } catch (const jinja::Error& e) {
    cli::fail(kTool, paths[1] + ": " + e.what());
  }
  if (!variables.is_dict()) cli::fail(kTool, paths[1] + ": not a JSON object");
  auto tmpl = jinja::Template::parse(text);
  if (!tmpl.ok()) cli::fail(kTool, cli::one_line(tmpl.status().to_string()));
  auto out = tmpl->render(variables.as_dict(), options);
  if (!out.ok()) cli::fail(kTool, cli::one_line(out.status().to_string()));
  std::fwrite(out->data(), 1, out->size(), stdout);
  return 0;
}
