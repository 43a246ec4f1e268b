// infer-render-template: a Jinja chat template rendered by libinfer's interpreter, for the
// comparison with Python's jinja2 (tests/integration/jinja_reference.py).
//
//   infer-render-template TEMPLATE VARIABLES.json [--now "YYYY-MM-DD HH:MM:SS"]
//   infer-render-template --batch [--now "YYYY-MM-DD HH:MM:SS"]
//
// VARIABLES.json is a JSON object; each key is a template variable (messages, tools,
// add_generation_prompt, bos_token, ...). --now fixes the time strftime_now() formats. Prints the
// rendering exactly (nothing added) to stdout. Exit status: 0; 1 when the template cannot be
// parsed or rendered (one line on stderr: the error); 2 on a usage error.
//
// --batch renders many in one process (the comparison makes thousands; a process each cost most
// of its time, 7 times more under AddressSanitizer): each stdin line is TEMPLATE, a tab and the
// variables' JSON object on that line; for each, stdout gets "STATUS OUT_BYTES ERR_BYTES\n" and
// then that many bytes of rendering and of error line, STATUS being the one-shot exit status
// (0 or 1). An unreadable template file or a line without a tab ends the run as in one-shot mode.
#include <cstdio>
#include <ctime>
#include <iostream>
#include <string>
#include <utility>

#include "cli_common.hpp"
#include "tokenizer/jinja/json.hpp"
#include "tokenizer/jinja/template.hpp"

namespace {

constexpr const char* kTool = "infer-render-template";
constexpr const char* kUsage =
    "usage: infer-render-template TEMPLATE VARIABLES.json [--now \"YYYY-MM-DD HH:MM:SS\"]\n"
    "       infer-render-template --batch [--now \"YYYY-MM-DD HH:MM:SS\"]   (TEMPLATE<tab>JSON lines on stdin)\n";

// Renders a template's text on a JSON object's variables: true with the rendering in out, or
// false with the error line (the variables' errors name `json_name`).
bool render(const std::string& text, const std::string& json, const std::string& json_name,
            const infer::jinja::RenderOptions& options, std::string& out) {
  using namespace infer;
  jinja::Value variables;
  try {
    variables = jinja::json_parse(json);
  } catch (const jinja::Error& e) {
    out = json_name + ": " + e.what();
    return false;
  }
  if (!variables.is_dict()) {
    out = json_name + ": not a JSON object";
    return false;
  }
  auto tmpl = jinja::Template::parse(text);
  if (!tmpl.ok()) {
    out = cli::one_line(tmpl.status().to_string());
    return false;
  }
  auto rendered = tmpl->render(variables.as_dict(), options);
  if (!rendered.ok()) {
    out = cli::one_line(rendered.status().to_string());
    return false;
  }
  out = std::move(*rendered);
  return true;
}

int batch(const infer::jinja::RenderOptions& options) {
  std::string line, result;
  for (size_t n = 1; std::getline(std::cin, line); ++n) {
    const size_t tab = line.find('\t');
    if (tab == std::string::npos) infer::cli::fail(kTool, "stdin line " + std::to_string(n) + ": no tab after the template's path");
    const std::string text = infer::cli::read_text_file(kTool, line.substr(0, tab));
    const bool ok = render(text, line.substr(tab + 1), "stdin line " + std::to_string(n), options, result);
    std::printf("%d %zu %zu\n", ok ? 0 : 1, ok ? result.size() : size_t{0}, ok ? size_t{0} : result.size());
    std::fwrite(result.data(), 1, result.size(), stdout);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace infer;
  std::string paths[2];
  int n_paths = 0;
  bool batch_mode = false;
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
    } else if (a == "--batch") {
      batch_mode = true;
    } else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (n_paths < 2 && !a.starts_with("-")) {
      paths[n_paths++] = a;
    } else {
      cli::usage_error(kTool, "unexpected argument " + a, kUsage);
    }
  }
  if (batch_mode) {
    if (n_paths != 0) cli::usage_error(kTool, "--batch reads its templates and variables from stdin", kUsage);
    return batch(options);
  }
  if (n_paths != 2) cli::usage_error(kTool, "TEMPLATE and VARIABLES.json are required", kUsage);

  const std::string text = cli::read_text_file(kTool, paths[0]);
  const std::string json = cli::read_text_file(kTool, paths[1]);
  std::string out;
  if (!render(text, json, paths[1], options, out)) cli::fail(kTool, out);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}
