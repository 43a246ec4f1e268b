#include "compressed_checkpoint.hpp"

#include <fnmatch.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include "core/status_macros.hpp"
#include "format/json.hpp"
#include "format/safetensors.hpp"
#include "kernels/cpu/dtype_traits.hpp"
#include "quant/fp8_rows.hpp"
#include "quant/int8_rows.hpp"

namespace infer::tools {
namespace {

namespace fs = std::filesystem;
using json::Json;

Result<std::string> read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) return io_error(p.string() + ": cannot read");
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

Status write_text(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary);
  f << text;
  f.close();
  if (!f) return io_error(p.string() + ": cannot write");
  return Status::ok();
}

std::optional<DType> float_dtype(safetensors::Dtype t) {
  switch (t) {
    case safetensors::Dtype::f32: return DType::f32;
    case safetensors::Dtype::f16: return DType::f16;
    case safetensors::Dtype::bf16: return DType::bf16;
    default: return std::nullopt;
  }
}

bool is_vision(const std::string& name) {
  for (std::string_view p : {"vision_tower.", "multi_modal_projector.", "model.vision_tower.", "model.multi_modal_projector."})
    if (name.rfind(p, 0) == 0) return true;
  return false;
}

// A linear layer of the text decoder: "...layers.N.<block>.<x>_proj.weight", 2-D.
bool is_decoder_linear(const safetensors::Tensor& t) {
  if (t.shape.size() != 2 || !t.name.ends_with("_proj.weight") || is_vision(t.name)) return false;
  return t.name.find("layers.") != std::string::npos;
}

// Rows [begin, end) of a float matrix quantized: codes into `codes` (rows x n bytes), one scale
// per row into `scales` (per tensor: every row gets `tensor_scale`).
Status quantize_rows(const safetensors::Tensor& t, DType src, const std::string& scheme, float tensor_scale,
                     int64_t begin, int64_t end, uint8_t* codes, float* scales) {
  const int64_t n = t.shape[1];
  const uint64_t src_row = static_cast<uint64_t>(n) * safetensors::dtype_size(t.dtype);
  std::vector<float> row(static_cast<size_t>(n));
  std::vector<uint8_t> packed(static_cast<size_t>(n + 8));
  for (int64_t r = begin; r < end; ++r) {
    dequantize_row(src, t.data + static_cast<uint64_t>(r) * src_row, row.data(), n);
    for (float v : row)
      if (!std::isfinite(v)) return malformed_file(t.name + ": a weight is not finite (cannot quantize)");
    uint8_t* out = codes + static_cast<uint64_t>(r) * static_cast<uint64_t>(n);
    if (scheme == "int8") {
      quantize_row_i8_row(row.data(), packed.data(), n);
      i8_rows_to_compressed(packed.data(), 1, n, reinterpret_cast<int8_t*>(out), scales + r);
    } else {
      if (scheme == "fp8") quantize_row_f8_row(row.data(), packed.data(), n);
      else quantize_row_f8_scaled(row.data(), packed.data(), n, tensor_scale);
      f8_rows_to_compressed(packed.data(), 1, n, out, scales + r);
    }
  }
  return Status::ok();
}

Json scheme_config(const std::string& scheme, const std::vector<std::string>& ignore) {
  const bool is_int = scheme == "int8";
  const Json weights = {{"num_bits", 8},         {"type", is_int ? "int" : "float"},
                        {"strategy", scheme == "fp8-tensor" ? "tensor" : "channel"},
                        {"symmetric", true},     {"dynamic", false},
                        {"group_size", nullptr}, {"observer", "minmax"}};
  // Activations dynamic per token (INT8_W8A8, FP8_DYNAMIC): what vLLM runs; libinfer keeps FP8
  // models' activations in F32.
  const Json activations = {{"num_bits", 8},     {"type", is_int ? "int" : "float"}, {"strategy", "token"},
                            {"symmetric", true}, {"dynamic", true},                  {"group_size", nullptr}};
  return {{"quant_method", "compressed-tensors"},
          {"format", is_int ? "int-quantized" : "float-quantized"},
          {"quantization_status", "compressed"},
          {"config_groups",
           {{"group_0",
             {{"targets", {"Linear"}}, {"weights", weights}, {"input_activations", activations}, {"output_activations", nullptr}}}}},
          {"ignore", ignore},
          {"kv_cache_scheme", nullptr}};
}

}  // namespace

