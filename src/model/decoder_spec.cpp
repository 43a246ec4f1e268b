#include "model/decoder_spec.hpp"

#include <climits>

#include "core/status_macros.hpp"
#include "model/weights.hpp"

namespace infer {

Result<DecoderSpec> read_decoder_hparams(const ModelFile& f, const std::string& arch, const HParamDefaults& defaults) {
  DecoderSpec s;
  s.arch = arch;
  const std::string a = arch + ".";
  auto bad = [&](const std::string& what) { return malformed_file(f.path() + ": " + what); };
  INFER_ASSIGN_OR_RETURN(int64_t n_embd, require_int(f, a + "embedding_length"));
  INFER_ASSIGN_OR_RETURN(int64_t n_layer, require_int(f, a + "block_count"));
  INFER_ASSIGN_OR_RETURN(int64_t n_ff, require_int(f, a + "feed_forward_length"));
  INFER_ASSIGN_OR_RETURN(int64_t n_head, require_int(f, a + "attention.head_count"));
  const int64_t n_kv = optional_int(f, a + "attention.head_count_kv", n_head);
  if (n_embd <= 0 || n_embd > (1 << 20)) return bad("embedding_length " + std::to_string(n_embd) + " out of range");
  if (n_layer <= 0 || n_layer > 4096) return bad("block_count " + std::to_string(n_layer) + " out of range");
  if (n_ff <= 0 || n_ff > (1 << 22)) return bad("feed_forward_length " + std::to_string(n_ff) + " out of range");
  if (n_head <= 0 || n_head > 4096) return bad("attention.head_count " + std::to_string(n_head) + " out of range");
  if (n_kv <= 0 || n_head % n_kv != 0)
    return bad("attention.head_count_kv " + std::to_string(n_kv) + " does not divide head_count " + std::to_string(n_head));
  const bool explicit_head = f.metadata().get_integer(a + "attention.key_length").has_value();
  if (!explicit_head && n_embd % n_head != 0)
    return bad("attention.head_count " + std::to_string(n_head) + " does not divide embedding_length " + std::to_string(n_embd));
  const int64_t head_dim = optional_int(f, a + "attention.key_length", n_embd / n_head);
  if (head_dim <= 0 || head_dim > 4096 || head_dim % 2 != 0) return bad("head size (attention.key_length) must be even and positive");
  if (optional_int(f, a + "attention.value_length", head_dim) != head_dim)
    return unsupported(f.path() + ": value head size other than the key head size");
  const int64_t n_rot = optional_int(f, a + "rope.dimension_count", head_dim);
  if (n_rot != head_dim)
    return bad("rope.dimension_count " + std::to_string(n_rot) + " must equal the head size " + std::to_string(head_dim));
  INFER_ASSIGN_OR_RETURN(double eps, optional_number(f, a + "attention.layer_norm_rms_epsilon", defaults.rms_eps));
  INFER_ASSIGN_OR_RETURN(double base, optional_number(f, a + "rope.freq_base", 10000.0));
  // Linear scaling: rope.scaling.factor (or the older rope.scale_linear) divides positions.
  const std::string* scaling = f.metadata().get_string(a + "rope.scaling.type");
  if (scaling && *scaling != "none" && *scaling != "linear")
    return unsupported(f.path() + ": RoPE scaling '" + *scaling + "' is not supported (none, linear, llama3 factors)");
  INFER_ASSIGN_OR_RETURN(double factor, optional_number(f, a + "rope.scaling.factor", 0.0));
  if (factor == 0.0) {
    INFER_ASSIGN_OR_RETURN(factor, optional_number(f, a + "rope.scale_linear", 0.0));
  }
  if (scaling && *scaling == "none") factor = 0.0;
  if (!(eps > 0) || !(base > 0) || factor < 0) return bad("RMS epsilon, RoPE base and scaling factor must be positive");

  s.n_ctx_train = optional_int(f, a + "context_length", defaults.n_ctx);
  s.n_embd = static_cast<int>(n_embd);
  s.n_layer = static_cast<int>(n_layer);
  s.n_ff = static_cast<int>(n_ff);
  s.n_head = static_cast<int>(n_head);
  s.n_kv_heads = static_cast<int>(n_kv);
  s.head_dim = static_cast<int>(head_dim);
  s.n_rot = static_cast<int>(n_rot);
  s.rms_eps = static_cast<float>(eps);
  s.rope_base = static_cast<float>(base);
  s.rope_scale = factor > 0 ? static_cast<float>(1.0 / factor) : 1.0f;
  return s;
}

Status read_sliding_window(const ModelFile& f, DecoderSpec& spec, int64_t period) {
  const std::string key = spec.arch + ".attention.sliding_window_pattern";
  const int64_t window = optional_int(f, spec.arch + ".attention.sliding_window", 0);
  if (window < 0 || window > INT32_MAX) return malformed_file(f.path() + ": attention.sliding_window out of range");
  spec.sliding_window = static_cast<int>(window);
  const int n_layer = spec.n_layer;
  std::vector<uint8_t>& local = spec.window_layers;
  local.assign(static_cast<size_t>(n_layer), 0);
  if (window == 0) return Status::ok();
  if (const Array* flags = f.metadata().get_array(key)) {
    if (flags->count != static_cast<uint64_t>(n_layer))
      return malformed_file(f.path() + ": " + key + " has " + std::to_string(flags->count) + " entries for " +
                            std::to_string(n_layer) + " layers");
    for (int l = 0; l < n_layer; ++l) {
      const auto v = flags->integer_at(static_cast<uint64_t>(l));
      if (!v) return malformed_file(f.path() + ": " + key + " must hold booleans");
      local[static_cast<size_t>(l)] = *v != 0;
    }
    return Status::ok();
  }
  period = optional_int(f, key, period);
  if (period < 0) return malformed_file(f.path() + ": " + key + " must not be negative");
  for (int l = 0; l < n_layer; ++l) local[static_cast<size_t>(l)] = period == 0 || (l % period < period - 1);
  return Status::ok();
}

}  // namespace infer
