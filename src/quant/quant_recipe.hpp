// Which type each tensor of a model gets when it is quantized to a llama.cpp file type ("preset"):
// llama-quantize's rules (src/llama-quant.cpp, with or without an importance matrix), so that
// infer-quantize writes the same tensor types in the same order.
//
//   - only 2-D and 3-D tensors whose name ends in "weight" are converted, never norms, MoE gates,
//     position or token-type embeddings and a list of small special tensors; the rest are copied;
//   - F32 / F16 / BF16 presets convert every such tensor to that type;
//   - a quantized preset starts from its base type; unless `pure`, the mixture rules then move
//     chosen tensors up (output / tied token embedding to Q6_K, attn_v and ffn_down of some layers
//     to more bits, ...);
//   - a K-quant whose row length is not a multiple of 256 falls back to a 32-block type
//     (Q2_K, Q3_K -> Q4_0; Q4_K -> Q5_0; Q5_K -> Q5_1; Q6_K -> Q8_0), and to F16 when even
//     that does not divide the row.
//
// Tensors are visited in llama.cpp's order (tensor_order): the per-layer counters that some
// rules read advance in that order.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.hpp"

namespace infer::quant {

// A llama-quantize file type: its name, llama.cpp's llama_ftype value (general.file_type) and the
// tensor type it starts from.
struct Preset {
  const char* name;
  int ftype;
  DType base;
};

// The presets by llama-quantize's names (Q4_K_M, ..., and its aliases Q3_K, Q4_K, Q5_K for the
// _M variants), case-insensitive; nullopt for a name infer-quantize does not write.
std::optional<Preset> find_preset(std::string_view name);
std::span<const Preset> all_presets();

// What the rules read from the model's metadata (llama.cpp's hparams; infer-quantize fills it).
struct ModelFacts {
  std::string arch;    // general.architecture
  int n_layer = 0;     // <arch>.block_count
  int n_gqa = 0;       // head_count / head_count_kv of layer 0 (0 when head_count_kv is 0)
  int n_expert = 0;    // <arch>.expert_count
  bool is_70b = false; // llama.cpp's LLM_TYPE_70B (80 layers of llama with GQA, qwen2, deci, olmo)
};

struct TensorShape {
  std::string name;
  DType dtype;
  std::array<int64_t, 4> shape;  // ggml order, unused dimensions 1
};

// ggml_n_dims: the index of the last dimension above 1, plus one (at least 1).
int significant_dims(const std::array<int64_t, 4>& shape);

// llama.cpp's tensor order: by layer number (tensors outside blk.N. first), then by name.
std::vector<size_t> tensor_order(std::span<const TensorShape> tensors);

struct RecipeOptions {
  bool pure = false;  // no mixture rules: every converted tensor gets the base type (or its fallback)
  // Tensors to leave in their input type (infer-quantize --keep); they skip the rules and do not
  // advance the layer counters, as llama-quantize's --tensor-type overrides do not.
  std::vector<bool> keep;
  // An importance matrix is given (llama-quantize --imatrix): Q4_0 / Q5_0 then move the first
  // eighth of the ffn_down layers to Q4_1 / Q5_1.
  bool has_imatrix = false;
};

// The target type of every tensor (index i of the result belongs to tensors[i]); `tensors` in
// tensor_order. A result equal to the input type means the tensor is copied unchanged.
std::vector<DType> choose_types(const Preset& preset, const ModelFacts& model, std::span<const TensorShape> tensors,
                                const RecipeOptions& options);

}  // namespace infer::quant
