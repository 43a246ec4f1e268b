// infer-quantize: converts a GGUF model's weights to another type, or to one of llama-quantize's
// presets (a mixture of types chosen per tensor), writing what llama-quantize writes byte for
// byte, with or without an importance matrix: the same metadata (general.quantization_version and
// general.file_type moved to the end, then llama-quantize's quantize.imatrix.* keys), the same
// tensors in the same order with the same types, the same quantized bytes (src/quant/quantize.hpp,
// src/quant/quant_recipe.hpp).
//
//   infer-quantize IN.gguf OUT.gguf TYPE [--imatrix FILE | --calib TEXT [--calib-ctx N]
//                  [--calib-chunks N]] [--include-weights S]... [--exclude-weights S]...
//                  [--keep GLOB]... [--pure] [-t THREADS]
//   infer-quantize IN_DIR OUT_DIR int8|w8a16|fp8|fp8-tensor|fp8-dynamic|int4 [--keep GLOB]... [-t THREADS]
//                  [--imatrix FILE | --calib TEXT [--calib-ctx N] [--calib-chunks N]] [--smooth-alpha A]
//                  [--group 32|64|128] [--asym] [--w8a16 GLOB]... [--no-actorder] [--no-gptq] [--no-rotate]
//
// The second form writes a compressed-tensors checkpoint from a Hugging Face directory
// (compressed_checkpoint.hpp).
//
// --imatrix reads an importance matrix in either of llama.cpp's formats (infer-imatrix's or
// llama-imatrix's); --calib computes one first, in-process, exactly as infer-imatrix does
// (tools/calibration.hpp). The K-quants and Q4_0 .. Q5_1 then weigh each element's rounding error
// by its column's importance (Q8_0 and the float types ignore it).
//
// --keep leaves the tensors whose whole name matches the glob in their input type (so an F32
// output layer stays F32); they skip the mixture rules. Input tensors must be F32, F16 or BF16
// where a conversion is asked for (no requantization). Each tensor is converted as the file is
// written (atomically), so one converted tensor is in memory at a time.
#include <fnmatch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "calibration.hpp"
#include "cli_common.hpp"
#include "compressed_checkpoint.hpp"
#include "format/gguf.hpp"
#include "format/imatrix_file.hpp"
#include "format/model_file.hpp"
#include "kernels/cpu/dtype_traits.hpp"
#include "quant/imatrix.hpp"
#include "quant/quant_recipe.hpp"
#include "quant/quantize.hpp"

