// infer-quantize: converts a GGUF model's weights to another type, or to one of llama-quantize's
// presets (a mixture of types chosen per tensor), writing what llama-quantize writes without an
// importance matrix byte for byte: the same metadata (general.quantization_version and
// general.file_type moved to the end), the same tensors in the same order with the same types,
// the same quantized bytes (src/quant/quantize.hpp, src/quant/quant_recipe.hpp).
//
//   infer-quantize IN.gguf OUT.gguf TYPE [--keep GLOB]... [--pure] [-t THREADS]
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
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cli_common.hpp"
#include "format/gguf.hpp"
#include "format/model_file.hpp"
#include "kernels/cpu/dtype_traits.hpp"
#include "quant/quant_recipe.hpp"

namespace {

using namespace infer;

constexpr const char* kTool = "infer-quantize";
constexpr const char* kUsage =
    "usage: infer-quantize IN.gguf OUT.gguf TYPE [--keep GLOB]... [--pure] [-t THREADS]\n"
    "  TYPE          Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M Q5_K_S Q5_K_M\n"
    "                Q6_K F16 BF16 F32, and Q3_K Q4_K Q5_K for the _M presets (llama-quantize's names)\n"
    "  --keep GLOB   leave tensors whose whole name matches the shell glob (*, ?, [..]) in their\n"
    "                input type, e.g. --keep output.weight --keep 'blk.0.*' (repeatable)\n"
    "  --pure        every converted tensor gets TYPE's base type: no mixture rules\n"
    "  -t THREADS    quantization threads (default: all cores)\n";

struct Options {
  std::string in, out;
  quant::Preset preset{};
  std::vector<std::string> keep;
  bool pure = false;
  int threads = 0;
};

Options parse(int argc, char** argv) {
  Options o;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--keep") o.keep.emplace_back(cli::flag_value(kTool, kUsage, argc, argv, i));
    else if (a == "--pure") o.pure = true;
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
  const auto preset = quant::find_preset(positional[2]);
  if (!preset) cli::usage_error(kTool, "unknown TYPE " + positional[2], kUsage);
  o.preset = *preset;
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
// of rows (rows are independent, so the bytes do not depend on the split). Fails on a non-finite
// weight.
Status convert(const TensorInfo& t, DType type, int threads, std::span<uint8_t> dst) {
  const int64_t n = t.shape[0], rows = t.view.rows();
  const uint64_t row_bytes = dst.size() / static_cast<uint64_t>(std::max<int64_t>(rows, 1));
  const RowFromFloat from_float = cpu_type_traits(type)->from_float;
  const int n_threads = static_cast<int>(std::clamp<int64_t>(rows / 4, 1, threads));
  std::vector<char> finite(static_cast<size_t>(n_threads), 1);
  const auto work = [&](int k) {
    std::vector<float> row(static_cast<size_t>(n));
    for (int64_t r = rows * k / n_threads; r < rows * (k + 1) / n_threads; ++r) {
      dequantize_row(t.dtype, t.view.row(r), row.data(), n);
      for (float v : row)
        if (!std::isfinite(v)) finite[static_cast<size_t>(k)] = 0;
      if (!finite[static_cast<size_t>(k)]) return;
      from_float(row.data(), dst.data() + static_cast<uint64_t>(r) * row_bytes, n);
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

double mib(uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  const auto start = std::chrono::steady_clock::now();
  auto opened = ModelFile::open(o.in);
  if (!opened.ok()) cli::fail(kTool, opened.status().message());
  const ModelFile& file = opened.value();

  std::vector<quant::TensorShape> shapes;
  for (const TensorInfo& t : file.tensors()) shapes.push_back({t.name, t.dtype, t.shape});
  const std::vector<size_t> order = quant::tensor_order(shapes);
  std::vector<quant::TensorShape> ordered;
  quant::RecipeOptions recipe;
  recipe.pure = o.pure;
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
    const auto fill = [&t, type, &o, &progress](std::span<uint8_t> dst) {
      if (type == t.dtype) std::memcpy(dst.data(), t.view.data, dst.size());
      else if (const Status st = convert(t, type, o.threads, dst); !st.is_ok())
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

  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double elements = static_cast<double>(std::max<uint64_t>(n_elements, 1));
  std::fprintf(stderr,
               "%s: %s -> %s (%s): %zu tensors, %d converted | %.2f MiB -> %.2f MiB, %.2f -> %.2f bits per weight | "
               "%.2f s\n",
               kTool, o.in.c_str(), o.out.c_str(), o.preset.name, order.size(), n_converted, mib(total_in),
               mib(total_out), 8.0 * static_cast<double>(total_in) / elements,
               8.0 * static_cast<double>(total_out) / elements, seconds);
  return 0;
}
