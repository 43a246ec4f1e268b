// Looking up and checking a model's tensors against its hyper-parameters, with errors that name
// the tensor and both shapes: "blk.3.attn_k.weight: expected [4096, 1024], found [4096, 4096]".
#pragma once

#include <deque>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "core/aligned_buffer.hpp"
#include "format/model_file.hpp"
#include "infer/status.hpp"

namespace infer {

// A weight matrix converted at load time (LoadOptions::weight_type); the model owns it.
struct ConvertedTensor {
  TensorInfo info;     // the file's tensor with the new type, size and a view of `data`
  AlignedBuffer data;
};

class WeightBinder {
 public:
  explicit WeightBinder(const ModelFile& file) : file_(file) {}
  // With a weight type (Q8_0, Q4_0, I8_ROW, F8E4M3_ROW / _TENSOR, I4_G128): matrix() quantizes float
  // (F32, F16, BF16) matrices whose rows are whole blocks to it, with ggml's reference quantizers
  // (what llama-quantize --pure writes; I8_ROW: quant/int8_rows.hpp; FP8: quant/fp8_rows.hpp,
  // F8E4M3_TENSOR with max|W| / 448 over the matrix; INT4: quant/int4_groups.hpp), into `store`.
  // Other matrices keep their type.
  // `progress`, when set, hears the fraction of the file's tensor bytes bound so far as
  // matrices are bound (and converted).
  WeightBinder(const ModelFile& file, std::optional<DType> weight_type, std::deque<ConvertedTensor>& store,
               std::function<void(double)> progress = {});

  // A 2-D weight matrix: as require() / optional(), converted to the weight type when one is set.
  // A compressed-tensors INT8 / FP8 weight (I8 / F8_E4M3 codes with "<name>_scale") becomes
  // I8_ROW / I8_W8A16 / F8E4M3_ROW / F8E4M3_TENSOR with its codes and scales exactly (W8A16 group
  // scales [rows, groups]: I8_G32 / _G64 / _G128), and a pack-quantized INT4 one (I4_PACKED with
  // "<name>_scale" and "<name>_zero_point") I4_G32 / _G64 / _G128; the weight type leaves them.
  Result<const TensorInfo*> matrix(const std::string& name, std::initializer_list<int64_t> shape);
  Result<const TensorInfo*> optional_matrix(const std::string& name, std::initializer_list<int64_t> shape);

  // The tensor `name` with exactly the given shape (ggml order) and a type the CPU kernels
  // compute with; a clear error otherwise.
  Result<const TensorInfo*> require(const std::string& name, std::initializer_list<int64_t> shape) const;
  // As require(), or nullptr (not an error) when the file has no such tensor.
  Result<const TensorInfo*> optional(const std::string& name, std::initializer_list<int64_t> shape) const;
  // A small tensor (norm weights, RoPE factors) converted to F32, for the model to keep.
  Result<AlignedBuffer> load_f32(const TensorInfo& t) const;
  // I8_ROW conversions rotate each matrix's input columns (LoadOptions::rotate_int8); on by default.
  void set_rotate_int8(bool on) { rotate_int8_ = on; }

 private:
  // The tensor `name` with exactly the given shape, or nullptr; its type unchecked.
  Result<const TensorInfo*> find(const std::string& name, std::initializer_list<int64_t> shape) const;
  Result<const TensorInfo*> convert(const TensorInfo* t);
  Result<const TensorInfo*> from_checkpoint(const TensorInfo* t);
  Result<const TensorInfo*> from_packed_int4(const TensorInfo* t);
  Result<const TensorInfo*> from_int8_groups(const TensorInfo* t, const TensorInfo* scale);

  const ModelFile& file_;
  std::optional<DType> weight_type_;
  std::deque<ConvertedTensor>* store_ = nullptr;
  std::function<void(double)> progress_;
  uint64_t total_bytes_ = 0, bound_bytes_ = 0;
  bool rotate_int8_ = true;
};

// Metadata lookups that fail with a message naming the file and the key.
Result<int64_t> require_int(const ModelFile& f, const std::string& key);
int64_t optional_int(const ModelFile& f, const std::string& key, int64_t fallback);
Result<double> optional_number(const ModelFile& f, const std::string& key, double fallback);

}  // namespace infer