namespace {

using namespace infer;

constexpr const char* kTool = "infer-quantize";
constexpr const char* kUsage =
    "usage: infer-quantize IN.gguf OUT.gguf TYPE [--imatrix FILE | --calib TEXT [--calib-ctx N] [--calib-chunks N]]\n"
    "                      [--include-weights S | --exclude-weights S]... [--keep GLOB]... [--pure] [-t THREADS]\n"
    "       infer-quantize IN_DIR OUT_DIR int8|w8a16|fp8|fp8-tensor|fp8-dynamic|int4 [--keep GLOB]... [-t THREADS]\n"
    "                      [--imatrix FILE | --calib TEXT [--calib-ctx N] [--calib-chunks N]] [--smooth-alpha A]\n"
    "                      [--group 32|64|128] [--asym] [--w8a16 GLOB]... [--no-actorder] [--no-gptq] [--no-rotate]\n"
    "  TYPE          Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M Q5_K_S Q5_K_M\n"
    "                Q6_K F16 BF16 F32, and Q3_K Q4_K Q5_K for the _M presets (llama-quantize's names)\n"
    "  int8, fp8, fp8-tensor, fp8-dynamic   a Hugging Face directory to a compressed-tensors checkpoint\n"
    "                directory: the decoder's linear layers as INT8 W8A8 (per-channel weights, per-token\n"
    "                activations), FP8 E4M3 weight-only per channel or per tensor, or W8A8-FP8\n"
    "                (FP8_DYNAMIC: per-channel weights, per-token FP8 activations), as vLLM serves them\n"
    "  w8a16         the same, as INT8 W8A16 (pack-quantized): int8's per-channel weights (with --group,\n"
    "                a scale per group of columns), float activations (with --calib: GPTQ, as for fp8)\n"
    "  int4          the same, as INT4 W4A16 (pack-quantized): 4-bit weights with a scale per group of\n"
    "                columns, float activations (W4A16; W4A16_ASYM with --asym)\n"
    "  --keep GLOB   leave tensors whose whole name matches the shell glob (*, ?, [..]) in their\n"
    "                input type, e.g. --keep output.weight --keep 'blk.0.*' (repeatable; Hugging Face\n"
    "                names for the checkpoint forms, e.g. --keep 'model.layers.0.*')\n"
    "  --pure        every converted tensor gets TYPE's base type: no mixture rules\n"
    "  --imatrix FILE       weigh each element's rounding error by its column's importance: an importance\n"
    "                       matrix of infer-imatrix or llama-imatrix (GGUF or legacy .dat), as\n"
    "                       llama-quantize --imatrix (K-quants, Q4_0 Q4_1 Q5_0 Q5_1; Q8_0 and floats ignore it)\n"
    "  --calib TEXT         compute the importance matrix over TEXT first, as infer-imatrix -f TEXT does\n"
    "                       (with int8, --imatrix or --calib apply SmoothQuant, activations' RMS from it;\n"
    "                       with int4, AWQ's scale search and importance-weighted rounding; with --calib,\n"
    "                       then GPTQ on the calibration's second moments; w8a16 and fp8*: GPTQ alone)\n"
    "  --smooth-alpha A     SmoothQuant's migration strength in [0, 1] (int8; default: 0.5)\n"
    "  --group N            int4: columns per scale, 32, 64 or 128 (default: 128); w8a16: the same (default:\n"
    "                       a scale per row; compressed-tensors' W8A16 preset takes 128)\n"
    "  --asym               int4: a zero point per group besides the scale (default: symmetric)\n"
    "  --w8a16 GLOB         int4: write the linear weights whose whole name matches the glob as W8A16\n"
    "                       instead (8-bit, a scale per row), a mixed-precision checkpoint, e.g.\n"
    "                       --w8a16 'model.layers.*.self_attn.[kv]_proj.weight' (repeatable; --keep wins)\n"
    "  --no-actorder        int4 with --calib: GPTQ in column order (default: activation order, the columns by\n"
    "                       decreasing second moment, groups static: compressed-tensors' actorder \"weight\";\n"
    "                       --actorder says so explicitly)\n"
    "  --no-gptq            int8 / int4 with --calib: no GPTQ error compensation (SmoothQuant or AWQ only)\n"
    "  --no-rotate          int8: no online Hadamard rotation of the linear layers' inputs (transform_config;\n"
    "                       default: rotated, for the per-token quantization of the activations)\n"
    "  --calib-ctx N        tokens per calibration chunk (default: 512)\n"
    "  --calib-chunks N     calibration chunks at most (default: all the text holds)\n"
    "  --include-weights S  use the importance matrix only for tensors whose name contains S (repeatable)\n"
    "  --exclude-weights S  use it for every tensor except those whose name contains S (repeatable)\n"
    "  -t THREADS    quantization threads (default: all cores)\n";

struct Options {
  std::string in, out;
  std::string compressed;  // int8, w8a16, fp8, fp8-tensor, fp8-dynamic or int4: the compressed-tensors form
  quant::Preset preset{};
  std::vector<std::string> keep, w8a16;
  bool pure = false;
  int threads = 0;
  std::string imatrix, calib;
  int64_t calib_ctx = 512, calib_chunks = -1;
  double smooth_alpha = 0.5;
  int64_t group = 0;  // int4's columns per scale; 0: not given (128)
  bool asym = false, no_gptq = false, no_rotate = false, actorder = false, no_actorder = false;
  std::vector<std::string> include_weights, exclude_weights;
};

Options parse(int argc, char** argv) {
  Options o;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--keep") o.keep.emplace_back(cli::flag_value(kTool, kUsage, argc, argv, i));
    else if (a == "--w8a16") o.w8a16.emplace_back(cli::flag_value(kTool, kUsage, argc, argv, i));
    else if (a == "--pure") o.pure = true;
    else if (a == "--imatrix") o.imatrix = cli::flag_value(kTool, kUsage, argc, argv, i);
    else if (a == "--calib") o.calib = cli::flag_value(kTool, kUsage, argc, argv, i);
    else if (a == "--calib-ctx") o.calib_ctx = cli::parse_int(kTool, kUsage, a, cli::flag_value(kTool, kUsage, argc, argv, i), 16, 1 << 20);
    else if (a == "--calib-chunks")
      o.calib_chunks = cli::parse_int(kTool, kUsage, a, cli::flag_value(kTool, kUsage, argc, argv, i), 1, 1LL << 40);
    else if (a == "--smooth-alpha") {
      const std::string v = cli::flag_value(kTool, kUsage, argc, argv, i);
      char* end = nullptr;
      o.smooth_alpha = std::strtod(v.c_str(), &end);
      if (end == v.c_str() || *end != '\0' || !(o.smooth_alpha >= 0.0 && o.smooth_alpha <= 1.0))
        cli::usage_error(kTool, "--smooth-alpha must be a number in [0, 1]", kUsage);
    } else if (a == "--group") {
      o.group = cli::parse_int(kTool, kUsage, a, cli::flag_value(kTool, kUsage, argc, argv, i), 32, 128);
      if (o.group != 32 && o.group != 64 && o.group != 128) cli::usage_error(kTool, "--group must be 32, 64 or 128", kUsage);
    } else if (a == "--asym") o.asym = true;
    else if (a == "--no-gptq") o.no_gptq = true;
    else if (a == "--actorder") o.actorder = true;
    else if (a == "--no-actorder") o.no_actorder = true;
    else if (a == "--no-rotate") o.no_rotate = true;
    else if (a == "--include-weights") o.include_weights.emplace_back(cli::flag_value(kTool, kUsage, argc, argv, i));
    else if (a == "--exclude-weights") o.exclude_weights.emplace_back(cli::flag_value(kTool, kUsage, argc, argv, i));
    else if (a == "-t" || a == "--threads")
      o.threads = static_cast<int>(cli::parse_int(kTool, kUsage, a, cli::flag_value(kTool, kUsage, argc, argv, i), 1, 1024));
    else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (a.size() > 1 && a[0] == '-') cli::usage_error(kTool, "unknown argument " + a, kUsage);
    else positional.push_back(a);
  }
  if (positional.size() != 3) cli::usage_error(kTool, "needs IN.gguf OUT.gguf TYPE", kUsage);
  o.in = positional[0];
  o.out = positional[1];
  if (tools::is_compressed_scheme(positional[2])) {
    o.compressed = positional[2];
    if (o.pure || !o.include_weights.empty() || !o.exclude_weights.empty())
      cli::usage_error(kTool, positional[2] + " takes --keep, -t and (int8, int4) --imatrix / --calib, (w8a16, fp8) --calib only",
                       kUsage);
    if (o.compressed != "int8" && o.compressed != "int4" && (!o.imatrix.empty() || o.no_gptq))
      cli::usage_error(kTool, o.compressed + " takes --calib (GPTQ) only: no --imatrix, no --no-gptq", kUsage);
    if (o.group != 0 && o.compressed != "int4" && o.compressed != "w8a16")
      cli::usage_error(kTool, "--group is int4's and w8a16's", kUsage);
    if ((o.asym || !o.w8a16.empty()) && o.compressed != "int4") cli::usage_error(kTool, "--asym and --w8a16 are int4's", kUsage);
    if (o.no_rotate && o.compressed != "int8") cli::usage_error(kTool, "--no-rotate is int8's", kUsage);
    if ((o.actorder || o.no_actorder) && (o.compressed != "int4" || o.calib.empty() || o.no_gptq))
      cli::usage_error(kTool, "--actorder and --no-actorder are int4's GPTQ's: they need --calib (and no --no-gptq)", kUsage);
    if (o.actorder && o.no_actorder) cli::usage_error(kTool, "--actorder and --no-actorder exclude each other", kUsage);
    if (o.threads == 0) o.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    return o;
  }
  if (o.group != 0 || o.asym || !o.w8a16.empty() || o.actorder || o.no_actorder || o.no_gptq || o.no_rotate)
    cli::usage_error(kTool,
                     "--group (int4, w8a16), --asym, --w8a16 and --[no-]actorder (int4), --no-gptq (int8, int4) and --no-rotate "
                     "(int8) "
                     "are for the "
                     "checkpoint forms",
                     kUsage);
  const auto preset = quant::find_preset(positional[2]);
  if (!preset) cli::usage_error(kTool, "unknown TYPE " + positional[2], kUsage);
  o.preset = *preset;
  if (!o.imatrix.empty() && !o.calib.empty()) cli::usage_error(kTool, "--imatrix and --calib exclude each other", kUsage);
  if (!o.include_weights.empty() && !o.exclude_weights.empty())
    cli::usage_error(kTool, "--include-weights and --exclude-weights exclude each other", kUsage);
  if (o.threads == 0) o.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return o;
}

