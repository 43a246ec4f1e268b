// infer-imatrix: the importance matrix of a model over a calibration text, as llama-imatrix
// computes it (tools/calibration.hpp), written in llama.cpp's GGUF imatrix format or its legacy
// .dat format (src/format/imatrix_file.hpp), for infer-quantize --imatrix or llama-quantize --imatrix.
//
//   infer-imatrix -m MODEL -f TEXT [-o FILE] [-c CTX] [--chunks N] [-t THREADS]
//                 [--output-format gguf|dat] [--process-output]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "calibration.hpp"
#include "cli_common.hpp"
#include "format/imatrix_file.hpp"

namespace {

using namespace infer;

constexpr const char* kTool = "infer-imatrix";
constexpr const char* kUsage =
    "usage: infer-imatrix -m MODEL -f TEXT [-o FILE] [-c CTX] [--chunks N] [-t THREADS]\n"
    "                     [--output-format gguf|dat] [--process-output]\n"
    "  -m MODEL              model file (default: $INFER_MODEL, else the fetched SmolLM2)\n"
    "  -f TEXT               calibration text; needs at least two chunks of CTX tokens\n"
    "  -o FILE               output file (default: imatrix.gguf)\n"
    "  -c CTX                tokens per chunk (default: 512)\n"
    "  --chunks N            process at most N chunks (default: all the text holds)\n"
    "  -t THREADS            compute threads (default: all cores)\n"
    "  --output-format F     gguf (llama.cpp's current format, default) or dat (its legacy format)\n"
    "  --process-output      also collect output.weight\n";

}  // namespace

int main(int argc, char** argv) {
  tools::CalibrationOptions o;
  o.tool = kTool;
  std::string model, out = "imatrix.gguf", format = "gguf";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-m" || a == "--model") model = cli::flag_value(kTool, kUsage, argc, argv, i);
    else if (a == "-f" || a == "--file") o.text_path = cli::flag_value(kTool, kUsage, argc, argv, i);
    else if (a == "-o" || a == "--output") out = cli::flag_value(kTool, kUsage, argc, argv, i);
    else if (a == "-c" || a == "--ctx-size") o.n_ctx = cli::parse_int(kTool, kUsage, a, cli::flag_value(kTool, kUsage, argc, argv, i), 16, 1 << 20);
    else if (a == "--chunks") o.max_chunks = cli::parse_int(kTool, kUsage, a, cli::flag_value(kTool, kUsage, argc, argv, i), 1, 1LL << 40);
    else if (a == "-t" || a == "--threads")
      o.threads = static_cast<int>(cli::parse_int(kTool, kUsage, a, cli::flag_value(kTool, kUsage, argc, argv, i), 1, 1024));
    else if (a == "--output-format") {
      format = cli::flag_value(kTool, kUsage, argc, argv, i);
      if (format != "gguf" && format != "dat") cli::usage_error(kTool, "--output-format takes gguf or dat", kUsage);
    } else if (a == "--process-output") o.process_output = true;
    else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else cli::usage_error(kTool, "unknown argument " + a, kUsage);
  }
  if (o.text_path.empty()) cli::usage_error(kTool, "needs -f TEXT", kUsage);
  o.model = cli::model_or_default(kTool, model, kUsage);

  auto imatrix = tools::compute_imatrix(o);
  if (!imatrix.ok()) cli::fail(kTool, imatrix.status().message());
  const Status written = format == "dat" ? write_imatrix_dat(*imatrix, out) : write_imatrix_gguf(*imatrix, out);
  if (!written.is_ok()) cli::fail(kTool, written.message());
  std::fprintf(stderr, "%s: %zu matrices over %d chunks of %d tokens -> %s\n", kTool, imatrix->entries.size(), imatrix->chunk_count,
               imatrix->chunk_size, out.c_str());
  return 0;
}
