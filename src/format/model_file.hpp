// A model opened for reading: its metadata and a table of tensors whose views point straight
// into the mapped file (zero-copy). Built by the GGUF reader from one file, or by the Hugging Face
// directory reader (format/hf_directory.hpp) from a directory of safetensors shards, whose
// config and tokenizer files it translates to the GGUF keys: there the ModelFile keeps every
// shard mapped, and owns the few tensors it had to rewrite (Llama's Q/K rows in GGUF's rotary
// order, Gemma's norms with their +1).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/aligned_buffer.hpp"
#include "core/mapped_file.hpp"
#include "core/tensor.hpp"
#include "format/metadata.hpp"
#include "infer/status.hpp"

namespace infer {

struct TensorInfo {
  std::string name;
  DType dtype = DType::f32;
  int n_dims = 0;
  std::array<int64_t, kMaxDims> shape{1, 1, 1, 1};  // ggml order: shape[0] innermost
  uint64_t offset = 0;  // from the start of the data section
  uint64_t nbytes = 0;
  TensorView view;      // into the mapped file
  // A linear layer's online input rotation: the layer computes y = W (H x), H the orthonormal
  // Walsh-Hadamard matrix on blocks of this many input columns (a power of two; ops::hadamard),
  // its weight stored as W H. From a compressed-tensors transform_config (format/hf_directory.cpp),
  // or libinfer's INT8 W8A8 at load (model/weights.cpp); 0: none.
  int32_t input_rotation = 0;

  int64_t numel() const { return shape[0] * shape[1] * shape[2] * shape[3]; }
};

class ModelFile {
 public:
  // Opens a model file, recognising its format by its first bytes (GGUF), or a Hugging Face
  // model directory (config.json, safetensors, tokenizer files) when `path` is a directory.
  static Result<ModelFile> open(const std::string& path, MapMode mode = MapMode::automatic);

  const std::string& path() const noexcept { return path_; }
  // "gguf", or "safetensors" for a Hugging Face directory.
  const char* format() const noexcept { return format_.c_str(); }
  uint32_t version() const noexcept { return version_; }
  uint64_t alignment() const noexcept { return alignment_; }
  // Start of the data section (of the first shard for a directory).
  uint64_t data_offset() const noexcept { return data_offset_; }
  uint64_t file_size() const noexcept;  // all shards together
  bool is_mapped() const noexcept { return file_->is_mapped(); }
  const MappedFile& file() const noexcept { return *file_; }  // the (first) file
  size_t file_count() const noexcept { return 1 + extra_files_.size(); }
  // MappedFile::advise_unused on whichever file holds [p, p + bytes); a no-op for owned tensors.
  void advise_unused(const void* p, uint64_t bytes) const noexcept;
  // True when advise_unused(p, bytes) releases memory: a mapped file holds the range.
  bool can_release(const void* p, uint64_t bytes) const noexcept;

  const Metadata& metadata() const noexcept { return metadata_; }
  std::span<const TensorInfo> tensors() const noexcept { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;

  // Only the readers build ModelFiles.
  struct Parts {
    std::shared_ptr<const MappedFile> file;
    std::string path;    // empty: the file's path
    std::string format = "gguf";
    std::vector<std::shared_ptr<const MappedFile>> extra_files;  // further shards, kept mapped
    std::vector<AlignedBuffer> owned;  // tensors rewritten at open (views point into these)
    uint32_t version = 0;
    uint64_t alignment = 0;
    uint64_t data_offset = 0;
    Metadata metadata;
    std::vector<TensorInfo> tensors;
  };
  explicit ModelFile(Parts parts);
  ModelFile(ModelFile&&) noexcept = default;
  ModelFile& operator=(ModelFile&&) noexcept = default;
  ModelFile(const ModelFile&) = delete;  // the tensor index points into this object's names
  ModelFile& operator=(const ModelFile&) = delete;

 private:
  std::shared_ptr<const MappedFile> file_;
  std::string path_;
  std::string format_;
  std::vector<std::shared_ptr<const MappedFile>> extra_files_;
  std::vector<AlignedBuffer> owned_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 0;
  uint64_t data_offset_ = 0;
  Metadata metadata_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string_view, size_t> tensor_index_;  // views into tensors_[i].name
};

}  // namespace infer