// An integer key, or the first element of an integer array (per-layer head counts).
std::optional<int64_t> first_integer(const Metadata& md, const std::string& key) {
  if (auto v = md.get_integer(key)) return v;
  if (const Array* a = md.get_array(key); a && a->count > 0) return a->integer_at(0);
  return std::nullopt;
}

// What llama.cpp's rules read from its hparams, from the same keys.
quant::ModelFacts model_facts(const Metadata& md) {
  quant::ModelFacts f;
  if (const std::string* a = md.get_string("general.architecture")) f.arch = *a;
  const std::string p = f.arch + ".";
  f.n_layer = static_cast<int>(md.get_integer(p + "block_count").value_or(0));
  const int64_t n_head = first_integer(md, p + "attention.head_count").value_or(0);
  const int64_t n_head_kv = first_integer(md, p + "attention.head_count_kv").value_or(n_head);
  f.n_gqa = n_head_kv != 0 ? static_cast<int>(n_head / n_head_kv) : 0;
  f.n_expert = static_cast<int>(md.get_integer(p + "expert_count").value_or(0));
  // llama.cpp's LLM_TYPE_70B, the only model size its rules look at.
  if (f.arch == "llama") f.is_70b = f.n_layer == 80 && n_head != n_head_kv;
  else if (f.arch == "qwen2" || f.arch == "deci" || f.arch == "olmo") f.is_70b = f.n_layer == 80;
  else if (f.arch == "jais2") f.is_70b = f.n_layer == 68;
  return f;
}

