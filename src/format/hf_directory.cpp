#include "format/hf_directory.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "core/checked_math.hpp"
#include "core/half.hpp"
#include "core/status_macros.hpp"
#include "format/hf_transforms.hpp"
#include "format/json.hpp"
#include "format/safetensors.hpp"

namespace infer::hf {
namespace {

namespace fs = std::filesystem;
using json::Json;

// One row per family: what convert_hf_to_gguf.py does differently for it.
struct Family {
  const char* gguf_arch;
  const char* architectures;  // Hugging Face "architectures" / "model_type" names, space-separated
  const char* post_attention_norm;  // what model.layers.N.post_attention_layernorm becomes
  bool permute_qk;   // Q/K rows to GGUF's rotary order (LlamaModel.permute)
  bool norm_plus_one;  // every *norm.weight + 1 (Gemma3RMSNorm multiplies by 1 + w)
  bool vocab_size_key;  // <arch>.vocab_size written (LlamaModel)
  bool rope_dimension_key;  // <arch>.rope.dimension_count written
};
constexpr Family kFamilies[] = {
    {"llama", "LlamaForCausalLM MistralForCausalLM llama mistral", "ffn_norm", true, false, true, true},
    {"gemma3", "Gemma3ForCausalLM Gemma3ForConditionalGeneration gemma3 gemma3_text", "post_attention_norm", false, true,
     false, false},
    {"qwen2", "Qwen2ForCausalLM qwen2", "ffn_norm", false, false, false, false},
    {"qwen3", "Qwen3ForCausalLM qwen3", "ffn_norm", false, false, false, false},
    {"phi3", "Phi3ForCausalLM phi3", "ffn_norm", false, false, false, true},
};

bool has_word(std::string_view words, std::string_view w) {
  for (size_t pos = 0; pos <= words.size();) {
    const size_t space = std::min(words.find(' ', pos), words.size());
    if (words.substr(pos, space - pos) == w) return true;
    pos = space + 1;
  }
  return false;
}

// The GGUF name of a Hugging Face tensor; empty to skip it; nullopt when it maps to nothing.
std::optional<std::string> gguf_name(const Family& fam, std::string name) {
  for (std::string_view prefix : {"language_model.", "model.language_model."})
    if (name.rfind(prefix, 0) == 0) name = (prefix.size() == 15 ? "" : "model.") + name.substr(prefix.size());
  if (name.rfind("vision_tower.", 0) == 0 || name.rfind("multi_modal_projector.", 0) == 0 ||
      name.rfind("model.vision_tower.", 0) == 0 || name.rfind("model.multi_modal_projector.", 0) == 0)
    return std::string();  // the text model only
  if (name.find("rotary_emb.inv_freq") != std::string::npos) return std::string();
  if (name == "model.embed_tokens.weight") return std::string("token_embd.weight");
  if (name == "model.norm.weight") return std::string("output_norm.weight");
  if (name == "lm_head.weight") return std::string("output.weight");
  constexpr std::string_view layers = "model.layers.";
  if (name.rfind(layers, 0) != 0) return std::nullopt;
  const size_t dot = name.find('.', layers.size());
  if (dot == std::string::npos || dot == layers.size() || dot - layers.size() > 5) return std::nullopt;
  const std::string index = name.substr(layers.size(), dot - layers.size());
  if (!std::all_of(index.begin(), index.end(), [](char c) { return c >= '0' && c <= '9'; })) return std::nullopt;
  std::string rest = name.substr(dot + 1);
  std::string suffix;
  for (std::string_view s : {".weight", ".bias"})
    if (rest.size() > s.size() && rest.compare(rest.size() - s.size(), s.size(), s) == 0) {
      suffix = s;
      rest.resize(rest.size() - s.size());
    }
  if (suffix.empty()) return std::nullopt;
  static const std::unordered_map<std::string, std::string> kCommon = {
      {"input_layernorm", "attn_norm"},      {"self_attn.q_proj", "attn_q"},       {"self_attn.k_proj", "attn_k"},
      {"self_attn.v_proj", "attn_v"},        {"self_attn.o_proj", "attn_output"},  {"self_attn.qkv_proj", "attn_qkv"},
      {"self_attn.q_norm", "attn_q_norm"},   {"self_attn.k_norm", "attn_k_norm"},  {"mlp.gate_proj", "ffn_gate"},
      {"mlp.up_proj", "ffn_up"},             {"mlp.down_proj", "ffn_down"},        {"mlp.gate_up_proj", "ffn_up"},
      {"pre_feedforward_layernorm", "ffn_norm"}, {"post_feedforward_layernorm", "post_ffw_norm"},
  };
  std::string mapped;
  if (rest == "post_attention_layernorm") mapped = fam.post_attention_norm;
  else if (auto it = kCommon.find(rest); it != kCommon.end()) mapped = it->second;
  else return std::nullopt;
  return "blk." + index + "." + mapped + suffix;
}

Result<std::string> read_small_file(const fs::path& p, uint64_t limit) {
  auto f = MappedFile::open(p.string(), MapMode::read);
  if (!f.ok()) return f.status();
  if (f->size() > limit)
    return out_of_range(p.string() + ": " + std::to_string(f->size()) + " bytes, more than the " + std::to_string(limit) +
                        " this reader accepts");
  return std::string(reinterpret_cast<const char*>(f->data()), static_cast<size_t>(f->size()));
}

// Rows of a [rows, row_bytes] matrix (or a vector of `rows` elements) from HF's head order
// (per head: the first halves of the rotary pairs, then the second halves) to GGUF's (pairs
// adjacent), as convert_hf_to_gguf.py's LlamaModel.permute: GGUF row h*d + 2i + s = HF row
// h*d + s*d/2 + i.
void permute_rows(const uint8_t* src, uint8_t* dst, int64_t rows, uint64_t row_bytes, int64_t n_head) {
  const int64_t d = rows / n_head, half = d / 2;
  for (int64_t h = 0; h < n_head; ++h)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t s = 0; s < 2; ++s)
        std::memcpy(dst + static_cast<uint64_t>(h * d + 2 * i + s) * row_bytes,
                    src + static_cast<uint64_t>(h * d + s * half + i) * row_bytes, row_bytes);
}

struct Hparams {
  int64_t n_embd = 0, n_layer = 0, n_ff = 0, n_head = 0, n_kv = 0, head_dim = 0;
  std::vector<float> rope_freqs;  // Llama 3 RoPE scaling: rope_freqs.weight, one factor per pair
};

// Llama 3's RoPE scaling as the per-pair factors convert_hf_to_gguf.py computes
// (LlamaModel.generate_extra_tensors), in float32 as its torch code does.
std::vector<float> llama3_rope_factors(const Json& scaling, double theta, int64_t head_dim) {
  const float factor = static_cast<float>(json::get_number(scaling, "factor").value_or(8.0));
  const float low = static_cast<float>(json::get_number(scaling, "low_freq_factor").value_or(1.0));
  const float high = static_cast<float>(json::get_number(scaling, "high_freq_factor").value_or(4.0));
  const float old_ctx = static_cast<float>(json::get_number(scaling, "original_max_position_embeddings").value_or(8192.0));
  const float low_wavelen = old_ctx / low, high_wavelen = old_ctx / high;
  std::vector<float> out;
  for (int64_t i = 0; i < head_dim; i += 2) {
    const float freq = 1.0f / std::pow(static_cast<float>(theta), static_cast<float>(i) / static_cast<float>(head_dim));
    const float wavelen = static_cast<float>(2 * M_PI) / freq;
    if (wavelen < high_wavelen) {
      out.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      out.push_back(factor);
    } else {
      const float smooth = (old_ctx / wavelen - low) / (high - low);
      out.push_back(1.0f / ((1.0f - smooth) / factor + smooth));
    }
  }
  return out;
}

// config.json → the <arch>.* keys convert_hf_to_gguf.py writes.
Result<Hparams> translate_config(const Json& cfg, const Family& fam, const std::string& where, Metadata& md) {
  const std::string a = std::string(fam.gguf_arch) + ".";
  Hparams hp;
  auto need = [&](const char* key, int64_t& out) -> Status {
    auto v = json::get_int(cfg, key);
    if (!v || *v <= 0 || *v > (1 << 22)) return malformed_file(where + ": " + key + " missing or not a positive integer");
    out = *v;
    return Status::ok();
  };
  INFER_RETURN_IF_ERROR(need("hidden_size", hp.n_embd));
  INFER_RETURN_IF_ERROR(need("num_hidden_layers", hp.n_layer));
  INFER_RETURN_IF_ERROR(need("intermediate_size", hp.n_ff));
  INFER_RETURN_IF_ERROR(need("num_attention_heads", hp.n_head));
  hp.n_kv = hp.n_head;
  if (json::member(cfg, "num_key_value_heads") && !json::member(cfg, "num_key_value_heads")->is_null())
    INFER_RETURN_IF_ERROR(need("num_key_value_heads", hp.n_kv));
  hp.head_dim = hp.n_embd / hp.n_head;
  const bool explicit_head = json::get_int(cfg, "head_dim").has_value();
  if (explicit_head) INFER_RETURN_IF_ERROR(need("head_dim", hp.head_dim));
  auto u32 = [](int64_t v) { return static_cast<uint32_t>(v); };
  auto number = [&](const char* key) -> std::optional<double> { return json::get_number(cfg, key); };
  // rope_theta, or (newer configs) rope_parameters.rope_theta.
  std::optional<double> theta = number("rope_theta");
  const Json* rope_params = json::member(cfg, "rope_parameters");
  if (!theta && rope_params) theta = json::get_number(*rope_params, "rope_theta");

  if (auto ctx = json::get_int(cfg, "max_position_embeddings")) md.set(a + "context_length", u32(*ctx));
  md.set(a + "embedding_length", u32(hp.n_embd));
  md.set(a + "block_count", u32(hp.n_layer));
  md.set(a + "feed_forward_length", u32(hp.n_ff));
  md.set(a + "attention.head_count", u32(hp.n_head));
  md.set(a + "attention.head_count_kv", u32(hp.n_kv));
  if (theta) md.set(a + "rope.freq_base", static_cast<float>(*theta));
  if (auto eps = number("rms_norm_eps")) md.set(a + "attention.layer_norm_rms_epsilon", static_cast<float>(*eps));
  if (fam.rope_dimension_key) md.set(a + "rope.dimension_count", u32(hp.head_dim));
  if (explicit_head || std::string_view(fam.gguf_arch) == "gemma3") {
    md.set(a + "attention.key_length", u32(hp.head_dim));
    md.set(a + "attention.value_length", u32(hp.head_dim));
  }
  if (fam.vocab_size_key)
    if (auto v = json::get_int(cfg, "vocab_size")) md.set(a + "vocab_size", u32(*v));

  // RoPE scaling: linear (as convert writes it), Llama 3's per-pair factors; others are refused
  // by name. Newer configs keep it in rope_parameters.
  const Json* scaling = json::member(cfg, "rope_scaling");
  if ((!scaling || scaling->is_null()) && rope_params && rope_params->is_object()) scaling = rope_params;
  if (scaling && scaling->is_object()) {
    const std::string* type = json::get_string(*scaling, "rope_type");
    if (!type) type = json::get_string(*scaling, "type");
    const std::string t = type ? *type : "";
    if (t == "linear") {
      auto factor = json::get_number(*scaling, "factor");
      if (!factor || !(*factor > 0)) return malformed_file(where + ": rope_scaling.factor missing or not positive");
      md.set(a + "rope.scaling.type", "linear");
      md.set(a + "rope.scaling.factor", static_cast<float>(*factor));
    } else if (t == "llama3" && fam.permute_qk) {
      hp.rope_freqs = llama3_rope_factors(*scaling, theta.value_or(10000.0), hp.head_dim);
    } else if (t != "default" && !t.empty()) {
      return unsupported(where + ": rope_scaling type '" + t + "' is not supported in model directories yet (linear is)");
    }
  }
  if (std::string_view(fam.gguf_arch) == "gemma3") {
    if (auto local = number("rope_local_base_freq")) md.set(a + "rope.freq_base_swa", static_cast<float>(*local));
    if (auto cap = number("final_logit_softcapping"); cap && *cap > 0)
      md.set(a + "final_logit_softcapping", static_cast<float>(*cap));
    if (const Json* softcap = json::member(cfg, "attn_logit_softcapping"); softcap && !softcap->is_null())
      return unsupported(where + ": attn_logit_softcapping is not supported (Gemma 3 has none)");
    const auto pattern = json::get_int(cfg, "sliding_window_pattern");
    if (auto window = json::get_int(cfg, "sliding_window"); window && *window > 0 && pattern.value_or(6) != 1)
      md.set(a + "attention.sliding_window", u32(*window));
    if (const Json* types = json::member(cfg, "layer_types"); types && types->is_array()) {
      if (types->size() != static_cast<size_t>(hp.n_layer))
        return malformed_file(where + ": layer_types has " + std::to_string(types->size()) + " entries for " +
                              std::to_string(hp.n_layer) + " layers");
      std::vector<uint8_t> flags;
      for (const Json& t : *types) flags.push_back(t.is_string() && t.get_ref<const std::string&>() == "sliding_attention");
      md.set(a + "attention.sliding_window_pattern", Array::of(ValueType::boolean, std::span<const uint8_t>(flags)));
    } else if (pattern) {
      md.set(a + "attention.sliding_window_pattern", u32(*pattern));
    }
  } else if (std::string_view(fam.gguf_arch) == "phi3") {
    if (auto window = json::get_int(cfg, "sliding_window"); window && *window > 0)
      md.set(a + "attention.sliding_window", u32(*window));
  }
  return hp;
}

struct Shard {
  std::string name;
  safetensors::File file;
};

Result<DType> dtype_of(const safetensors::Tensor& t, const std::string& where) {
  switch (t.dtype) {
    case safetensors::Dtype::f32: return DType::f32;
    case safetensors::Dtype::f16: return DType::f16;
    case safetensors::Dtype::bf16: return DType::bf16;
    case safetensors::Dtype::i8: return DType::i8;
    case safetensors::Dtype::i32: return DType::i32;
    case safetensors::Dtype::i64: return DType::i64;
    case safetensors::Dtype::f8_e4m3: return DType::f8_e4m3;
    default: break;
  }
  return unsupported(where + ": tensor '" + t.name.substr(0, 96) + "' is " + safetensors::dtype_name(t.dtype) +
                     " (F32, F16 and BF16 weights are supported, and the INT8 / FP8 E4M3 ones of compressed-tensors)");
}

// What config.json's quantization_config declares, as the tensor loop needs it.
struct QuantScheme {
  bool quantized = false;        // a compressed-tensors scheme with quantized weights
  bool fp8_activations = false;  // FP8 weights compute as W8A8-FP8
  bool int8_weight_only = false;  // 8-bit int weights without quantized activations (W8A16)
  bool int8_w8a8 = false;         // 8-bit int weights with them
  int packed_bits = 0;            // the bits of pack-quantized weights: 4, 8, 0 (none) or -1 (both)
};

// config.json's quantization_config: the compressed-tensors schemes libinfer computes (docs/huggingface.md):
// 8-bit symmetric weights, one scale per output channel or per tensor (or, INT8 without quantized
// activations, per group), INT8 (format int-quantized,
// or pack-quantized without quantized activations: W8A16) or FP8 E4M3 (float-quantized;
// naive-quantized stores either the same way), with activations unquantized, dynamic per token or
// static per tensor; and 4-bit int weights (pack-quantized), symmetric or with zero points, in
// groups or per channel, activations unquantized (W4A16). INT8 weights compute as W8A8 where the
// scheme quantizes activations and weight-only where it does not, so one checkpoint may not mix
// the two. Anything else is refused by name.
Status check_quantization_config(const Json& config, const std::string& where, QuantScheme& scheme_out) {
  scheme_out = {};
  bool& quantized = scheme_out.quantized;
  bool& fp8_activations = scheme_out.fp8_activations;
  const Json* q = json::member(config, "quantization_config");
  if (!q || q->is_null()) return Status::ok();
  const std::string at = where + ": quantization_config";
  if (!q->is_object()) return malformed_file(at + " is not an object");
  const std::string* method = json::get_string(*q, "quant_method");
  if (!method || *method != "compressed-tensors")
    return unsupported(at + ": quant_method '" + (method ? method->substr(0, 64) : std::string("(none)")) +
                       "' is not supported (compressed-tensors checkpoints are)");
  auto format_ok = [&](const Json& object, const char* what) -> Status {
    const std::string* f = json::get_string(object, "format");
    if (!f) return Status::ok();
    if (*f == "int-quantized" || *f == "float-quantized" || *f == "naive-quantized" || *f == "pack-quantized" ||
        *f == "dense" || *f == "mixed-precision")
      return Status::ok();
    return unsupported(at + ": " + what + "format '" + f->substr(0, 64) +
                       "' is not supported (int-quantized, float-quantized and naive-quantized 8-bit weights are, "
                       "and pack-quantized 4-bit and 8-bit int ones)");
  };
  INFER_RETURN_IF_ERROR(format_ok(*q, ""));
  if (const std::string* status = json::get_string(*q, "quantization_status"); status && *status != "compressed")
    return unsupported(at + ": quantization_status '" + status->substr(0, 64) +
                       "': only compressed checkpoints load (the weights stored quantized)");
  const Json* groups = json::member(*q, "config_groups");
  if (!groups || !groups->is_object()) return Status::ok();
  for (const auto& [name, scheme] : groups->items()) {
    const std::string g = "config_groups." + name.substr(0, 64);
    if (!scheme.is_object()) continue;  // a list of targets: no scheme of its own
    INFER_RETURN_IF_ERROR(format_ok(scheme, (g + ".").c_str()));
    const Json* w = json::member(scheme, "weights");
    if (w && w->is_object()) {
      quantized = true;
      const auto bits = json::get_int(*w, "num_bits");
      const std::string* type = json::get_string(*w, "type");
      const std::string* strategy = json::get_string(*w, "strategy");
      const std::string s = strategy ? *strategy : "";
      const bool int4 = bits.value_or(0) == 4 && type && *type == "int";
      const Json* acts = json::member(scheme, "input_activations");
      const bool weight_only = !acts || acts->is_null();
      if (!int4 && (bits.value_or(0) != 8 || !type || (*type != "int" && *type != "float")))
        return unsupported(at + ": " + g + ".weights: " + std::to_string(bits.value_or(0)) + "-bit " +
                           (type ? type->substr(0, 16) : std::string("?")) +
                           " weights are not supported (8-bit int and float are, and 4-bit int)");
      if (int4) {
        const std::string* f = json::get_string(scheme, "format");
        if (!f) f = json::get_string(*q, "format");
        if (!f || (*f != "pack-quantized" && *f != "mixed-precision"))
          return unsupported(at + ": " + g + ".weights: 4-bit weights must be stored pack-quantized");
        if (s != "group" && s != "channel")
          return unsupported(at + ": " + g + ".weights: strategy '" + s.substr(0, 32) +
                             "' is not supported for 4-bit weights (group and channel are)");
        if (const std::string* order = json::get_string(*w, "actorder"); order && *order == "group")
          return unsupported(at + ": " + g + ".weights: actorder 'group' (a permuted group index, weight_g_idx) is "
                             "not supported");
        if (!weight_only)
          return unsupported(at + ": " + g + ": 4-bit weights with quantized activations (W4A8) are not supported "
                             "(W4A16 is)");
        scheme_out.packed_bits = scheme_out.packed_bits == 8 ? -1 : 4;
      } else {
        const std::string* f = json::get_string(scheme, "format");
        if (!f) f = json::get_string(*q, "format");
        const bool is_int = *type == "int";
        if (f && *f == "pack-quantized" && (!is_int || !weight_only))
          return unsupported(at + ": " + g + ".weights: 8-bit pack-quantized weights are supported as int weights without "
                             "quantized activations (W8A16) only");
        if (is_int) (weight_only ? scheme_out.int8_weight_only : scheme_out.int8_w8a8) = true;
        if (scheme_out.int8_weight_only && scheme_out.int8_w8a8)
          return unsupported(at + ": INT8 weights both with quantized activations (W8A8) and without (W8A16) in one "
                             "checkpoint are not supported");
        if (f && *f == "pack-quantized") scheme_out.packed_bits = scheme_out.packed_bits == 4 ? -1 : 8;
        if (!json::get_bool(*w, "symmetric").value_or(true))
          return unsupported(at + ": " + g + ".weights: asymmetric 8-bit weights (zero points) are not supported");
        if (s == "group" && (!is_int || !weight_only))
          return unsupported(at + ": " + g + ".weights: 8-bit weights in groups are supported as int weights without "
                             "quantized activations (W8A16) only");
        if (s != "channel" && s != "tensor" && s != "group")
          return unsupported(at + ": " + g + ".weights: strategy '" + s.substr(0, 32) +
                             "' is not supported (channel, tensor and, for W8A16, group are)");
      }
    }
    for (const char* key : {"input_activations", "output_activations"}) {
      const Json* a = json::member(scheme, key);
      if (!a || a->is_null()) continue;
      if (std::string_view(key) == "output_activations")
        return unsupported(at + ": " + g + ".output_activations: quantized outputs are not supported");
      const std::string* strategy = json::get_string(*a, "strategy");
      const Json* dynamic = json::member(*a, "dynamic");
      const bool is_dynamic = dynamic && dynamic->is_boolean() && dynamic->get<bool>();
      const std::string s = strategy ? *strategy : "";
      if (json::get_int(*a, "num_bits").value_or(0) != 8 || !json::get_bool(*a, "symmetric").value_or(true) ||
          !((is_dynamic && s == "token") || (!is_dynamic && s == "tensor")))
        return unsupported(at + ": " + g + ".input_activations: only symmetric 8-bit activations, dynamic per token or "
                           "static per tensor, are supported");
      const std::string* type = json::get_string(*a, "type");
      if (type && *type == "float") fp8_activations = true;
    }
  }
  return Status::ok();
}

// What a compressed-tensors checkpoint keeps beside a weight: "<...>.weight_scale" → its weight
// and "weight_scale"; the activation and KV-cache scales libinfer does not use (it quantizes
// activations per token itself, and picks the KV type at run time) → "input_scale" etc.
struct QuantParam {
  std::string weight;  // the Hugging Face name of the weight it belongs to
  std::string kind;    // weight_scale, weight_zero_point, input_scale, input_zero_point, k_scale, ...
};
std::optional<QuantParam> quant_param(const std::string& name) {
  for (std::string_view kind : {"weight_scale", "weight_zero_point", "weight_shape", "weight_g_idx", "input_scale",
                                "input_zero_point", "output_scale", "output_zero_point", "k_scale", "v_scale", "q_scale"}) {
    if (name.size() > kind.size() + 1 && name.ends_with(kind) && name[name.size() - kind.size() - 1] == '.') {
      std::string base = name.substr(0, name.size() - kind.size());
      return QuantParam{base + "weight", std::string(kind)};
    }
  }
  return std::nullopt;
}

// What the tensor loop keeps of pack-quantized INT4 weights for the checks after it: each packed
// weight's shape and its weight_shape, and the packed zero points (unpacked once the weight's rows
// are known).
struct PackedParams {
  std::map<std::string, std::array<int64_t, 2>> shapes;         // Hugging Face weight name -> weight_shape
  std::vector<std::pair<std::string, const safetensors::Tensor*>> zero_points;  // GGUF weight name, I32 tensor
};

// Rows of a tensor made of `rows` equal rows, Llama's Q/K permutation applied where it applies
// (nothing to do: `buf` unchanged).
Status permute_if_qk(const Family& fam, const Hparams& hp, const std::string& mapped, int64_t rows, uint64_t row_bytes,
                     const std::string& what, AlignedBuffer& buf) {
  const bool is_q = mapped.ends_with(".attn_q.weight"), is_k = mapped.ends_with(".attn_k.weight");
  if (!fam.permute_qk || !(is_q || is_k) || rows <= 1) return Status::ok();
  const int64_t heads = is_q ? hp.n_head : hp.n_kv;
  if (rows % heads != 0 || (rows / heads) % 2 != 0)
    return malformed_file(what + ": " + std::to_string(rows) + " rows of scales do not split into " + std::to_string(heads) +
                          " heads of an even size");
  INFER_ASSIGN_OR_RETURN(AlignedBuffer permuted, AlignedBuffer::allocate(static_cast<size_t>(rows) * row_bytes));
  permute_rows(buf.data(), permuted.data(), rows, row_bytes, heads);
  buf = std::move(permuted);
  return Status::ok();
}

// A compressed-tensors parameter beside a weight. weight_scale becomes "<GGUF weight name>_scale",
// F32: one element per output row (its rows in the weight's order: Llama's Q/K permutation applies),
// one for the tensor, or [rows, groups] for INT4 groups. An 8-bit weight_zero_point must be all
// zeros (symmetric); INT4 ones (I32, packed along the rows) and weight_shape go to `packed` for
// after the loop. The activation and KV-cache scales are checked for their dtype and left out.
// Returns whether a tensor was added.
Result<bool> add_quant_param(const Family& fam, const Hparams& hp, bool tied, const QuantParam& param,
                             const safetensors::Tensor& t, DType dtype, const std::string& where, ModelFile::Parts& parts,
                             std::unordered_set<std::string>& seen, PackedParams& packed) {
  const std::string what = where + ": tensor '" + t.name.substr(0, 96) + "'";
  if (param.kind == "weight_g_idx")
    return unsupported(what + ": activation ordering with a group index (actorder 'group') is not supported");
  if (param.kind == "weight_shape") {
    if ((dtype != DType::i64 && dtype != DType::i32) || t.shape.size() != 1 || t.shape[0] != 2)
      return malformed_file(what + ": weight_shape must be two I64 (or I32) numbers");
    std::array<int64_t, 2> shape{};
    for (int d = 0; d < 2; ++d) {
      if (dtype == DType::i64) std::memcpy(&shape[static_cast<size_t>(d)], t.data + 8 * d, 8);
      else {
        int32_t v;
        std::memcpy(&v, t.data + 4 * d, 4);
        shape[static_cast<size_t>(d)] = v;
      }
    }
    packed.shapes[param.weight] = shape;
    return false;
  }
  auto mapped = gguf_name(fam, param.weight);
  if (!mapped) return unsupported(what + " has no GGUF counterpart for " + fam.gguf_arch);
  const bool dropped = mapped->empty() || (*mapped == "output.weight" && tied);
  if (param.kind.ends_with("zero_point")) {
    if (param.kind == "weight_zero_point" && dtype == DType::i32) {
      if (t.shape.size() != 2) return malformed_file(what + ": packed INT4 zero points must be [rows / 8, groups]");
      if (!dropped) packed.zero_points.emplace_back(*mapped, &t);
      return false;
    }
    for (uint64_t i = 0; i < t.nbytes(); ++i)
      if (t.data[i] != 0) return unsupported(what + ": a non-zero zero point (asymmetric 8-bit quantization is not supported)");
    return false;
  }
  if (dtype != DType::f32 && dtype != DType::f16 && dtype != DType::bf16)
    return malformed_file(what + ": a scale must be F32, F16 or BF16, not " + safetensors::dtype_name(t.dtype));
  if (param.kind != "weight_scale") return false;
  if (dropped) return false;
  int64_t n = 1;
  for (int64_t d : t.shape) n *= d;  // the reader checked the shape against the bytes
  const bool column = t.shape.empty() || (t.shape.size() == 1) || (t.shape.size() == 2 && t.shape[1] == 1);
  const bool groups = t.shape.size() == 2 && t.shape[1] > 1;
  if ((!column && !groups) || n < 1)
    return malformed_file(what + ": expected [rows, 1], [rows, groups] or [1] scales, found " +
                          std::to_string(t.shape.size()) + " dimensions");
  TensorInfo info;
  info.name = *mapped + "_scale";
  if (!seen.insert(info.name).second) return malformed_file(what + " appears twice");
  info.dtype = DType::f32;
  info.n_dims = groups ? 2 : 1;
  info.shape[0] = groups ? t.shape[1] : n;
  if (groups) info.shape[1] = t.shape[0];
  info.nbytes = static_cast<uint64_t>(n) * 4;
  INFER_ASSIGN_OR_RETURN(AlignedBuffer buf, AlignedBuffer::allocate(static_cast<size_t>(info.nbytes)));
  for (int64_t i = 0; i < n; ++i) buf.as<float>()[i] = safetensors::element_as_f32(dtype, t.data, i);
  const int64_t rows = groups ? t.shape[0] : n;
  INFER_RETURN_IF_ERROR(permute_if_qk(fam, hp, *mapped, rows, static_cast<uint64_t>(n / rows) * 4, what, buf));
  info.view = TensorView::contiguous(DType::f32, info.n_dims, info.shape, buf.data());
  parts.owned.push_back(std::move(buf));
  parts.tensors.push_back(std::move(info));
  return true;
}

}  // namespace