bool is_compressed_scheme(const std::string& scheme) { return scheme == "int8" || scheme == "fp8" || scheme == "fp8-tensor"; }

Result<CompressedSummary> write_compressed_checkpoint(const CompressedOptions& o) {
  const fs::path in(o.in), out(o.out);
  std::error_code ec;
  if (!is_compressed_scheme(o.scheme)) return invalid_argument("unknown compressed-tensors scheme " + o.scheme);
  if (!fs::is_directory(in, ec) || !fs::is_regular_file(in / "config.json", ec))
    return invalid_argument(o.in + ": " + o.scheme +
                            " writes a compressed-tensors checkpoint from a Hugging Face model directory (config.json and "
                            "safetensors), and this is none (scripts/gguf-to-hf makes one from an F32/F16/BF16 GGUF)");
  if (fs::exists(out, ec) && !(fs::is_directory(out, ec) && fs::is_empty(out, ec)))
    return invalid_argument(o.out + ": exists and is not an empty directory (the checkpoint is a new directory)");

  INFER_ASSIGN_OR_RETURN(std::string config_text, read_text(in / "config.json"));
  INFER_ASSIGN_OR_RETURN(Json config, json::parse(config_text, (in / "config.json").string()));
  if (!config.is_object()) return malformed_file((in / "config.json").string() + ": not a JSON object");
  if (const Json* q = json::member(config, "quantization_config"); q && !q->is_null())
    return unsupported((in / "config.json").string() + ": the model is quantized already (quantization_config); start "
                       "from F32, F16 or BF16 weights");

  // The shards, in the index's order.
  std::vector<std::string> shard_names;
  if (fs::is_regular_file(in / "model.safetensors.index.json", ec)) {
    INFER_ASSIGN_OR_RETURN(std::string text, read_text(in / "model.safetensors.index.json"));
    INFER_ASSIGN_OR_RETURN(safetensors::ShardIndex index,
                           safetensors::parse_shard_index(text, (in / "model.safetensors.index.json").string()));
    shard_names = index.shards;
  } else {
    shard_names.push_back("model.safetensors");
  }
  std::vector<safetensors::File> shards;
  for (const std::string& s : shard_names) {
    INFER_ASSIGN_OR_RETURN(safetensors::File f, safetensors::read_file((in / s).string()));
    shards.push_back(std::move(f));
  }

  CompressedSummary sum;
  std::vector<std::string> ignore;
  bool has_lm_head = false, vision = false, projector = false;
  safetensors::Writer writer;
  writer.metadata().emplace_back("format", "pt");
  for (const safetensors::File& shard : shards) {
    for (const safetensors::Tensor& t : shard.tensors) {
      ++sum.tensors;
      sum.bytes_in += t.nbytes();
      int64_t numel = 1;
      for (int64_t d : t.shape) numel *= d;
      sum.elements += static_cast<uint64_t>(numel);
      has_lm_head = has_lm_head || t.name == "lm_head.weight";
      vision = vision || t.name.find("vision_tower.") != std::string::npos;
      projector = projector || t.name.find("multi_modal_projector.") != std::string::npos;
      bool kept = false;
      for (const std::string& glob : o.keep) kept = kept || fnmatch(glob.c_str(), t.name.c_str(), 0) == 0;
      const std::optional<DType> src = float_dtype(t.dtype);
      const bool linear = is_decoder_linear(t);
      const int64_t n = linear ? t.shape[1] : 0, rows = linear ? t.shape[0] : 0;
      const bool fits = n > 0 && n % kI8RowBlock == 0 && (o.scheme != "int8" || n <= kI8RowMaxElements);
      if (!linear || !src || kept || !fits) {
        if (linear) ignore.push_back(t.name.substr(0, t.name.size() - 7));  // the module: name less ".weight"
        const safetensors::Tensor* tp = &t;
        INFER_RETURN_IF_ERROR(writer.add_tensor(t.name, t.dtype, t.shape, [tp, &o](std::span<uint8_t> dst) {
          std::copy(tp->data, tp->data + tp->nbytes(), dst.data());
          if (o.progress) o.progress(tp->nbytes(), tp->name);
          return Status::ok();
        }));
        sum.bytes_out += t.nbytes();
        continue;
      }
      ++sum.quantized;
      const bool per_tensor = o.scheme == "fp8-tensor";
      auto scales = std::make_shared<std::vector<float>>(static_cast<size_t>(rows));
      const safetensors::Tensor* tp = &t;
      const DType from = *src;
      const auto codes = [tp, from, scales, &o, rows, n](std::span<uint8_t> dst) -> Status {
        float tensor_scale = 0.0f;
        if (o.scheme == "fp8-tensor") {  // max|W| / 448 over the matrix, as --weight-type fp8-tensor
          std::vector<float> row(static_cast<size_t>(n));
          const uint64_t src_row = static_cast<uint64_t>(n) * safetensors::dtype_size(tp->dtype);
          float amax = 0.0f;
          for (int64_t r = 0; r < rows; ++r) {
            dequantize_row(from, tp->data + static_cast<uint64_t>(r) * src_row, row.data(), n);
            for (float v : row) amax = std::max(amax, std::fabs(v));
          }
          tensor_scale = amax / 448.0f;
        }
        const int n_threads = static_cast<int>(std::clamp<int64_t>(rows / 16, 1, std::max(1, o.threads)));
        std::vector<Status> status(static_cast<size_t>(n_threads));
        const auto work = [&](int k) {
          status[static_cast<size_t>(k)] = quantize_rows(*tp, from, o.scheme, tensor_scale, rows * k / n_threads,
                                                         rows * (k + 1) / n_threads, dst.data(), scales->data());
        };
        std::vector<std::thread> pool;
        for (int k = 1; k < n_threads; ++k) pool.emplace_back(work, k);
        work(0);
        for (auto& th : pool) th.join();
        for (const Status& s : status)
          if (!s.is_ok()) return s;
        if (o.progress) o.progress(tp->nbytes(), tp->name);
        return Status::ok();
      };
      INFER_RETURN_IF_ERROR(writer.add_tensor(t.name, o.scheme == "int8" ? safetensors::Dtype::i8 : safetensors::Dtype::f8_e4m3,
                                              t.shape, codes));
      const std::string module = t.name.substr(0, t.name.size() - 7);
      std::vector<int64_t> scale_shape = per_tensor ? std::vector<int64_t>{1} : std::vector<int64_t>{rows, 1};
      INFER_RETURN_IF_ERROR(writer.add_tensor(module + ".weight_scale", safetensors::Dtype::f32, scale_shape,
                                              [scales](std::span<uint8_t> dst) {
                                                std::memcpy(dst.data(), scales->data(), dst.size());
                                                return Status::ok();
                                              }));
      sum.bytes_out += static_cast<uint64_t>(rows * n) + (per_tensor ? 4u : static_cast<uint64_t>(rows) * 4u);
    }
  }
  // lm_head is left float (as the presets' recipes leave it); so are vision towers and projectors.
  if (has_lm_head) ignore.insert(ignore.begin(), "lm_head");
  if (vision) ignore.push_back("re:.*vision_tower.*");
  if (projector) ignore.push_back("re:.*multi_modal_projector.*");
  if (sum.quantized == 0)
    return invalid_argument(o.in + ": no linear layer to quantize (decoder '*_proj.weight' matrices of F32/F16/BF16 "
                            "with rows a multiple of 32)");

  fs::create_directories(out, ec);
  if (ec) return io_error(o.out + ": cannot create: " + ec.message());
  for (const fs::directory_entry& e : fs::directory_iterator(in, ec)) {
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file() || name == "config.json" || name.ends_with(".safetensors") ||
        name == "model.safetensors.index.json")
      continue;
    fs::copy_file(e.path(), out / name, fs::copy_options::overwrite_existing, ec);
    if (ec) return io_error((out / name).string() + ": cannot copy: " + ec.message());
  }
  INFER_RETURN_IF_ERROR(writer.write((out / "model.safetensors").string()));
  // The config last: a directory with it is complete.
  config["quantization_config"] = scheme_config(o.scheme, ignore);
  INFER_RETURN_IF_ERROR(write_text(out / "config.json", config.dump(2, ' ', false, Json::error_handler_t::replace) + "\n"));
  return sum;
}

}  // namespace infer::tools