// Progress on stderr: a bar redrawn in place on a terminal, else a line every 10%.
class Progress {
 public:
  explicit Progress(uint64_t total) : total_(std::max<uint64_t>(total, 1)), tty_(isatty(STDERR_FILENO) != 0) {}
  void advance(uint64_t bytes, const std::string& tensor) {
    done_ += bytes;
    const int percent = static_cast<int>(done_ * 100 / total_);
    if (tty_) {
      constexpr int kWidth = 30;
      const int filled = percent * kWidth / 100;
      std::fprintf(stderr, "\r\033[K%s: [%s%s] %3d%% %s", kTool, std::string(static_cast<size_t>(filled), '#').c_str(),
                   std::string(static_cast<size_t>(kWidth - filled), ' ').c_str(), percent, tensor.c_str());
      if (done_ >= total_) std::fprintf(stderr, "\r\033[K");
    } else if (percent / 10 > shown_ / 10) {
      std::fprintf(stderr, "%s: %d%% of the tensor data\n", kTool, percent / 10 * 10);
      shown_ = percent;
    }
    std::fflush(stderr);
  }

 private:
  uint64_t total_;
  uint64_t done_ = 0;
  bool tty_;
  int shown_ = 0;
};

// The rows of `t` converted to `type` into dst, on `threads` threads each taking a contiguous run
// of rows (rows are independent, so the bytes do not depend on the split). With importance
// weights (shape[0] per stacked matrix) the types that read them are quantized with them. Fails
// on a non-finite weight.
Status convert(const TensorInfo& t, DType type, int threads, const float* importance, std::span<uint8_t> dst) {
  const int64_t n = t.shape[0], rows = t.view.rows(), rows_per_matrix = std::max<int64_t>(t.shape[1], 1);
  const uint64_t row_bytes = dst.size() / static_cast<uint64_t>(std::max<int64_t>(rows, 1));
  const RowFromFloat from_float = cpu_type_traits(type)->from_float;
  const RowQuantizerWeighted weighted = importance ? weighted_quantizer(type) : nullptr;
  const int n_threads = static_cast<int>(std::clamp<int64_t>(rows / 4, 1, threads));
  std::vector<char> finite(static_cast<size_t>(n_threads), 1);
  const auto work = [&](int k) {
    std::vector<float> row(static_cast<size_t>(n));
    for (int64_t r = rows * k / n_threads; r < rows * (k + 1) / n_threads; ++r) {
      dequantize_row(t.dtype, t.view.row(r), row.data(), n);
      for (float v : row)
        if (!std::isfinite(v)) finite[static_cast<size_t>(k)] = 0;
      if (!finite[static_cast<size_t>(k)]) return;
      uint8_t* out = dst.data() + static_cast<uint64_t>(r) * row_bytes;
      if (weighted) weighted(row.data(), out, n, importance + (r / rows_per_matrix) * n);
      else from_float(row.data(), out, n);
    }
  };
  std::vector<std::thread> pool;
  for (int k = 1; k < n_threads; ++k) pool.emplace_back(work, k);
  work(0);
  for (auto& th : pool) th.join();
  if (std::find(finite.begin(), finite.end(), 0) != finite.end())
    return malformed_file(t.name + ": a weight is not finite (cannot quantize)");
  return Status::ok();
}

