// The online transforms of a compressed-tensors checkpoint (config.json's
// quantization_config.transform_config, as llm-compressor's QuIP and SpinQuant modifiers write it):
// libinfer runs the online Hadamard rotations of linear layers' inputs (TensorInfo::input_rotation,
// ops::hadamard). The offline parts (location weight_input / weight_output) are already folded
// into the stored weights and need nothing.
//
// A scheme of type "hadamard" (Sylvester's matrix, normalized by 1/sqrt(size): symmetric, so its
// inverse is itself) with an "input" location rotates each targeted module's input, in blocks of
// head_dim columns when set and else all of them (a power of two up to 2^15 dividing the input).
// Targets and ignores follow compressed-tensors: the class "Linear" (every matrix but the
// embeddings), an exact module name, or "re:" and a regular expression matched from the start.
// Refused by name: other transform types (random-hadamard's stored random matrices, dense
// matrix-multiply), randomized permutations, online "output", "q_attn" and "k_cache" locations,
// two input rotations of one module, and a transform's own tensor ("<module>.<scheme>_input.weight",
// kept beside the weights) that is not the Sylvester matrix its scheme names.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "format/json.hpp"
#include "infer/status.hpp"

namespace infer::safetensors {
struct Tensor;
}

namespace infer::hf {

class InputRotations {
 public:
  // quantization_config.transform_config of config.json (`where` names the file); none: empty.
  static Result<InputRotations> parse(const json::Json& config, const std::string& where);

  bool empty() const noexcept { return schemes_.empty(); }
  // The input rotation of the Hugging Face module `module` ("model.layers.0.mlp.down_proj"), a
  // matrix of n input columns: its block size, or 0 when no online input transform targets it.
  Result<int32_t> of(const std::string& module, int64_t n) const;
  // A transform's own tensor ("<module>.<scheme>_<location>.weight" or ".perm" of a scheme here)?
  bool is_transform_tensor(const std::string& name) const;
  // Checks a transform tensor: an online input transform's matrix, float, of its scheme's size
  // (`module_rotation`: what of() gave its module), the Sylvester matrix with entries ±c.
  Status check_tensor(const safetensors::Tensor& t, DType dtype, int32_t module_rotation, const std::string& where) const;
  // The module a transform tensor belongs to ("model.layers.0.mlp.down_proj").
  static std::string module_of(const std::string& tensor_name);

 private:
  struct Scheme {
    std::string name;
    int64_t head_dim = 0;  // 0: the whole input
    std::vector<std::string> targets, ignore;
  };
  std::vector<Scheme> schemes_;           // those with an online input location
  std::vector<std::string> scheme_names_;  // every scheme's name
};

}  // namespace infer::hf
