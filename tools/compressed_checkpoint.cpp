#include "compressed_checkpoint.hpp"

#include <fnmatch.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <sstream>
#include <thread>

#include "core/half.hpp"
#include "core/status_macros.hpp"
#include "format/json.hpp"
#include "format/safetensors.hpp"
#include "kernels/cpu/dtype_traits.hpp"
#include "kernels/cpu/hadamard.hpp"
#include "kernels/cpu/ops.hpp"
#include "quant/fp8_rows.hpp"
#include "quant/gptq.hpp"
#include "quant/int4_groups.hpp"
#include "quant/int8_groups.hpp"
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

// The input a decoder linear layer reads, named for the layers that share it: q/k/v one
// ("...self_attn.qkv"), gate/up another ("...mlp.gate_up"); any other layer's is its own.
std::string shared_input(const std::string& weight) {
  static constexpr std::pair<std::string_view, std::string_view> kShared[] = {
      {"self_attn.q_proj.weight", "self_attn.qkv"}, {"self_attn.k_proj.weight", "self_attn.qkv"},
      {"self_attn.v_proj.weight", "self_attn.qkv"}, {"mlp.gate_proj.weight", "mlp.gate_up"},
      {"mlp.up_proj.weight", "mlp.gate_up"}};
  for (const auto& [leaf, group] : kShared)
    if (weight.ends_with(leaf)) return weight.substr(0, weight.size() - leaf.size()) + std::string(group);
  return weight;
}

// SmoothQuant's factors for one matrix: its columns multiplied by `cols`, its rows divided by
// `rows` (empty: none). Powers of two, so the products are exact. Then, with `rotation`, each
// row's columns multiplied by the Walsh-Hadamard matrix on blocks of that many (its input rotated
// online).
struct MatrixSmoothing {
  std::vector<float> cols, rows;
  int32_t rotation = 0;
};

// Row r of a float matrix as F32, smoothed.
void smoothed_row(const safetensors::Tensor& t, DType src, const MatrixSmoothing* sm, int64_t r, float* row) {
  const int64_t n = t.shape[1];
  const uint64_t src_row = static_cast<uint64_t>(n) * safetensors::dtype_size(t.dtype);
  dequantize_row(src, t.data + static_cast<uint64_t>(r) * src_row, row, n);
  if (!sm) return;
  if (!sm->cols.empty())
    for (int64_t j = 0; j < n; ++j) row[j] *= sm->cols[static_cast<size_t>(j)];
  if (!sm->rows.empty())
    for (int64_t j = 0; j < n; ++j) row[j] /= sm->rows[static_cast<size_t>(r)];
  if (sm->rotation > 0) hadamard_inplace(row, n, sm->rotation);  // the ISA's variant, the same bits
}

struct GptqFactor {
  std::vector<double> u;
  std::vector<bool> dead;
  std::vector<int64_t> order;  // activation order (int4 --actorder); empty: column order
};

// GPTQ's factor of a matrix's input second moments, carried into the smoothed space (the input
// is x / s: H_ij / (s_i s_j)) and the rotated one (R x: R H R, R symmetric); none without second
// moments. With `actorder`, in activation order (quant/gptq.hpp).
Result<std::optional<GptqFactor>> gptq_factor_for(const safetensors::Tensor& t, const Hessian* hessian, const MatrixSmoothing* sm,
                                                  bool actorder = false) {
  if (!hessian) return std::optional<GptqFactor>();
  const int64_t m = hessian->n;
  if (m != t.shape[1])
    return invalid_argument(t.name + ": GPTQ's second moments have " + std::to_string(m) + " columns, the weight " +
                            std::to_string(t.shape[1]));
  std::vector<double> h(hessian->sum);
  if (sm && !sm->cols.empty())
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < m; ++j)
        h[static_cast<size_t>(i * m + j)] /= double(sm->cols[static_cast<size_t>(i)]) * sm->cols[static_cast<size_t>(j)];
  if (sm && sm->rotation > 0)  // rows rotated (H R), transposed (R H), rows rotated again (R H R)
    for (int pass = 0; pass < 2; ++pass) {
      for (int64_t i = 0; i < m; ++i) hadamard_blocks(h.data() + i * m, m, sm->rotation);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = i + 1; j < m; ++j) std::swap(h[static_cast<size_t>(i * m + j)], h[static_cast<size_t>(j * m + i)]);
    }
  std::optional<GptqFactor> f(std::in_place);
  if (actorder) f->order = quant::gptq_act_order(h, m);
  auto u = actorder ? quant::gptq_factor(h, m, f->dead, f->order) : quant::gptq_factor(h, m, f->dead);
  if (!u.ok()) return Status(u.status().code(), t.name + ": " + u.status().message());
  f->u = std::move(u).value();
  return f;
}

// Rows [begin, end) of a float matrix quantized: codes into `codes` (rows x n bytes), one scale
// per row into `scales` (per tensor: every row gets `tensor_scale`); INT8 through GPTQ with a factor.
Status quantize_rows(const safetensors::Tensor& t, DType src, const MatrixSmoothing* sm, const std::string& scheme,
                     float tensor_scale, const GptqFactor* gptq, int64_t group, int64_t begin, int64_t end, uint8_t* codes,
                     float* scales) {
  const int64_t n = t.shape[1];
  std::vector<float> row(static_cast<size_t>(n));
  std::vector<uint8_t> packed(static_cast<size_t>(group > 0 ? n / group * i8_block_bytes(group) : n + 8));
  for (int64_t r = begin; r < end; ++r) {
    smoothed_row(t, src, sm, r, row.data());
    for (float v : row)
      if (!std::isfinite(v)) return malformed_file(t.name + ": a weight is not finite (cannot quantize)");
    uint8_t* out = codes + static_cast<uint64_t>(r) * static_cast<uint64_t>(n);
    if (group > 0) {  // W8A16 in groups: the scales F32, as written
      if (gptq) quant::gptq_quantize_row_i8_groups(row.data(), n, gptq->u, gptq->dead, group, ScalePrecision::f32, packed.data());
      else quantize_row_i8_groups(row.data(), packed.data(), n, group, ScalePrecision::f32);
      for (int64_t b = 0; b < n / group; ++b) {
        const uint8_t* blk = packed.data() + b * i8_block_bytes(group);
        std::memcpy(scales + r * (n / group) + b, blk, 4);
        std::memcpy(out + b * group, blk + 4, static_cast<size_t>(group));
      }
    } else if (scheme == "int8" || scheme == "w8a16") {
      if (gptq) quant::gptq_quantize_row_i8(row.data(), n, gptq->u, gptq->dead, packed.data());
      else quantize_row_i8_row(row.data(), packed.data(), n);
      i8_rows_to_compressed(packed.data(), 1, n, reinterpret_cast<int8_t*>(out), scales + r);
    } else {
      if (gptq) quant::gptq_quantize_row_f8(row.data(), n, gptq->u, gptq->dead, scheme == "fp8-tensor" ? tensor_scale : 0.0f,
                                            packed.data());
      else if (scheme == "fp8" || scheme == "fp8-dynamic") quantize_row_f8_row(row.data(), packed.data(), n);
      else quantize_row_f8_scaled(row.data(), packed.data(), n, tensor_scale);
      f8_rows_to_compressed(packed.data(), 1, n, out, scales + r);
    }
  }
  return Status::ok();
}