// The importance matrix of --imatrix or --calib, with llama-quantize's --include-weights /
// --exclude-weights applied (substring matches); empty without one.
struct Importance {
  std::map<std::string, std::vector<float>> weights;  // per tensor name
  std::string file;                                   // --imatrix's path ("" for --calib)
  std::string dataset;                                // the first calibration text
  int32_t chunk_count = 0;
};

Importance load_importance(const Options& o, const std::function<Status(const MatmulInput&)>& observe = {}) {
  Importance imp;
  Imatrix m;
  if (!o.imatrix.empty()) {
    auto read = read_imatrix(o.imatrix);
    if (!read.ok()) cli::fail(kTool, read.status().message());
    m = std::move(read).value();
    imp.file = o.imatrix;
  } else if (!o.calib.empty()) {
    tools::CalibrationOptions c;
    c.model = o.in;
    c.text_path = o.calib;
    c.n_ctx = o.calib_ctx;
    c.max_chunks = o.calib_chunks;
    c.threads = o.threads;
    c.tool = kTool;
    c.observe = observe;
    auto computed = tools::compute_imatrix(c);
    if (!computed.ok()) cli::fail(kTool, computed.status().message());
    m = std::move(computed).value();
  } else {
    return imp;
  }
  imp.weights = quant::importance(m);
  if (!m.datasets.empty()) imp.dataset = m.datasets.front();
  imp.chunk_count = m.chunk_count;
  const auto contains_any = [](const std::string& name, const std::vector<std::string>& parts) {
    return std::any_of(parts.begin(), parts.end(), [&](const std::string& p) { return name.find(p) != std::string::npos; });
  };
  for (auto it = imp.weights.begin(); it != imp.weights.end();) {
    const bool drop = (!o.exclude_weights.empty() && contains_any(it->first, o.exclude_weights)) ||
                      (!o.include_weights.empty() && !contains_any(it->first, o.include_weights));
    it = drop ? imp.weights.erase(it) : std::next(it);
  }
  for (const auto& [name, w] : imp.weights)
    for (float v : w)
      if (!std::isfinite(v)) cli::fail(kTool, "the importance matrix has a non-finite value for " + name);
  return imp;
}