Result<ModelFile> open_directory(const std::string& dir, MapMode mode) {
  const fs::path root(dir);
  const std::string config_path = (root / "config.json").string();
  std::error_code ec;
  if (!fs::is_regular_file(root / "config.json", ec))
    return not_found(dir + ": a model directory needs config.json (a Hugging Face checkpoint), and none is there");
  INFER_ASSIGN_OR_RETURN(std::string config_text, read_small_file(root / "config.json", 16u << 20));
  INFER_ASSIGN_OR_RETURN(Json config, json::parse(config_text, config_path));
  if (!config.is_object()) return malformed_file(config_path + ": not a JSON object");

  // The family: architectures[0], else model_type.
  std::string arch_name;
  if (const Json* archs = json::member(config, "architectures"); archs && archs->is_array() && !archs->empty() &&
                                                                   (*archs)[0].is_string())
    arch_name = (*archs)[0].get<std::string>();
  else if (const std::string* type = json::get_string(config, "model_type"))
    arch_name = *type;
  const Family* fam = nullptr;
  for (const Family& f : kFamilies)
    if (!arch_name.empty() && has_word(f.architectures, arch_name)) fam = &f;
  if (!fam)
    return unsupported(config_path + ": architecture '" + arch_name.substr(0, 96) +
                       "' is not supported (Llama, Mistral, Gemma 3, Qwen2, Qwen3 and Phi-3 models are)");
  // Multimodal wrappers keep the text model's hyper-parameters in text_config.
  const Json* cfg = &config;
  if (const Json* text = json::member(config, "text_config"); text && text->is_object()) cfg = text;

  ModelFile::Parts parts;
  parts.path = dir;
  parts.format = "safetensors";
  Metadata& md = parts.metadata;
  md.set("general.architecture", std::string(fam->gguf_arch));
  std::string name = root.filename().string();
  if (name.empty()) name = root.parent_path().filename().string();
  md.set("general.name", name);
  INFER_ASSIGN_OR_RETURN(Hparams hp, translate_config(*cfg, *fam, config_path, md));
  QuantScheme scheme;
  INFER_RETURN_IF_ERROR(check_quantization_config(config, config_path, scheme));
  const bool compressed = scheme.quantized;
  // FP8 weights of a scheme with FP8 activations compute as W8A8-FP8, INT8 weights of one without
  // quantized activations weight-only (model/weights.cpp).
  if (scheme.fp8_activations) md.set(std::string(kFp8ActivationsKey), true);
  if (scheme.int8_weight_only) md.set(std::string(kInt8WeightOnlyKey), true);
  const bool tied = json::get_bool(*cfg, "tie_word_embeddings").value_or(json::get_bool(config, "tie_word_embeddings").value_or(false));
  // Online input rotations (quantization_config.transform_config): each linear weight's, below.
  INFER_ASSIGN_OR_RETURN(const InputRotations rotations, InputRotations::parse(config, config_path));
  if (tied) {
    INFER_ASSIGN_OR_RETURN(const int32_t lm_head, rotations.of("lm_head", hp.n_embd));
    if (lm_head != 0)
      return unsupported(config_path + ": transform_config rotates the input of lm_head, which is tied to the embeddings "
                         "(not supported)");
  }

  // The shards.
  std::vector<Shard> shards;
  std::vector<std::pair<std::string, std::string>> weight_map;
  const fs::path index_path = root / "model.safetensors.index.json";
  if (fs::is_regular_file(index_path, ec)) {
    INFER_ASSIGN_OR_RETURN(std::string text, read_small_file(index_path, 64u << 20));
    INFER_ASSIGN_OR_RETURN(safetensors::ShardIndex index, safetensors::parse_shard_index(text, index_path.string()));
    for (const std::string& s : index.shards) shards.push_back({s, {}});
    weight_map = std::move(index.weight_map);
  } else if (fs::is_regular_file(root / "model.safetensors", ec)) {
    shards.push_back({"model.safetensors", {}});
  } else {
    return not_found(dir + ": no model.safetensors or model.safetensors.index.json");
  }
  for (Shard& s : shards) {
    INFER_ASSIGN_OR_RETURN(s.file, safetensors::read_file((root / s.name).string(), mode));
  }
  if (!weight_map.empty()) {
    std::unordered_map<std::string_view, const Shard*> by_name;
    for (const Shard& s : shards) by_name.emplace(s.name, &s);
    std::unordered_set<std::string_view> listed;
    for (const auto& entry : weight_map) {
      const std::string& tensor = entry.first;
      const std::string& shard = entry.second;
      const Shard* s = by_name.at(shard);
      const bool found = std::any_of(s->file.tensors.begin(), s->file.tensors.end(),
                                     [&](const safetensors::Tensor& t) { return t.name == tensor; });
      if (!found)
        return malformed_file(index_path.string() + ": tensor '" + tensor.substr(0, 96) + "' is not in its shard " + shard);
      listed.insert(tensor);
    }
    for (const Shard& s : shards)
      for (const auto& t : s.file.tensors)
        if (!listed.count(t.name))
          return malformed_file(index_path.string() + ": shard " + s.name + " holds tensor '" + t.name.substr(0, 96) +
                                "', which weight_map does not list");
  }

  // The tokenizer (its size trims Gemma's padded embedding rows, as convert does).
  INFER_RETURN_IF_ERROR(read_tokenizer(dir, md));
  const Array* tokens = md.get_array("tokenizer.ggml.tokens");
  const int64_t n_tokens = tokens ? static_cast<int64_t>(tokens->count) : 0;

  // The tensors.
  std::unordered_set<std::string> seen;
  std::vector<std::string> quantized;  // GGUF names of the INT8 / FP8 / INT4 weights, each needing "<name>_scale"
  PackedParams packed;
  std::map<std::string, std::pair<std::string, std::array<int64_t, 2>>> packed_weights;  // HF name -> GGUF name, [rows, n]
  // The input columns of each packed weight, from the weight_shape compressed-tensors writes beside
  // it: they tell 4-bit words (8 values each) from 8-bit ones (4 each).
  std::unordered_map<std::string, int64_t> packed_columns;  // HF weight name -> columns
  for (const Shard& s : shards)
    for (const safetensors::Tensor& t : s.file.tensors) {
      if (!t.name.ends_with(".weight_shape") || t.shape.size() != 1 || t.shape[0] != 2) continue;
      int64_t cols = 0;
      if (t.dtype == safetensors::Dtype::i64) {
        std::memcpy(&cols, t.data + 8, 8);
      } else if (t.dtype == safetensors::Dtype::i32) {
        int32_t c;
        std::memcpy(&c, t.data + 4, 4);
        cols = c;
      } else {
        continue;  // add_quant_param refuses it
      }
      packed_columns[t.name.substr(0, t.name.size() - 6)] = cols;  // "...weight"
    }
  std::unordered_map<std::string, int32_t> module_rotation;  // HF module -> its input rotation, where one is set
  std::vector<std::tuple<const safetensors::Tensor*, DType, std::string>> transform_tensors;  // checked after the loop
  for (const Shard& s : shards) {
    const std::string where = (root / s.name).string();
    for (const safetensors::Tensor& t : s.file.tensors) {
      if (rotations.is_transform_tensor(t.name)) {  // "<module>.<scheme>_input.weight": computed, not read
        // Checked against the matrix after the loop, in any float type (llm-compressor writes F64).
        auto dtype = t.dtype == safetensors::Dtype::f64 ? Result<DType>(DType::f64) : dtype_of(t, where);
        if (!dtype.ok()) return dtype.status();
        transform_tensors.emplace_back(&t, *dtype, where);
        continue;
      }
      INFER_ASSIGN_OR_RETURN(DType dtype, dtype_of(t, where));
      if (auto param = quant_param(t.name)) {
        INFER_RETURN_IF_ERROR(add_quant_param(*fam, hp, tied, *param, t, dtype, where, parts, seen, packed).status());
        continue;
      }
      // A pack-quantized weight: "<module>.weight_packed", I32 [rows, n / 8] or [rows, n / 4], is
      // the module's weight: 4-bit words as I4_PACKED [rows, n]; 8-bit ones (W8A16: byte k of a
      // little-endian word is the value + 128) unpacked here to I8 [rows, n].
      std::string hf_name = t.name;
      std::vector<int64_t> shape = t.shape;
      const uint8_t* source = t.data;
      if (t.name.ends_with(".weight_packed")) {
        const std::string what = where + ": tensor '" + t.name.substr(0, 96) + "'";
        if (!compressed)
          return malformed_file(what + " is packed but config.json has no compressed-tensors quantization_config");
        if (dtype != DType::i32 || t.shape.size() != 2)
          return malformed_file(what + " must be an I32 matrix (8 INT4 or 4 INT8 values a word)");
        hf_name = t.name.substr(0, t.name.size() - 7);  // "...weight"
        int bits = scheme.packed_bits;
        if (auto it = packed_columns.find(hf_name); it != packed_columns.end()) {
          bits = it->second == shape[1] * 8 ? 4 : it->second == shape[1] * 4 ? 8 : 0;
          if (bits == 0 || (scheme.packed_bits > 0 && bits != scheme.packed_bits))
            return malformed_file(what + ": " + std::to_string(shape[1]) + " words a row do not hold the " +
                                  std::to_string(it->second) + " columns of its weight_shape as the config's " +
                                  (scheme.packed_bits == 8 ? "8" : scheme.packed_bits == 4 ? "4" : "4- or 8") + "-bit values");
        }
        if (bits == 4) {
          shape[1] *= 8;
          dtype = DType::i4_packed;
        } else if (bits == 8) {
          shape[1] *= 4;
          INFER_ASSIGN_OR_RETURN(AlignedBuffer buf, AlignedBuffer::allocate(static_cast<size_t>(t.nbytes())));
          for (uint64_t i = 0; i < t.nbytes(); ++i) buf.data()[i] = static_cast<uint8_t>(t.data[i] ^ 0x80u);
          source = buf.data();
          parts.owned.push_back(std::move(buf));
          dtype = DType::i8;
        } else {
          return malformed_file(what + ": no weight_shape tells whether its words hold 4-bit or 8-bit values");
        }
      }
      if (dtype == DType::i8 || dtype == DType::f8_e4m3) {
        if (!compressed)
          return malformed_file(where + ": tensor '" + t.name.substr(0, 96) + "' is " + safetensors::dtype_name(t.dtype) +
                                " but config.json has no compressed-tensors quantization_config with 8-bit weights");
        if (t.shape.size() != 2)
          return malformed_file(where + ": quantized tensor '" + t.name.substr(0, 96) + "' is not a matrix");
      }
      auto mapped = gguf_name(*fam, hf_name);
      if (!mapped)
        return unsupported(where + ": tensor '" + t.name.substr(0, 96) + "' has no GGUF counterpart for " + fam->gguf_arch);
      if (mapped->empty()) continue;
      if (*mapped == "output.weight" && tied) continue;  // the embeddings serve as the output
      if (!seen.insert(*mapped).second) return malformed_file(where + ": tensor '" + t.name.substr(0, 96) + "' appears twice");
      if (dtype == DType::i8 || dtype == DType::f8_e4m3 || dtype == DType::i4_packed) quantized.push_back(*mapped);
      if (dtype == DType::i4_packed) packed_weights[hf_name] = {*mapped, {shape[0], shape[1]}};
      TensorInfo info;
      info.name = *mapped;
      info.dtype = dtype;
      if (shape.size() > static_cast<size_t>(kMaxDims))
        return unsupported(where + ": tensor '" + t.name.substr(0, 96) + "' has " + std::to_string(shape.size()) +
                           " dimensions (at most " + std::to_string(kMaxDims) + ")");
      info.n_dims = static_cast<int>(shape.size());
      for (int d = 0; d < info.n_dims; ++d) info.shape[d] = shape[shape.size() - 1 - static_cast<size_t>(d)];
      info.offset = t.begin;
      info.nbytes = t.nbytes();
      // A linear layer (any matrix but the embeddings) may have its input rotated online.
      if (!rotations.empty() && info.n_dims == 2 && hf_name.ends_with(".weight") && info.name != "token_embd.weight") {
        const std::string module = hf_name.substr(0, hf_name.size() - 7);
        auto rotation = rotations.of(module, info.shape[0]);
        if (!rotation.ok()) return rotation.status().with_context(config_path);
        info.input_rotation = *rotation;
        if (*rotation != 0) module_rotation[module] = *rotation;
      }
      const uint8_t* data = source;
      // Gemma's embeddings may have padding rows past the tokenizer's vocabulary: convert drops them.
      if (fam->norm_plus_one && info.name == "token_embd.weight" && info.n_dims == 2 && n_tokens > 0 &&
          info.shape[1] > n_tokens) {
        info.nbytes = info.nbytes / static_cast<uint64_t>(info.shape[1]) * static_cast<uint64_t>(n_tokens);
        info.shape[1] = n_tokens;
      }
      const bool is_q = info.name.ends_with(".attn_q.weight") || info.name.ends_with(".attn_q.bias");
      const bool is_k = info.name.ends_with(".attn_k.weight") || info.name.ends_with(".attn_k.bias");
      if (fam->permute_qk && (is_q || is_k)) {
        const int64_t heads = is_q ? hp.n_head : hp.n_kv;
        const int64_t rows = info.n_dims == 1 ? info.shape[0] : info.shape[1];
        if (info.n_dims > 2 || rows % heads != 0 || (rows / heads) % 2 != 0)
          return malformed_file(where + ": tensor '" + t.name.substr(0, 96) + "': " + std::to_string(rows) +
                                " rows do not split into " + std::to_string(heads) + " heads of an even size");
        INFER_ASSIGN_OR_RETURN(AlignedBuffer buf, AlignedBuffer::allocate(static_cast<size_t>(info.nbytes)));
        if (info.nbytes > 0) permute_rows(data, buf.data(), rows, info.nbytes / static_cast<uint64_t>(rows), heads);
        data = buf.data();
        parts.owned.push_back(std::move(buf));
      } else if (fam->norm_plus_one && info.name.ends_with("norm.weight")) {
        if (dtype != DType::f32 && dtype != DType::f16 && dtype != DType::bf16)
          return malformed_file(where + ": norm '" + t.name.substr(0, 96) + "' is not a float tensor");
        const int64_t n = info.numel();
        INFER_ASSIGN_OR_RETURN(AlignedBuffer buf, AlignedBuffer::allocate(static_cast<size_t>(n) * 4));
        float* out = buf.as<float>();
        for (int64_t i = 0; i < n; ++i) out[i] = safetensors::element_as_f32(dtype, data, i) + 1.0f;
        info.dtype = DType::f32;
        info.nbytes = static_cast<uint64_t>(n) * 4;
        data = buf.data();
        parts.owned.push_back(std::move(buf));
      }
      info.view = TensorView::contiguous(info.dtype, info.n_dims, info.shape, const_cast<uint8_t*>(data));
      parts.tensors.push_back(std::move(info));
    }
  }
  // The transforms' own tensors are the matrices of their modules' rotations.
  for (const auto& [t, dtype, where] : transform_tensors) {
    auto it = module_rotation.find(InputRotations::module_of(t->name));
    INFER_RETURN_IF_ERROR(rotations.check_tensor(*t, dtype, it == module_rotation.end() ? 0 : it->second, where));
  }
  // Every quantized weight has its scales, and every weight_scale belongs to a quantized weight.
  for (const std::string& weight : quantized)
    if (!seen.count(weight + "_scale"))
      return malformed_file(dir + ": quantized weight " + weight + " has no weight_scale tensor");
  for (const TensorInfo& info : parts.tensors)
    if (info.name.ends_with(".weight_scale") &&
        std::find(quantized.begin(), quantized.end(), info.name.substr(0, info.name.size() - 6)) == quantized.end())
      return malformed_file(dir + ": " + info.name + " belongs to no INT8 / FP8 / INT4 weight (a float weight with scales: "
                            "only compressed checkpoints load)");
  // Packed INT4 weights: weight_shape agrees, and the zero points unpack to [rows, groups] I8
  // ("<name>_zero_point"; a value v + 8 at bits 4 (r mod 8) of word [r / 8, g], as pack_to_int32
  // writes them along dimension 0).
  for (const auto& [hf_weight, shape] : packed.shapes) {
    auto it = packed_weights.find(hf_weight);
    if (it == packed_weights.end()) continue;  // a float weight's weight_shape: harmless
    if (it->second.second != shape)
      return malformed_file(dir + ": " + hf_weight.substr(0, 96) + "_shape is [" + std::to_string(shape[0]) + ", " +
                            std::to_string(shape[1]) + "], the packed weight holds [" + std::to_string(it->second.second[0]) +
                            ", " + std::to_string(it->second.second[1]) + "]");
  }
  for (const auto& [weight, zt] : packed.zero_points) {
    const std::string what = dir + ": " + zt->name.substr(0, 96);
    const TensorInfo* w = nullptr;
    for (const TensorInfo& info : parts.tensors)
      if (info.name == weight) w = &info;
    if (!w || w->dtype != DType::i4_packed) return malformed_file(what + ": packed zero points of no packed INT4 weight");
    const int64_t rows = w->shape[1], groups = zt->shape[1];
    if (zt->shape[0] != (rows + 7) / 8)
      return malformed_file(what + ": " + std::to_string(zt->shape[0]) + " rows of packed zero points for " +
                            std::to_string(rows) + " weight rows (want " + std::to_string((rows + 7) / 8) + ")");
    TensorInfo info;
    info.name = weight + "_zero_point";
    if (!seen.insert(info.name).second) return malformed_file(what + " appears twice");
    info.dtype = DType::i8;
    info.n_dims = 2;
    info.shape[0] = groups;
    info.shape[1] = rows;
    info.nbytes = static_cast<uint64_t>(rows * groups);
    INFER_ASSIGN_OR_RETURN(AlignedBuffer buf, AlignedBuffer::allocate(static_cast<size_t>(info.nbytes)));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t g = 0; g < groups; ++g) {
        uint32_t word;
        std::memcpy(&word, zt->data + 4 * ((r / 8) * groups + g), 4);
        buf.as<int8_t>()[r * groups + g] = static_cast<int8_t>(static_cast<int>((word >> (4 * (r % 8))) & 15) - 8);
      }
    INFER_RETURN_IF_ERROR(permute_if_qk(*fam, hp, weight, rows, static_cast<uint64_t>(groups), what, buf));
    info.view = TensorView::contiguous(DType::i8, 2, info.shape, buf.data());
    parts.owned.push_back(std::move(buf));
    parts.tensors.push_back(std::move(info));
  }
  if (!hp.rope_freqs.empty()) {
    TensorInfo info;
    info.name = "rope_freqs.weight";
    info.n_dims = 1;
    info.shape[0] = static_cast<int64_t>(hp.rope_freqs.size());
    info.nbytes = hp.rope_freqs.size() * 4;
    INFER_ASSIGN_OR_RETURN(AlignedBuffer buf, AlignedBuffer::allocate(static_cast<size_t>(info.nbytes)));
    std::memcpy(buf.data(), hp.rope_freqs.data(), static_cast<size_t>(info.nbytes));
    info.view = TensorView::contiguous(DType::f32, 1, info.shape, buf.data());
    parts.owned.push_back(std::move(buf));
    parts.tensors.push_back(std::move(info));
  }
  parts.file = shards.front().file.file;
  parts.data_offset = shards.front().file.header_bytes;
  for (size_t i = 1; i < shards.size(); ++i) parts.extra_files.push_back(shards[i].file.file);
  return ModelFile(std::move(parts));
}

}  // namespace infer::hf