// The scale precision of a source dtype: INT4 scales are stored as the model's float type (vLLM's
// W4A16 kernels keep them so), and the quantizer picks codes for the rounded scale.
ScalePrecision scale_precision(DType src) {
  return src == DType::bf16 ? ScalePrecision::bf16 : src == DType::f16 ? ScalePrecision::f16 : ScalePrecision::f32;
}

// Rows [begin, end) of a float matrix as INT4 groups: each row's signed values packed eight to a
// word into `words` (rows x n / 8), its group scales and zero points into `scales` / `zeros`
// (rows x n / group).
Status quantize_rows_i4(const safetensors::Tensor& t, DType src, const MatrixSmoothing* sm, const I4QuantOptions& q,
                        const GptqFactor* gptq, int64_t begin, int64_t end, int32_t* words, float* scales, int8_t* zeros) {
  const int64_t n = t.shape[1], groups = n / q.group;
  const DType type = *i4_type_of_group(q.group);
  std::vector<float> row(static_cast<size_t>(n));
  std::vector<uint8_t> blocks(static_cast<size_t>(groups * i4_block_bytes(q.group)));
  std::vector<int8_t> values(static_cast<size_t>(n));
  for (int64_t r = begin; r < end; ++r) {
    smoothed_row(t, src, sm, r, row.data());
    for (float v : row)
      if (!std::isfinite(v)) return malformed_file(t.name + ": a weight is not finite (cannot quantize)");
    if (gptq && !gptq->order.empty()) quant::gptq_quantize_row_ordered(row.data(), n, gptq->u, gptq->dead, gptq->order, q, blocks.data());
    else if (gptq) quant::gptq_quantize_row(row.data(), n, gptq->u, gptq->dead, q, blocks.data());
    else quantize_row_i4(row.data(), blocks.data(), n, q);
    i4_row_to_compressed(blocks.data(), type, n, values.data(), scales + r * groups, zeros + r * groups);
    pack_int4_words(values.data(), n, words + r * (n / 8));
  }
  return Status::ok();
}

// Runs work(begin, end) over [0, rows) split across up to `threads` threads (at least 16 rows each).
Status parallel_rows(int64_t rows, int threads, const std::function<Status(int64_t, int64_t)>& work) {
  const int n_threads = static_cast<int>(std::clamp<int64_t>(rows / 16, 1, std::max(1, threads)));
  std::vector<Status> status(static_cast<size_t>(n_threads));
  const auto run = [&](int k) { status[static_cast<size_t>(k)] = work(rows * k / n_threads, rows * (k + 1) / n_threads); };
  std::vector<std::thread> pool;
  for (int k = 1; k < n_threads; ++k) pool.emplace_back(run, k);
  run(0);
  for (auto& th : pool) th.join();
  for (const Status& s : status)
    if (!s.is_ok()) return s;
  return Status::ok();
}

// The weights of an 8-bit scheme's config group (W8A16 in groups of `group` columns when it is > 0).
Json eight_bit_weights(const std::string& scheme, int64_t group = 0) {
  const bool is_int = scheme == "int8" || scheme == "w8a16";
  return {{"num_bits", 8},
          {"type", is_int ? "int" : "float"},
          {"strategy", group > 0 ? "group" : scheme == "fp8-tensor" ? "tensor" : "channel"},
          {"symmetric", true},
          {"dynamic", false},
          {"group_size", group > 0 ? Json(group) : Json(nullptr)},
          {"observer", "minmax"}};
}

// The quantization_config. int4 with `w8a16_modules`: those in a second group (W8A16), named one by
// one; a module's name matches before the class name "Linear" does (vLLM's find_matched_target).
Json scheme_config(const std::string& scheme, const std::vector<std::string>& ignore, int64_t group, bool symmetric,
                   const std::vector<std::string>& w8a16_modules, bool actorder, int64_t w8a16_group) {
  if (scheme == "int4") {  // W4A16 (W4A16_ASYM with zero points), as llm-compressor's presets write it
    const Json weights = {{"num_bits", 4},
                          {"type", "int"},
                          {"strategy", "group"},
                          {"symmetric", symmetric},
                          {"dynamic", false},
                          {"group_size", group},
                          {"actorder", actorder ? Json("weight") : Json(nullptr)},
                          {"observer", "mse"}};
    Json groups = {{"group_0",
                    {{"targets", {"Linear"}}, {"weights", weights}, {"input_activations", nullptr}, {"output_activations", nullptr}}}};
    if (!w8a16_modules.empty())
      groups["group_1"] = {{"targets", w8a16_modules},
                           {"weights", eight_bit_weights("w8a16")},
                           {"input_activations", nullptr},
                           {"output_activations", nullptr}};
    return {{"quant_method", "compressed-tensors"},
            {"format", "pack-quantized"},
            {"quantization_status", "compressed"},
            {"config_groups", groups},
            {"ignore", ignore},
            {"kv_cache_scheme", nullptr}};
  }
  const bool is_int = scheme == "int8" || scheme == "w8a16";
  const Json weights = eight_bit_weights(scheme, scheme == "w8a16" ? w8a16_group : 0);
  // Activations dynamic per token (INT8_W8A8, FP8_DYNAMIC); none for the weight-only schemes
  // (W8A16 with per-channel int8 weights, as compressed-tensors 0.12's preset; vLLM's W8A16-FP8).
  const bool weight_only = scheme == "fp8" || scheme == "fp8-tensor" || scheme == "w8a16";
  const Json activations = weight_only
                               ? Json(nullptr)
                               : Json{{"num_bits", 8},     {"type", is_int ? "int" : "float"}, {"strategy", "token"},
                                      {"symmetric", true}, {"dynamic", true},                  {"group_size", nullptr}};
  return {{"quant_method", "compressed-tensors"},
          // Weight-only int weights are pack-quantized (four values a word), as compressed-tensors
          // picks the format for them.
          {"format", scheme == "w8a16" ? "pack-quantized" : is_int ? "int-quantized" : "float-quantized"},
          {"quantization_status", "compressed"},
          {"config_groups",
           {{"group_0",
             {{"targets", {"Linear"}}, {"weights", weights}, {"input_activations", activations}, {"output_activations", nullptr}}}}},
          {"ignore", ignore},
          {"kv_cache_scheme", nullptr}};
}