double mib(uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

// The summary line: what was written, sizes and bits per weight in and out, seconds since start.
void print_summary(const Options& o, const std::string& what, const std::string& counts, uint64_t bytes_in,
                   uint64_t bytes_out, uint64_t n_elements, std::chrono::steady_clock::time_point start) {
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double elements = static_cast<double>(std::max<uint64_t>(n_elements, 1));
  std::fprintf(stderr, "%s: %s -> %s (%s): %s | %.2f MiB -> %.2f MiB, %.2f -> %.2f bits per weight | %.2f s\n", kTool,
               o.in.c_str(), o.out.c_str(), what.c_str(), counts.c_str(), mib(bytes_in), mib(bytes_out),
               8.0 * static_cast<double>(bytes_in) / elements, 8.0 * static_cast<double>(bytes_out) / elements, seconds);
}

// The compressed-tensors form: a Hugging Face directory to a checkpoint directory.
int write_compressed(const Options& o) {
  const auto start = std::chrono::steady_clock::now();
  tools::CompressedOptions c;
  c.in = o.in;
  c.out = o.out;
  c.scheme = o.compressed;
  c.keep = o.keep;
  c.w8a16 = o.w8a16;
  // int4's GPTQ runs in activation order unless told not to (llm-compressor's GPTQ defaults to it too).
  c.actorder = o.compressed == "int4" && !o.calib.empty() && !o.no_gptq && !o.no_actorder;
  c.threads = o.threads;
  c.group = o.group != 0 ? o.group : 128;
  if (o.compressed == "w8a16") c.w8a16_group = o.group;
  c.symmetric = !o.asym;
  c.rotate = !o.no_rotate;
  std::map<std::string, std::vector<float>> rms;
  // GPTQ (int8, int4 with a calibration text): the inputs' second moments, from the same run.
  std::optional<tools::HessianCollector> hessians;
  if (!o.calib.empty() && !o.no_gptq)
    hessians.emplace(o.threads);
  if (!o.calib.empty() || !o.imatrix.empty()) {  // SmoothQuant's / AWQ's statistic: the importance matrix's root
    const Importance importance =
        hessians ? load_importance(o, [&](const MatmulInput& in) { return hessians->add(in); }) : load_importance(o);
    if (hessians) c.hessians = &hessians->result();
    for (const auto& [name, mean_square] : importance.weights) {
      std::vector<float>& r = rms[name];
      for (float v : mean_square) r.push_back(std::sqrt(v));
    }
    c.activation_rms = &rms;
    c.smooth_alpha = o.smooth_alpha;
    c.calibration_note = !o.imatrix.empty() ? "importance matrix " + o.imatrix
                                            : o.calib + ", chunks of " + std::to_string(o.calib_ctx) + " tokens" +
                                                  (o.calib_chunks > 0 ? ", at most " + std::to_string(o.calib_chunks) : std::string());
  }
  std::optional<Progress> progress;
  c.progress = [&](uint64_t bytes, const std::string& name) { progress->advance(bytes, name); };
  // The input's size for the bar: the shards' bytes.
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(o.in, ec))
    if (e.path().extension() == ".safetensors") total += e.file_size(ec);
  progress.emplace(total);
  std::optional<Progress> search;  // AWQ's scale search first, a bar of its own
  if (c.scheme == "int4" && c.activation_rms)
    c.on_awq_group = [&](const std::string& key, int done, int groups) {
      if (!search) search.emplace(static_cast<uint64_t>(groups));
      search->advance(1, "AWQ " + key + " (" + std::to_string(done) + "/" + std::to_string(groups) + ")");
    };
  auto written = tools::write_compressed_checkpoint(c);
  if (!written.ok()) cli::fail(kTool, written.status().message());
  const tools::CompressedSummary& s = *written;
  char linear_bpw[32];
  std::snprintf(linear_bpw, sizeof linear_bpw, "%.2f",
                8.0 * static_cast<double>(s.linear_bytes_out) / static_cast<double>(std::max<uint64_t>(s.linear_elements, 1)));
  print_summary(o, "compressed-tensors " + o.compressed,
                std::to_string(s.tensors) + " tensors, " + std::to_string(s.quantized) + " linear layers quantized (the linear layers: " +
                    linear_bpw + " bits per weight)",
                s.bytes_in, s.bytes_out, s.elements, start);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  if (!o.compressed.empty()) return write_compressed(o);
  const auto start = std::chrono::steady_clock::now();
  const Importance importance = load_importance(o);
  auto opened = ModelFile::open(o.in);
  if (!opened.ok()) cli::fail(kTool, opened.status().message());
  const ModelFile& file = opened.value();
  for (const TensorInfo& t : file.tensors())
    if (t.input_rotation != 0)
      cli::fail(kTool, o.in + ": " + t.name + " has its input rotated online (transform_config), which GGUF files cannot "
                                             "record");

  std::vector<quant::TensorShape> shapes;
  for (const TensorInfo& t : file.tensors()) shapes.push_back({t.name, t.dtype, t.shape});
  const std::vector<size_t> order = quant::tensor_order(shapes);
  std::vector<quant::TensorShape> ordered;
  quant::RecipeOptions recipe;
  recipe.pure = o.pure;
  recipe.has_imatrix = !importance.weights.empty();
  for (size_t i : order) {
    ordered.push_back(shapes[i]);
    bool keep = false;
    for (const std::string& glob : o.keep) keep = keep || fnmatch(glob.c_str(), shapes[i].name.c_str(), 0) == 0;
    recipe.keep.push_back(keep);
  }
  const std::vector<DType> types =
      quant::choose_types(o.preset, model_facts(file.metadata()), ordered, recipe);

  uint64_t total_in = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    const TensorInfo& t = file.tensors()[order[k]];
    total_in += t.nbytes;
    // Only float rows are converted: no requantizing, and no integer tensors.
    if (types[k] != t.dtype && (dtype_traits(t.dtype)->quantized || !can_dequantize(t.dtype)))
      cli::fail(kTool, o.in + ": " + t.name + ": requantizing or converting from " + std::string(dtype_name(t.dtype)) +
                           " is not supported (start from an F32, F16 or BF16 model)");
  }

  gguf::Writer writer;
  writer.metadata() = file.metadata();
  for (const char* key : {"general.quantization_version", "general.file_type", "split.no", "split.count",
                          "split.tensors.count"})
    writer.metadata().erase(key);
  writer.metadata().set("general.quantization_version", uint32_t{2});  // ggml's GGML_QNT_VERSION
  writer.metadata().set("general.file_type", static_cast<uint32_t>(o.preset.ftype));
  if (!importance.weights.empty()) {
    // llama-quantize's record of the importance matrix (its strings cut to 127 bytes).
    const auto cut = [](const std::string& v) { return v.substr(0, 127); };
    for (const char* key : {"quantize.imatrix.file", "quantize.imatrix.dataset", "quantize.imatrix.entries_count",
                            "quantize.imatrix.chunks_count"})
      writer.metadata().erase(key);
    if (!importance.file.empty()) writer.metadata().set("quantize.imatrix.file", cut(importance.file));
    if (!importance.dataset.empty()) writer.metadata().set("quantize.imatrix.dataset", cut(importance.dataset));
    writer.metadata().set("quantize.imatrix.entries_count", static_cast<uint32_t>(importance.weights.size()));
    if (importance.chunk_count > 0)
      writer.metadata().set("quantize.imatrix.chunks_count", static_cast<uint32_t>(importance.chunk_count));
  }

  // Each tensor is produced while the file is written: one converted tensor in memory at a time.
  Progress progress(total_in);
  uint64_t total_out = 0, n_elements = 0;
  int n_converted = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    const TensorInfo& t = file.tensors()[order[k]];
    const DType type = types[k];
    n_converted += type != t.dtype;
    total_out += *dtype_row_bytes(type, static_cast<uint64_t>(t.shape[0])) * static_cast<uint64_t>(t.view.rows());
    n_elements += static_cast<uint64_t>(t.numel());
    // llama-quantize's lookup: by name; a size other than one weight per column of each stacked
    // matrix is an error, except for the token embedding.
    const float* weights = nullptr;
    if (type != t.dtype)
      if (auto it = importance.weights.find(t.name); it != importance.weights.end()) {
        if (it->second.size() == static_cast<size_t>(t.shape[0] * t.shape[2])) weights = it->second.data();
        else if (t.name != "token_embd.weight")
          cli::fail(kTool, "importance matrix size " + std::to_string(it->second.size()) + " is different from tensor size " +
                               std::to_string(t.shape[0] * t.shape[2]) + " for " + t.name);
      }
    const auto fill = [&t, type, &o, &progress, weights](std::span<uint8_t> dst) {
      if (type == t.dtype) std::memcpy(dst.data(), t.view.data, dst.size());
      else if (const Status st = convert(t, type, o.threads, weights, dst); !st.is_ok())
        return malformed_file(o.in + ": " + st.message());
      progress.advance(t.nbytes, t.name);
      return Status::ok();
    };
    // ggml writes only the dimensions up to the last one above 1.
    const auto n_dims = static_cast<size_t>(quant::significant_dims(t.shape));
    const Status added = writer.add_tensor(t.name, type, std::span(t.shape.data(), n_dims), fill);
    if (!added.is_ok()) cli::fail(kTool, added.message());
  }
  if (const Status s = writer.write(o.out); !s.is_ok()) cli::fail(kTool, s.message());

  print_summary(o, o.preset.name, std::to_string(order.size()) + " tensors, " + std::to_string(n_converted) + " converted",
                total_in, total_out, n_elements, start);
  return 0;
}
