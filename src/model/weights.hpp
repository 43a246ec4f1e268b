// Looking up and checking a model's tensors against its hyper-parameters, with errors that name
// the tensor and both shapes: "blk.3.attn_k.weight: expected [4096, 1024], found [4096, 4096]".
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "core/aligned_buffer.hpp"
#include "format/model_file.hpp"
#include "infer/status.hpp"

namespace infer {

class WeightBinder {
 public:
  explicit WeightBinder(const ModelFile& file) : file_(file) {}

  // The tensor `name` with exactly the given shape (ggml order) and a type the CPU kernels
  // compute with; a clear error otherwise.
  Result<const TensorInfo*> require(const std::string& name, std::initializer_list<int64_t> shape) const;
  // As require(), or nullptr (not an error) when the file has no such tensor.
  Result<const TensorInfo*> optional(const std::string& name, std::initializer_list<int64_t> shape) const;
  // A small tensor (norm weights, RoPE factors) converted to F32, for the model to keep.
  Result<AlignedBuffer> load_f32(const TensorInfo& t) const;

 private:
  const ModelFile& file_;
};

// Metadata lookups that fail with a message naming the file and the key.
Result<int64_t> require_int(const ModelFile& f, const std::string& key);
int64_t optional_int(const ModelFile& f, const std::string& key, int64_t fallback);
Result<double> optional_number(const ModelFile& f, const std::string& key, double fallback);

}  // namespace infer