// SmoothQuant (Xiao et al., 2023): activation outliers moved into the weights before INT8
// quantization. For a group of matrices reading the same input X (columns j), with a_j the root
// mean square of X_j over the calibration (SmoothQuant takes the largest |X_j|; on SmolLM2 the
// RMS gave a third less KLD: the few tokens with huge activations, BOS first, set the maxima, and
// per-token quantization gives those tokens scales of their own) and w_j the largest |W_ij| over
// the group's rows,
//   s_j = 2^round(alpha log2 a_j - (1 - alpha) log2 w_j)   (clamped to 2^±kMaxSmoothExp)
// X_j is divided by s_j where it is made (the RMSNorm weight before the group; for down_proj the
// rows of up_proj, whose product with the activated gate is down_proj's input) and the group's
// columns are multiplied by it. Powers of two keep both exact: the smoothed float model computes
// what the original computes, bit for bit, and only the quantization sees the change. (Not quite
// for Gemma, whose norms are stored as w for 1 + w: (1 + w) / s - 1 rounds in float32, up to
// 2^-24 s / |1 + w| relative; on the test model the logits move by 3e-4 of the largest.)
constexpr double kMaxSmoothExp = 10;

struct SmoothingPlan {
  std::map<std::string, MatrixSmoothing> matrices;  // by Hugging Face tensor name
  std::map<std::string, std::vector<float>> norms;  // the norm's effective weight divided by these
  // Each linear layer's input columns' mean square after smoothing (a_j^2 / s_j^2), by Hugging Face
  // name: INT4's quantizer weighs each column's error by it.
  std::map<std::string, std::vector<float>> importance;
  // Each linear layer's input, by Hugging Face name: the importance matrix's key of the group
  // ("blk.3.attn_q.weight" for q/k/v), under which GPTQ's second moments are collected too.
  std::map<std::string, std::string> input_key;
  bool norm_plus_one = false;                       // Gemma: the stored w acts as 1 + w
  Json record = Json::array();                      // smoothquant.json's / awq.json's groups
};

struct Rows {
  const safetensors::Tensor* t;
  int64_t begin, end;
};

std::vector<float> column_absmax(const std::vector<Rows>& parts, int64_t n) {
  std::vector<float> m(static_cast<size_t>(n), 0.0f), row(static_cast<size_t>(n));
  for (const Rows& p : parts)
    for (int64_t r = p.begin; r < p.end; ++r) {
      smoothed_row(*p.t, *float_dtype(p.t->dtype), nullptr, r, row.data());
      for (int64_t j = 0; j < n; ++j) m[static_cast<size_t>(j)] = std::max(m[static_cast<size_t>(j)], std::fabs(row[static_cast<size_t>(j)]));
    }
  return m;
}

// The factors s_j of one group of matrices reading the same input, from the input's RMS `a`; may
// add what it chose to `note`.
using FactorFn = std::function<Result<std::vector<float>>(const std::vector<Rows>& parts, const std::vector<float>& a, Json& note)>;

float pow2_factor(double log2_s) {
  return std::ldexp(1.0f, static_cast<int>(std::clamp(std::round(log2_s), -kMaxSmoothExp, kMaxSmoothExp)));
}

// SmoothQuant's factors (above).
FactorFn smoothquant_factors(double alpha) {
  return [alpha](const std::vector<Rows>& parts, const std::vector<float>& a, Json&) -> Result<std::vector<float>> {
    const auto n = static_cast<int64_t>(a.size());
    const std::vector<float> w = column_absmax(parts, n);
    std::vector<float> sc(a.size(), 1.0f);
    for (size_t j = 0; j < sc.size(); ++j)
      if (a[j] > 0.0f && w[j] > 0.0f) sc[j] = pow2_factor(alpha * std::log2(a[j]) - (1.0 - alpha) * std::log2(w[j]));
    return sc;
  };
}

// AWQ (Lin et al., 2024) for INT4 groups: the input columns of a group of matrices scaled by
// s_j = a_j^alpha / sqrt(max_j a_j^alpha * min_j a_j^alpha) (rounded to a power of two, as
// SmoothQuant's above, so the float model is unchanged), alpha searched over k / grid, k = 0 ..
// grid - 1, for the least quantization loss
//   L(alpha) = Σ_rows Σ_j a_j^2 (W_ij - Q(W s)_ij / s_j)^2
// where Q is the INT4 quantizer with importance a_j^2 / s_j^2 in the scaled space. This is AWQ's
// output error with the calibration activations' second moments in place of the activations
// themselves (the diagonal of X^T X: cross-column terms left out, as llama.cpp's importance
// matrices leave them out); alpha = 0 (no scaling) is on the grid, so the search never loses on L.
FactorFn awq_factors(const I4QuantOptions& base, int grid, int threads) {
  return [base, grid, threads](const std::vector<Rows>& parts, const std::vector<float>& a, Json& note)
             -> Result<std::vector<float>> {
    const auto n = static_cast<int64_t>(a.size());
    std::vector<std::vector<float>> rows;  // the group's rows as F32
    for (const Rows& p : parts)
      for (int64_t r = p.begin; r < p.end; ++r) {
        rows.emplace_back(static_cast<size_t>(n));
        smoothed_row(*p.t, *float_dtype(p.t->dtype), nullptr, r, rows.back().data());
      }
    float lo = 0.0f, hi = 0.0f;
    for (float v : a)
      if (v > 0.0f) {
        lo = lo == 0.0f ? v : std::min(lo, v);
        hi = std::max(hi, v);
      }
    std::vector<float> best(a.size(), 1.0f);
    double best_loss = -1.0, plain_loss = 0.0, best_alpha = 0.0;
    for (int k = 0; k < grid && hi > 0.0f; ++k) {
      const double alpha = static_cast<double>(k) / grid;
      const double mid = 0.5 * alpha * (std::log2(lo) + std::log2(hi));
      std::vector<float> sc(a.size(), 1.0f), imp(a.size());
      for (size_t j = 0; j < sc.size(); ++j) {
        if (a[j] > 0.0f) sc[j] = pow2_factor(alpha * std::log2(a[j]) - mid);
        imp[j] = a[j] * a[j] / (sc[j] * sc[j]);
      }
      I4QuantOptions q = base;
      q.importance = imp.data();
      std::vector<double> row_loss(rows.size(), 0.0);  // summed in row order: the same loss on any thread count
      INFER_RETURN_IF_ERROR(parallel_rows(static_cast<int64_t>(rows.size()), threads, [&](int64_t b, int64_t e) {
        std::vector<float> x(static_cast<size_t>(n));
        for (int64_t r = b; r < e; ++r) {
          const std::vector<float>& w = rows[static_cast<size_t>(r)];
          for (int64_t j = 0; j < n; ++j) x[static_cast<size_t>(j)] = w[static_cast<size_t>(j)] * sc[static_cast<size_t>(j)];
          row_loss[static_cast<size_t>(r)] = i4_row_error(x.data(), n, q);
        }
        return Status::ok();
      }));
      double loss = 0.0;
      for (double v : row_loss) loss += v;
      if (k == 0) plain_loss = loss;
      if (best_loss < 0.0 || loss < best_loss) {
        best_loss = loss;
        best_alpha = alpha;
        best = sc;
      }
    }
    note = {{"alpha", best_alpha}, {"loss", best_loss}, {"loss_unscaled", plain_loss}};
    return best;
  };
}


