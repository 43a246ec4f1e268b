#include "quant/quant_recipe.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace infer::quant {
namespace {

// llama_ftype values (llama.h).
enum Ftype : int {
  kAllF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ8_0 = 7, kQ5_0 = 8, kQ5_1 = 9, kQ2_K = 10,
  kQ3_K_S = 11, kQ3_K_M = 12, kQ3_K_L = 13, kQ4_K_S = 14, kQ4_K_M = 15, kQ5_K_S = 16,
  kQ5_K_M = 17, kQ6_K = 18, kBF16 = 32,
};

constexpr Preset kPresets[] = {
    {"Q4_0", kQ4_0, DType::q4_0},     {"Q4_1", kQ4_1, DType::q4_1},     {"Q5_0", kQ5_0, DType::q5_0},
    {"Q5_1", kQ5_1, DType::q5_1},     {"Q2_K", kQ2_K, DType::q2_k},     {"Q3_K", kQ3_K_M, DType::q3_k},
    {"Q3_K_S", kQ3_K_S, DType::q3_k}, {"Q3_K_M", kQ3_K_M, DType::q3_k}, {"Q3_K_L", kQ3_K_L, DType::q3_k},
    {"Q4_K", kQ4_K_M, DType::q4_k},   {"Q4_K_S", kQ4_K_S, DType::q4_k}, {"Q4_K_M", kQ4_K_M, DType::q4_k},
    {"Q5_K", kQ5_K_M, DType::q5_k},   {"Q5_K_S", kQ5_K_S, DType::q5_k}, {"Q5_K_M", kQ5_K_M, DType::q5_k},
    {"Q6_K", kQ6_K, DType::q6_k},     {"Q8_0", kQ8_0, DType::q8_0},     {"F16", kF16, DType::f16},
    {"BF16", kBF16, DType::bf16},     {"F32", kAllF32, DType::f32},
};

enum class Category { output, token_embd, attn_qkv, attn_kv_b, attn_v, attn_k, attn_q, attn_output, ffn_up, ffn_gate,
                      ffn_down, other };

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

bool is_token_embd(std::string_view name) {
  return name == "token_embd.weight" || name == "per_layer_token_embd.weight";
}

// llama.cpp's tensor_get_category: the first matching substring wins.
Category category_of(std::string_view name) {
  if (name == "output.weight") return Category::output;
  if (is_token_embd(name)) return Category::token_embd;
  if (contains(name, "attn_qkv.weight")) return Category::attn_qkv;
  if (contains(name, "attn_kv_b.weight")) return Category::attn_kv_b;
  if (contains(name, "attn_v.weight")) return Category::attn_v;
  if (contains(name, "attn_k.weight")) return Category::attn_k;
  if (contains(name, "attn_q.weight")) return Category::attn_q;
  if (contains(name, "attn_output.weight")) return Category::attn_output;
  if (contains(name, "ffn_up")) return Category::ffn_up;
  if (contains(name, "ffn_gate")) return Category::ffn_gate;
  if (contains(name, "ffn_down")) return Category::ffn_down;
  return Category::other;
}

bool is_attn_v_like(Category c) {
  return c == Category::attn_v || c == Category::attn_qkv || c == Category::attn_kv_b;
}

// llama.cpp's tensor_allows_quantization for the architectures without special lists.
bool allows_quantization(const TensorShape& t) {
  if (significant_dims(t.shape) < 2) return false;
  const std::string_view name = t.name;
  if (name.size() < 6 || name.substr(name.size() - 6) != "weight") return false;
  static constexpr std::string_view kNever[] = {
      "_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel", "per_layer_model_proj",
      "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight", "indexer.q_proj.weight",
      "time_mix_first.weight", "time_mix_w0.weight", "time_mix_w1.weight", "time_mix_w2.weight",
      "time_mix_v0.weight", "time_mix_v1.weight", "time_mix_v2.weight", "time_mix_a0.weight", "time_mix_a1.weight",
      "time_mix_a2.weight", "time_mix_g1.weight", "time_mix_g2.weight", "time_mix_decay_w1.weight",
      "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight", "attn_rel_b.weight", ".position_embd",
      "sam.pos_embd", "sam.neck.", "sam.net_", ".rel_pos", ".patch_embd", ".patch_merger", "a.rvq.codebook",
      "mm.a.code_embd"};
  for (std::string_view part : kNever)
    if (contains(name, part)) return false;
  return name != "position_embd.weight" && name != "token_types.weight";
}

int layer_of(const std::string& name) {
  int layer = -1;
  std::sscanf(name.c_str(), "blk.%d.", &layer);
  return layer;
}

uint32_t block_size(DType t) { return dtype_traits(t)->block_size; }

// llama.cpp's tensor_type_fallback: a type that divides the row.
DType fallback(DType t, int64_t row_length) {
  if (row_length % block_size(t) == 0) return t;
  DType r = t;
  switch (t) {
    case DType::q2_k:
    case DType::q3_k: r = DType::q4_0; break;
    case DType::q4_k: r = DType::q5_0; break;
    case DType::q5_k: r = DType::q5_1; break;
    case DType::q6_k: r = DType::q8_0; break;
    default: break;  // a 32-block type has nothing smaller: F16 below
  }
  return row_length % block_size(r) == 0 ? r : DType::f16;
}

// The mixture state: how many attn_v-like tensors the model has and how many were visited, and
// the ffn_down visits, which stand for the layer index in dense models.
struct Counters {
  int n_attn_v = 0;
  int i_attn_v = 0;
  int i_ffn_down = 0;
};

bool use_more_bits(int i_layer, int n_layers) {
  return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

// llama.cpp's llama_tensor_get_type_impl for the presets above.
DType mixture_type(DType type, const TensorShape& t, Category category, int ftype, const ModelFacts& m, bool tied,
                   bool has_imatrix, Counters& c) {
  const bool falcon = m.arch == "falcon";
  // MoE models name the layer in the tensor; dense ones count visits.
  const auto layer = [&](int counter) { return m.n_expert > 1 ? layer_of(t.name) : counter; };
  const int n_layer = m.n_layer;
  if (category == Category::output || (tied && category == Category::token_embd)) {
    if (falcon || t.shape[0] % block_size(type) != 0) return DType::q8_0;
    return type != DType::q8_0 ? DType::q6_k : type;
  }
  if (is_attn_v_like(category)) {
    if (ftype == kQ2_K) type = m.n_gqa >= 4 ? DType::q4_k : DType::q3_k;
    else if (ftype == kQ3_K_M) type = c.i_attn_v < 2 ? DType::q5_k : DType::q4_k;
    else if (ftype == kQ3_K_L) type = DType::q5_k;
    else if ((ftype == kQ4_K_M || ftype == kQ5_K_M) && use_more_bits(c.i_attn_v, c.n_attn_v)) type = DType::q6_k;
    else if (ftype == kQ4_K_S && c.i_attn_v < 4) type = DType::q5_k;
    if (m.is_70b && (type == DType::q3_k || type == DType::q4_k)) type = DType::q5_k;
    if (m.n_expert == 8) type = DType::q8_0;
    ++c.i_attn_v;
  } else if (category == Category::attn_k) {
    if (m.n_expert == 8) type = DType::q8_0;
  } else if (category == Category::ffn_down) {
    const int i_layer = layer(c.i_ffn_down);
    if (ftype == kQ2_K) type = DType::q3_k;
    else if (ftype == kQ3_K_M)
      type = i_layer < n_layer / 16                         ? DType::q5_k
             : !falcon || use_more_bits(i_layer, n_layer) ? DType::q4_k
                                                            : DType::q3_k;
    else if (ftype == kQ3_K_L) type = falcon ? DType::q4_k : DType::q5_k;
    else if (ftype == kQ4_K_M) {
      if (falcon)
        type = i_layer < n_layer / 16 ? DType::q6_k : use_more_bits(i_layer, n_layer) ? DType::q5_k : DType::q4_k;
      else if (use_more_bits(i_layer, n_layer))
        type = DType::q6_k;
    } else if (ftype == kQ5_K_M && use_more_bits(i_layer, n_layer)) type = DType::q6_k;
    else if (ftype == kQ4_K_S && !falcon && i_layer < n_layer / 8) type = DType::q5_k;
    // Only with an importance matrix (so that a file without one stays as it always was): the
    // first eighth of the ffn_down layers of Q4_0 / Q5_0 guard against outliers with a min.
    else if ((ftype == kQ4_0 || ftype == kQ5_0) && has_imatrix && i_layer < n_layer / 8)
      type = ftype == kQ4_0 ? DType::q4_1 : DType::q5_1;
    ++c.i_ffn_down;
  } else if (category == Category::attn_output) {
    if (!falcon) {
      if (m.n_expert == 8) {
        if (ftype == kQ2_K || ftype == kQ3_K_S || ftype == kQ3_K_M || ftype == kQ4_K_S || ftype == kQ4_K_M)
          type = DType::q5_k;
      } else {
        if (ftype == kQ2_K) type = DType::q3_k;
        else if (ftype == kQ3_K_M) type = DType::q4_k;
        else if (ftype == kQ3_K_L) type = DType::q5_k;
      }
    } else if (ftype == kQ3_K_L) {
      type = DType::q4_k;
    }
  }
  // llama.cpp's attn_qkv branch never runs (attn_qkv is attn_v-like), and its ffn_gate / ffn_up
  // rules concern IQ presets only.
  return type;
}

std::string upper(std::string_view s) {
  std::string r(s);
  for (char& ch : r) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return r;
}

}  // namespace

std::optional<Preset> find_preset(std::string_view name) {
  const std::string want = upper(name);
  for (const Preset& p : kPresets)
    if (want == p.name) return p;
  return std::nullopt;
}

std::span<const Preset> all_presets() { return kPresets; }

int significant_dims(const std::array<int64_t, 4>& shape) {
  for (int d = 3; d >= 1; --d)
    if (shape[static_cast<size_t>(d)] > 1) return d + 1;
  return 1;
}

std::vector<size_t> tensor_order(std::span<const TensorShape> tensors) {
  std::vector<size_t> order(tensors.size());
  std::vector<int> layers(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    order[i] = i;
    layers[i] = layer_of(tensors[i].name);
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (layers[a] != layers[b]) return layers[a] < layers[b];
    return tensors[a].name < tensors[b].name;
  });
  return order;
}

std::vector<DType> choose_types(const Preset& preset, const ModelFacts& model, std::span<const TensorShape> tensors,
                                const RecipeOptions& options) {
  Counters counters;
  bool tied = true;  // token_embd doubles as the output unless the model has output.weight
  for (const TensorShape& t : tensors) {
    const Category c = category_of(t.name);
    if (is_attn_v_like(c)) ++counters.n_attn_v;
    if (c == Category::output) tied = false;
  }
  const bool quantized = dtype_traits(preset.base)->quantized;
  std::vector<DType> types(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorShape& t = tensors[i];
    const bool keep = i < options.keep.size() && options.keep[i];
    if (keep || !allows_quantization(t)) {
      types[i] = t.dtype;
      continue;
    }
    DType type = preset.base;
    if (quantized) {
      if (!options.pure) type = mixture_type(type, t, category_of(t.name), preset.ftype, model, tied, options.has_imatrix, counters);
      type = fallback(type, t.shape[0]);
    }
    types[i] = type;
  }
  return types;
}

}  // namespace infer::quant
