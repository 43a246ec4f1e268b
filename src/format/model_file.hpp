// A model file opened for reading: its metadata and a table of tensors whose views point straight
// into the mapped file (zero-copy). Built by the GGUF reader; later by the safetensors reader.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

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

  int64_t numel() const { return shape[0] * shape[1] * shape[2] * shape[3]; }
};

class ModelFile {
 public:
  // Opens a model file, recognising its format by its first bytes (GGUF today).
  static Result<ModelFile> open(const std::string& path, MapMode mode = MapMode::automatic);

  const std::string& path() const noexcept { return file_->path(); }
  const char* format() const noexcept { return "gguf"; }
  uint32_t version() const noexcept { return version_; }
  uint64_t alignment() const noexcept { return alignment_; }
  uint64_t data_offset() const noexcept { return data_offset_; }  // start of the data section
  uint64_t file_size() const noexcept { return file_->size(); }
  bool is_mapped() const noexcept { return file_->is_mapped(); }
  const MappedFile& file() const noexcept { return *file_; }

  const Metadata& metadata() const noexcept { return metadata_; }
  std::span<const TensorInfo> tensors() const noexcept { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;

  // Only the readers build ModelFiles.
  struct Parts {
    std::shared_ptr<const MappedFile> file;
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
  uint32_t version_ = 0;
  uint64_t alignment_ = 0;
  uint64_t data_offset_ = 0;
  Metadata metadata_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string_view, size_t> tensor_index_;  // views into tensors_[i].name
};

}  // namespace infer