// What a matrix is to the smoothing: quantized and weighed by the factor search, quantized outside it
// (int4's W8A16 matrices: the search weighs 4-bit losses), or kept in float.
enum class MatrixRole { searched, unsearched, kept };

Result<SmoothingPlan> plan_smoothing(const Json& config, const std::map<std::string, const safetensors::Tensor*>& by_name,
                                     const std::map<std::string, std::vector<float>>& act, const FactorFn& factors,
                                     const std::function<MatrixRole(const std::string&)>& role,
                                     const std::function<void(const std::string&, int, int)>& progress) {
  SmoothingPlan plan;
  bool found = false;
  std::string arch;
  if (const Json* a = json::member(config, "architectures"); a && a->is_array() && !a->empty() && (*a)[0].is_string())
    arch = (*a)[0].get<std::string>();
  plan.norm_plus_one = arch.rfind("Gemma", 0) == 0;
  const auto find = [&](const std::string& name) -> const safetensors::Tensor* {
    auto it = by_name.find(name);
    return it == by_name.end() ? nullptr : it->second;
  };
  const auto stat = [&](const std::string& key, int64_t n) -> Result<const std::vector<float>*> {
    auto it = act.find(key);
    if (it == act.end() || static_cast<int64_t>(it->second.size()) != n)
      return invalid_argument("SmoothQuant: the importance matrix has no entry of " + std::to_string(n) + " columns for " + key);
    return &it->second;
  };
  int groups_done = 0, groups_total = 0;  // three groups a layer
  for (const auto& [name, t] : by_name)
    if (name.ends_with("input_layernorm.weight") && name.find("layers.") != std::string::npos && !is_vision(name)) groups_total += 3;
  // One group: factors from the statistic and the searched parts' columns, applied to every
  // part's columns. A group with no searched part is left alone (smoothing serves the search's
  // quantization only); its quantized parts still name their input, for GPTQ.
  const auto group = [&](const std::string& key, const std::vector<Rows>& parts, const std::string& divided,
                         Rows divided_rows) -> Status {
    const int64_t n = parts.front().t->shape[1];
    std::vector<Rows> searched;
    for (const Rows& p : parts)
      if (role(p.t->name) == MatrixRole::searched) searched.push_back(p);
    if (searched.empty()) {
      for (const Rows& p : parts)
        if (role(p.t->name) == MatrixRole::unsearched) plan.input_key[p.t->name] = key;
      if (progress) progress(key, ++groups_done, groups_total);
      return Status::ok();
    }
    INFER_ASSIGN_OR_RETURN(const std::vector<float>* a, stat(key, n));
    Json note = Json::object();
    INFER_ASSIGN_OR_RETURN(const std::vector<float> sc, factors(searched, *a, note));
    Json exps = Json::array();
    for (float s : sc) exps.push_back(static_cast<int>(std::lround(std::log2(s))));
    std::vector<float> imp(sc.size());
    for (size_t j = 0; j < sc.size(); ++j) imp[j] = (*a)[j] * (*a)[j] / (sc[j] * sc[j]);
    Json names = Json::array();
    for (const Rows& p : parts) {
      plan.matrices[p.t->name].cols = sc;
      plan.importance[p.t->name] = imp;
      plan.input_key[p.t->name] = key;
      names.push_back(p.t->name);
    }
    Json entry;
    if (divided_rows.t) {  // rows [begin, end) of a matrix divided
      MatrixSmoothing& m = plan.matrices[divided_rows.t->name];
      m.rows.assign(static_cast<size_t>(divided_rows.t->shape[0]), 1.0f);
      std::copy(sc.begin(), sc.end(), m.rows.begin() + divided_rows.begin);
      entry = {{"divided_rows", divided_rows.t->name}, {"row_range", {divided_rows.begin, divided_rows.end}},
               {"multiplied_columns", names}, {"log2_scales", exps}};
    } else {
      plan.norms[divided] = sc;
      entry = {{"divided_norm", divided}, {"multiplied_columns", names}, {"log2_scales", exps}};
    }
    for (const auto& [k, v] : note.items()) entry[k] = v;
    plan.record.push_back(std::move(entry));
    if (progress) progress(key, ++groups_done, groups_total);
    return Status::ok();
  };
  const auto need_float = [&](const safetensors::Tensor* t) { return t && float_dtype(t->dtype) && t->shape.size() == 2; };

  for (const auto& [name, t] : by_name) {
    constexpr std::string_view kNorm = "input_layernorm.weight";
    const size_t at = name.find("layers.");
    if (!name.ends_with(kNorm) || at == std::string::npos || is_vision(name)) continue;
    const std::string p = name.substr(0, name.size() - kNorm.size());  // "...layers.N."
    const std::string layer = p.substr(at + 7, p.size() - at - 8);
    const std::string blk = "blk." + layer + ".";
    // Attention: q, k, v (or Phi-3's qkv) after input_layernorm.
    std::vector<Rows> attn;
    std::string attn_key = blk + "attn_q.weight";
    if (const auto* qkv = find(p + "self_attn.qkv_proj.weight")) {
      attn = {{qkv, 0, qkv->shape.size() == 2 ? qkv->shape[0] : 0}};
      attn_key = blk + "attn_qkv.weight";
    } else {
      for (const char* m : {"q_proj", "k_proj", "v_proj"})
        if (const auto* x = find(p + "self_attn." + m + ".weight")) attn.push_back({x, 0, x->shape[0]});
    }
    // MLP: gate and up (or Phi-3's gate_up) after the MLP's norm; down after up.
    const std::string mlp_norm = p + (plan.norm_plus_one ? "pre_feedforward_layernorm.weight" : "post_attention_layernorm.weight");
    std::vector<Rows> mlp;
    std::string mlp_key = blk + "ffn_gate.weight";
    Rows up{};
    const auto* down = find(p + "mlp.down_proj.weight");
    if (const auto* gu = find(p + "mlp.gate_up_proj.weight")) {
      mlp = {{gu, 0, gu->shape.size() == 2 ? gu->shape[0] : 0}};
      mlp_key = blk + "ffn_up.weight";
      up = {gu, gu->shape[0] / 2, gu->shape[0]};
    } else {
      for (const char* m : {"gate_proj", "up_proj"})
        if (const auto* x = find(p + "mlp." + m + ".weight")) mlp.push_back({x, 0, x->shape[0]});
      if (const auto* u = find(p + "mlp.up_proj.weight")) up = {u, 0, u->shape[0]};
    }
    bool ok = (attn.size() == 1 || attn.size() == 3) && (mlp.size() == 1 || mlp.size() == 2) && need_float(down) &&
              up.t && find(mlp_norm) && down->shape[1] == up.end - up.begin;
    for (const Rows& r : attn) ok = ok && need_float(r.t) && r.t->shape[1] == attn.front().t->shape[1];
    for (const Rows& r : mlp) ok = ok && need_float(r.t) && r.t->shape[1] == mlp.front().t->shape[1];
    if (!ok)
      return unsupported("SmoothQuant: layer " + p.substr(0, 96) + " is not a decoder layer of the supported families "
                         "(float q/k/v or qkv, gate/up or gate_up, down, and their norms)");
    found = true;
    INFER_RETURN_IF_ERROR(group(attn_key, attn, name, Rows{}));
    INFER_RETURN_IF_ERROR(group(mlp_key, mlp, mlp_norm, Rows{}));
    INFER_RETURN_IF_ERROR(group(blk + "ffn_down.weight", {{down, 0, down->shape[0]}}, "", up));
    // The attention output is no group's (its input, the heads' values, may be shared between
    // heads): importance only.
    if (const auto* o = find(p + "self_attn.o_proj.weight"); o && o->shape.size() == 2) {
      INFER_ASSIGN_OR_RETURN(const std::vector<float>* a, stat(blk + "attn_output.weight", o->shape[1]));
      std::vector<float>& imp = plan.importance[o->name];
      for (float v : *a) imp.push_back(v * v);
      plan.input_key[o->name] = blk + "attn_output.weight";
    }
  }
  if (!found) return unsupported("SmoothQuant: no decoder layer found (no '...layers.N.input_layernorm.weight')");
  return plan;
}

// An INT4 linear layer's tensors: weight_packed, weight_scale (the source's float type),
// weight_shape and, when asymmetric, weight_zero_point (I32 [ceil(rows / 8), groups]: row r's value
// at bits 4 (r mod 8) of word r / 8, as compressed-tensors packs along dimension 0; the padding
// rows' bits zero).
Status add_int4_tensors(safetensors::Writer& writer, const safetensors::Tensor& t, DType src, const MatrixSmoothing* smoothing,
                        const std::vector<float>* importance, const Hessian* hessian, const I4QuantOptions& base,
                        const CompressedOptions& o, CompressedSummary& sum) {
  const int64_t rows = t.shape[0], n = t.shape[1], groups = n / base.group;
  const std::string module = t.name.substr(0, t.name.size() - 7);
  struct Out {
    std::vector<float> scales;
    std::vector<int8_t> zeros;
  };
  auto out = std::make_shared<Out>();
  out->scales.resize(static_cast<size_t>(rows * groups));
  out->zeros.resize(static_cast<size_t>(rows * groups));
  I4QuantOptions q = base;
  q.importance = importance ? importance->data() : nullptr;
  const safetensors::Tensor* tp = &t;
  INFER_RETURN_IF_ERROR(writer.add_tensor(module + ".weight_packed", safetensors::Dtype::i32, {rows, n / 8},
                                          [tp, src, smoothing, q, out, hessian, &o](std::span<uint8_t> dst) -> Status {
    auto* words = reinterpret_cast<int32_t*>(dst.data());
    INFER_ASSIGN_OR_RETURN(const std::optional<GptqFactor> gptq, gptq_factor_for(*tp, hessian, smoothing, o.actorder));
    const Status done = parallel_rows(tp->shape[0], o.threads, [&](int64_t b, int64_t e) {
      return quantize_rows_i4(*tp, src, smoothing, q, gptq ? &*gptq : nullptr, b, e, words, out->scales.data(),
                              out->zeros.data());
    });
    if (!done.is_ok()) return done;
    if (o.progress) o.progress(tp->nbytes(), tp->name);
    return Status::ok();
  }));
  const safetensors::Dtype scale_type = src == DType::bf16 ? safetensors::Dtype::bf16
                                        : src == DType::f16 ? safetensors::Dtype::f16
                                                            : safetensors::Dtype::f32;
  INFER_RETURN_IF_ERROR(writer.add_tensor(module + ".weight_scale", scale_type, {rows, groups}, [out, scale_type](std::span<uint8_t> dst) {
    for (size_t i = 0; i < out->scales.size(); ++i) {
      const float s = out->scales[i];  // already representable in scale_type (the quantizer rounded it)
      if (scale_type == safetensors::Dtype::f32) std::memcpy(dst.data() + 4 * i, &s, 4);
      else {
        const uint16_t h = scale_type == safetensors::Dtype::bf16 ? f32_to_bf16(s) : f32_to_f16(s);
        std::memcpy(dst.data() + 2 * i, &h, 2);
      }
    }
    return Status::ok();
  }));
  INFER_RETURN_IF_ERROR(writer.add_tensor(module + ".weight_shape", safetensors::Dtype::i64, {2}, [rows, n](std::span<uint8_t> dst) {
    const int64_t shape[2] = {rows, n};
    std::memcpy(dst.data(), shape, 16);
    return Status::ok();
  }));
  const int64_t packed_rows = (rows + 7) / 8;
  if (!base.symmetric)
    INFER_RETURN_IF_ERROR(writer.add_tensor(module + ".weight_zero_point", safetensors::Dtype::i32, {packed_rows, groups},
                                            [out, rows, groups](std::span<uint8_t> dst) {
      std::fill(dst.begin(), dst.end(), uint8_t{0});
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t g = 0; g < groups; ++g) {
          uint32_t word;
          uint8_t* at = dst.data() + 4 * ((r / 8) * groups + g);
          std::memcpy(&word, at, 4);
          word |= static_cast<uint32_t>((out->zeros[static_cast<size_t>(r * groups + g)] + 8) & 15) << (4 * (r % 8));
          std::memcpy(at, &word, 4);
        }
      return Status::ok();
    }));
  const uint64_t scale_bytes = scale_type == safetensors::Dtype::f32 ? 4 : 2;
  sum.bytes_out += static_cast<uint64_t>(rows * n / 2) + static_cast<uint64_t>(rows * groups) * scale_bytes + 16 +
                   (base.symmetric ? 0 : static_cast<uint64_t>(packed_rows * groups) * 4);
  return Status::ok();
}

}  // namespace

bool is_compressed_scheme(const std::string& scheme) {
  return scheme == "int8" || scheme == "w8a16" || scheme == "fp8" || scheme == "fp8-tensor" || scheme == "fp8-dynamic" ||
         scheme == "int4";
}

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

  const bool int4 = o.scheme == "int4";
  if (int4 && !i4_type_of_group(o.group)) return invalid_argument("int4 groups are 32, 64 or 128 columns, not " + std::to_string(o.group));
  if (o.w8a16_group != 0 && (o.scheme != "w8a16" || !i8_type_of_group(o.w8a16_group)))
    return invalid_argument("w8a16 groups are 32, 64 or 128 columns, of the w8a16 scheme, not " + std::to_string(o.w8a16_group));
  std::optional<DType> source_type;  // the first float matrix's type: INT4 scales are stored in it
  for (const safetensors::File& shard : shards)
    for (const safetensors::Tensor& t : shard.tensors)
      if (!source_type && is_decoder_linear(t)) source_type = float_dtype(t.dtype);
  const I4QuantOptions i4_base{.group = o.group, .symmetric = o.symmetric, .importance = nullptr,
                               .scale_precision = scale_precision(source_type.value_or(DType::f32))};
  const auto matches = [](const std::vector<std::string>& globs, const std::string& name) {
    for (const std::string& glob : globs)
      if (fnmatch(glob.c_str(), name.c_str(), 0) == 0) return true;
    return false;
  };
  const auto is_kept = [&](const std::string& name) { return matches(o.keep, name); };  // --keep: left in its float type
  if (!o.w8a16.empty() && !int4) return invalid_argument("W8A16 matrices (w8a16 globs) mix into int4 checkpoints only");
  if (o.actorder && (!int4 || !o.hessians)) return invalid_argument("activation order is int4's GPTQ's (a calibration's second moments)");
  // int4's W8A16 matrices (not kept): the 8-bit scheme, outside AWQ's search, which weighs 4-bit losses.
  const auto is_eight = [&](const std::string& name) { return int4 && !is_kept(name) && matches(o.w8a16, name); };
  std::optional<SmoothingPlan> plan;
  // W8A16 and the FP8 schemes take a calibration for GPTQ alone.
  const bool gptq_only = o.scheme == "w8a16" || o.scheme == "fp8" || o.scheme == "fp8-tensor" || o.scheme == "fp8-dynamic";
  if (o.activation_rms) {
    if (o.scheme != "int8" && !int4 && !gptq_only)
      return invalid_argument("activation statistics apply SmoothQuant (int8), AWQ (int4) or GPTQ (w8a16, fp8), not to " + o.scheme);
    if (gptq_only && !o.hessians)
      return invalid_argument(o.scheme + " takes a calibration for GPTQ only, and this one has no second moments");
    std::map<std::string, const safetensors::Tensor*> by_name;
    for (const safetensors::File& shard : shards)
      for (const safetensors::Tensor& t : shard.tensors) by_name.emplace(t.name, &t);
    // GPTQ alone (W8A16, FP8): nothing to smooth, the plan serves GPTQ's inputs only.
    const FactorFn ones = [](const std::vector<Rows>&, const std::vector<float>& a, Json&) -> Result<std::vector<float>> {
      return std::vector<float>(a.size(), 1.0f);
    };
    const FactorFn factors = int4    ? awq_factors(i4_base, std::max(1, o.awq_grid), o.threads)
                             : gptq_only ? ones
                                     : smoothquant_factors(o.smooth_alpha);
    const auto role = [&](const std::string& name) {
      return is_kept(name) ? MatrixRole::kept : is_eight(name) ? MatrixRole::unsearched : MatrixRole::searched;
    };
    INFER_ASSIGN_OR_RETURN(plan, plan_smoothing(config, by_name, *o.activation_rms, factors, role, int4 ? o.on_awq_group : nullptr));
    if (gptq_only) {
      plan->matrices.clear();
      plan->norms.clear();
    }
  }
  const auto hessian_of = [&](const std::string& name) -> const Hessian* {
    if (!plan || !o.hessians) return nullptr;
    auto key = plan->input_key.find(name);
    if (key == plan->input_key.end()) return nullptr;
    auto it = o.hessians->find(key->second);
    return it == o.hessians->end() ? nullptr : &it->second;
  };
  const auto importance_of = [&](const std::string& name) -> const std::vector<float>* {
    if (!plan) return nullptr;
    auto it = plan->importance.find(name);
    return it == plan->importance.end() ? nullptr : &it->second;
  };
  // Which tensors are quantized: the decoder's float linear layers not kept, whose rows fit the format.
  const auto quantizes = [&](const safetensors::Tensor& t) {
    if (!is_decoder_linear(t) || !float_dtype(t.dtype) || is_kept(t.name)) return false;
    const int64_t n = t.shape[1], rows = t.shape[0];
    return int4 && !is_eight(t.name) ? n > 0 && n % o.group == 0 && rows > 0
                                     : n > 0 && n % kI8RowBlock == 0 && (o.scheme != "int8" || n <= kI8RowMaxElements) &&
                                           (o.scheme != "w8a16" || n % std::max<int64_t>(o.w8a16_group, 1) == 0);
  };
  // What each matrix's rows become before quantization: SmoothQuant's factors, then int8's input
  // rotation. A layer is rotated when every layer reading its input is quantized (the input is
  // rotated once for all of them).
  std::map<std::string, MatrixSmoothing> transforms;
  if (plan) transforms = plan->matrices;
  if (o.scheme == "int8" && o.rotate) {
    std::map<std::string, bool> all_quantized;  // shared input -> every reader quantized
    for (const safetensors::File& shard : shards)
      for (const safetensors::Tensor& t : shard.tensors)
        if (is_decoder_linear(t)) {
          auto [it, added] = all_quantized.emplace(shared_input(t.name), true);
          it->second = it->second && quantizes(t);
        }
    for (const safetensors::File& shard : shards)
      for (const safetensors::Tensor& t : shard.tensors)
        if (quantizes(t) && all_quantized[shared_input(t.name)]) transforms[t.name].rotation = i8_input_rotation(t.shape[1]);
  }
  const auto smoothing_of = [&](const std::string& name) -> const MatrixSmoothing* {
    auto it = transforms.find(name);
    return it == transforms.end() ? nullptr : &it->second;
  };
  const auto norm_of = [&](const std::string& name) -> const std::vector<float>* {
    if (!plan) return nullptr;
    auto it = plan->norms.find(name);
    return it == plan->norms.end() ? nullptr : &it->second;
  };

  CompressedSummary sum;
  std::vector<std::string> ignore, eight_modules;
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
      const std::optional<DType> src = float_dtype(t.dtype);
      const bool linear = is_decoder_linear(t);
      struct LinearShare {  // whatever this tensor adds to bytes_out, counted for the linear layers too
        CompressedSummary& sum;
        bool linear;
        uint64_t before;
        ~LinearShare() {
          if (linear) sum.linear_bytes_out += sum.bytes_out - before;
        }
      } share{sum, linear, sum.bytes_out};
      if (linear) sum.linear_elements += static_cast<uint64_t>(numel);
      const int64_t n = linear ? t.shape[1] : 0, rows = linear ? t.shape[0] : 0;
      const MatrixSmoothing* smoothing = smoothing_of(t.name);
      if (!quantizes(t)) {
        if (linear) ignore.push_back(t.name.substr(0, t.name.size() - 7));  // the module: name less ".weight"
        const safetensors::Tensor* tp = &t;
        const std::vector<float>* norm = norm_of(t.name);
        if ((smoothing || norm) && src) {  // smoothed, kept in float
          // A kept matrix is written in its source type. The powers of two keep BF16 values exact,
          // and F16 ones but for subnormals (below 2^-14), which round to nearest (by at most 2^-25).
          // A norm stays in its type where that holds it exactly (Gemma's (1 + w) / s - 1 seldom
          // does), else F32.
          const DType from = *src;
          const bool plus_one = plan->norm_plus_one;
          const auto values = [tp, from, smoothing, norm, plus_one](int64_t r, float* f32) {  // row r (a norm: r 0)
            if (norm) {
              dequantize_row(from, tp->data, f32, static_cast<int64_t>(norm->size()));
              for (size_t j = 0; j < norm->size(); ++j) f32[j] = plus_one ? (1.0f + f32[j]) / (*norm)[j] - 1.0f : f32[j] / (*norm)[j];
            } else {
              smoothed_row(*tp, from, smoothing, r, f32);
            }
          };
          const int64_t n_rows = norm ? 1 : t.shape[0], row_len = norm ? static_cast<int64_t>(norm->size()) : t.shape[1];
          bool half = from != DType::f32;
          if (norm && half) {
            std::vector<float> row(static_cast<size_t>(row_len));
            values(0, row.data());
            for (float v : row)
              half = half && (from == DType::f16 ? f16_to_f32(f32_to_f16(v)) : bf16_to_f32(f32_to_bf16(v))) == v;
          }
          INFER_RETURN_IF_ERROR(writer.add_tensor(t.name, half ? t.dtype : safetensors::Dtype::f32, t.shape,
                                                  [tp, from, values, half, n_rows, row_len, &o](std::span<uint8_t> dst) {
            std::vector<float> f32(static_cast<size_t>(row_len));
            for (int64_t r = 0; r < n_rows; ++r) {
              values(r, f32.data());
              for (int64_t j = 0; j < row_len; ++j) {
                const float v = f32[static_cast<size_t>(j)];
                const uint64_t at = static_cast<uint64_t>(r * row_len + j);
                if (!half) std::memcpy(dst.data() + 4 * at, &v, 4);
                else {
                  const uint16_t h = from == DType::bf16 ? f32_to_bf16(v) : f32_to_f16(v);
                  std::memcpy(dst.data() + 2 * at, &h, 2);
                }
              }
            }
            if (o.progress) o.progress(tp->nbytes(), tp->name);
            return Status::ok();
          }));
          sum.bytes_out += static_cast<uint64_t>(numel) * (half ? 2 : 4);
          continue;
        }
        INFER_RETURN_IF_ERROR(writer.add_tensor(t.name, t.dtype, t.shape, [tp, &o](std::span<uint8_t> dst) {
          std::copy(tp->data, tp->data + tp->nbytes(), dst.data());
          if (o.progress) o.progress(tp->nbytes(), tp->name);
          return Status::ok();
        }));
        sum.bytes_out += t.nbytes();
        continue;
      }
      ++sum.quantized;
      if (int4 && !is_eight(t.name)) {
        INFER_RETURN_IF_ERROR(add_int4_tensors(writer, t, *src, smoothing, importance_of(t.name), hessian_of(t.name), i4_base, o, sum));
        continue;
      }
      const std::string scheme = int4 ? "w8a16" : o.scheme;  // int4's --w8a16 matrices: W8A16
      if (int4) eight_modules.push_back(t.name.substr(0, t.name.size() - 7));
      const bool per_tensor = scheme == "fp8-tensor";
      // w8a16 --group (not int4's --w8a16 matrices, which keep a scale per row): a scale per group.
      const int64_t group = !int4 && scheme == "w8a16" ? o.w8a16_group : 0;
      const int64_t scales_per_row = group > 0 ? n / group : 1;
      auto scales = std::make_shared<std::vector<float>>(static_cast<size_t>(rows * scales_per_row));
      const safetensors::Tensor* tp = &t;
      const DType from = *src;
      const Hessian* hessian = hessian_of(t.name);
      const auto codes = [tp, from, scales, smoothing, hessian, &o, scheme, group, rows, n](std::span<uint8_t> dst) -> Status {
        INFER_ASSIGN_OR_RETURN(const std::optional<GptqFactor> gptq, gptq_factor_for(*tp, hessian, smoothing));
        float tensor_scale = 0.0f;
        if (scheme == "fp8-tensor") {  // max|W| / 448 over the matrix, as --weight-type fp8-tensor
          std::vector<float> row(static_cast<size_t>(n));
          float amax = 0.0f;
          for (int64_t r = 0; r < rows; ++r) {
            smoothed_row(*tp, from, smoothing, r, row.data());
            for (float v : row) amax = std::max(amax, std::fabs(v));
          }
          tensor_scale = amax / 448.0f;
        }
        const Status done = parallel_rows(rows, o.threads, [&](int64_t b, int64_t e) {
          return quantize_rows(*tp, from, smoothing, scheme, tensor_scale, gptq ? &*gptq : nullptr, group, b, e, dst.data(),
                               scales->data());
        });
        if (!done.is_ok()) return done;
        if (o.progress) o.progress(tp->nbytes(), tp->name);
        return Status::ok();
      };
      const std::string module = t.name.substr(0, t.name.size() - 7);
      if (scheme == "w8a16") {
        // pack_to_int32 with 8 bits: value v at bits 8 (i mod 4) of word i / 4 as v + 128, so the
        // little-endian words' bytes are the codes with their top bit flipped.
        INFER_RETURN_IF_ERROR(writer.add_tensor(module + ".weight_packed", safetensors::Dtype::i32, {rows, n / 4},
                                                [codes](std::span<uint8_t> dst) -> Status {
                                                  const Status done = codes(dst);
                                                  for (uint8_t& b : dst) b ^= 0x80u;
                                                  return done;
                                                }));
        INFER_RETURN_IF_ERROR(writer.add_tensor(module + ".weight_shape", safetensors::Dtype::i64, {2},
                                                [rows, n](std::span<uint8_t> dst) {
                                                  const int64_t shape[2] = {rows, n};
                                                  std::memcpy(dst.data(), shape, sizeof shape);
                                                  return Status::ok();
                                                }));
        sum.bytes_out += 16;
      } else {
        INFER_RETURN_IF_ERROR(writer.add_tensor(t.name, scheme == "int8" ? safetensors::Dtype::i8 : safetensors::Dtype::f8_e4m3,
                                                t.shape, codes));
      }
      std::vector<int64_t> scale_shape = per_tensor ? std::vector<int64_t>{1} : std::vector<int64_t>{rows, scales_per_row};
      INFER_RETURN_IF_ERROR(writer.add_tensor(module + ".weight_scale", safetensors::Dtype::f32, scale_shape,
                                              [scales](std::span<uint8_t> dst) {
                                                std::memcpy(dst.data(), scales->data(), dst.size());
                                                return Status::ok();
                                              }));
      sum.bytes_out += static_cast<uint64_t>(rows * n) + (per_tensor ? 4u : static_cast<uint64_t>(rows * scales_per_row) * 4u);
    }
  }
  // The input rotations: one transform scheme per block size, naming its modules; each size's
  // matrix stored once, under its first module (Sylvester's, entries +-1, in the model's float type).
  std::map<int32_t, std::vector<std::string>> rotated;  // block size -> modules
  for (const auto& [name, m] : transforms)
    if (m.rotation > 0) rotated[m.rotation].push_back(name.substr(0, name.size() - 7));
  Json transform_groups = Json::object();
  const safetensors::Dtype matrix_dtype = source_type == DType::bf16  ? safetensors::Dtype::bf16
                                          : source_type == DType::f16 ? safetensors::Dtype::f16
                                                                      : safetensors::Dtype::f32;
  for (const auto& [size, modules] : rotated) {
    const std::string scheme = "h" + std::to_string(size);
    const Json apply_to = {{"targets", modules}, {"ignore", Json::array()}};
    Json online = apply_to, folded = apply_to;
    online["location"] = "input";
    online["inverse"] = false;
    folded["location"] = "weight_input";
    folded["inverse"] = true;
    transform_groups[scheme] = {{"type", "hadamard"}, {"apply", {online, folded}}, {"randomize", false},
                                {"requires_grad", false}, {"head_dim", size}, {"precision", "torch.float32"}};
    const int64_t n = size;
    INFER_RETURN_IF_ERROR(writer.add_tensor(modules.front() + "." + scheme + "_input.weight", matrix_dtype, {n, n},
                                            [n, matrix_dtype](std::span<uint8_t> dst) {
      const size_t width = safetensors::dtype_size(matrix_dtype);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j) {
          const float v = (__builtin_popcountll(static_cast<uint64_t>(i & j)) & 1) != 0 ? -1.0f : 1.0f;
          uint8_t* at = dst.data() + static_cast<size_t>(i * n + j) * width;
          if (matrix_dtype == safetensors::Dtype::f32) {
            std::memcpy(at, &v, 4);
          } else {
            const uint16_t h = matrix_dtype == safetensors::Dtype::bf16 ? f32_to_bf16(v) : f32_to_f16(v);
            std::memcpy(at, &h, 2);
          }
        }
      return Status::ok();
    }));
    sum.bytes_out += static_cast<uint64_t>(n * n) * safetensors::dtype_size(matrix_dtype);
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
  if (plan && gptq_only) {  // GPTQ alone: the calibration it used
    Json record = {{"method", "GPTQ (libinfer infer-quantize)"},
                   {"calibration", o.calibration_note},
                   {"gptq", {{"dampening", 0.01}, {"actorder", nullptr}, {"inputs", o.hessians->size()}}}};
    INFER_RETURN_IF_ERROR(write_text(out / "gptq.json", record.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n"));
  } else if (plan) {  // what was folded where, so that the smoothing can be checked and undone
    Json record = {{"method", int4 ? (o.hessians ? "AWQ, power-of-two factors, second-moment loss; then GPTQ (libinfer infer-quantize)"
                                                 : "AWQ, power-of-two factors, second-moment loss (libinfer infer-quantize)")
                                   : (o.hessians ? "SmoothQuant, power-of-two factors; then GPTQ (libinfer infer-quantize)"
                                                 : "SmoothQuant, power-of-two factors (libinfer infer-quantize)")},
                   {"calibration", o.calibration_note},
                   {"groups", plan->record}};
    if (int4) record["grid"] = o.awq_grid;
    if (o.hessians)
      record["gptq"] = {{"dampening", 0.01},
                        {"actorder", int4 && o.actorder ? Json("weight") : Json(nullptr)},
                        {"inputs", o.hessians->size()}};
    if (!int4) record["alpha"] = o.smooth_alpha;
    INFER_RETURN_IF_ERROR(write_text(out / (int4 ? "awq.json" : "smoothquant.json"),
                                     record.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n"));
  }
  // The config last: a directory with it is complete.
  config["quantization_config"] = scheme_config(o.scheme, ignore, o.group, o.symmetric, eight_modules, o.actorder, o.w8a16_group);
  if (!rotated.empty()) config["quantization_config"]["transform_config"] = {{"config_groups", transform_groups}};
  INFER_RETURN_IF_ERROR(write_text(out / "config.json", config.dump(2, ' ', false, Json::error_handler_t::replace) + "\n"));
  return sum;
}

}  // namespace infer::tools
