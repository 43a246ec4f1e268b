// GGUF, the model-file format of the llama.cpp ecosystem: reader and writer.
//
// File layout (all little-endian; versions 2 and 3 share it):
//
//   "GGUF" u32:version u64:n_tensors u64:n_kv
//   n_kv      × { string:key u32:value_type value }
//   n_tensors × { string:name u32:n_dims u64:dims[n_dims] u32:dtype u64:offset }
//   padding to `general.alignment` (default 32)
//   data section: each tensor at its offset (a multiple of the alignment) from the section start
//
//   string = u64:length bytes[length] (no terminator)
//   value  = scalar | string | array { u32:elem_type u64:count elements }
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/mapped_file.hpp"
#include "format/model_file.hpp"

namespace infer::gguf {

inline constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as little-endian u32
inline constexpr uint32_t kDefaultAlignment = 32;
inline constexpr const char* kAlignmentKey = "general.alignment";
inline constexpr uint64_t kMaxKeyLength = 65535;   // the spec's limit
inline constexpr uint64_t kMaxTensorNameLength = 63;  // ggml's GGML_MAX_NAME less the NUL
inline constexpr int kMaxArrayDepth = 16;           // nested arrays deeper than this are refused

// Parses a whole GGUF file. Every count, length, dimension product, size and offset is checked
// against the file size with overflow-safe arithmetic before it is used; any violation is a
// malformed_file (or unsupported) status naming the problem and the byte offset.
Result<ModelFile> read(MappedFile file);
Result<ModelFile> read_file(const std::string& path, MapMode mode = MapMode::automatic);

// Builds a GGUF file (version 3). Tensor data is borrowed until write() returns.
class Writer {
 public:
  Metadata& metadata() noexcept { return metadata_; }
  const Metadata& metadata() const noexcept { return metadata_; }

  // Adds a tensor; shape in ggml order (shape[0] innermost). Checks the name (non-empty, unique,
  // at most 63 bytes), the shape (1..4 dims, non-negative, row length a multiple of the block
  // size) and that data.size() is exactly the tensor's byte size.
  Status add_tensor(std::string name, DType dtype, std::span<const int64_t> shape,
                    std::span<const uint8_t> data);

  // Adds a tensor whose bytes are produced while the file is written, so that only one such
  // tensor is held in memory at a time: write() / write_to_memory() call fill once per write, in
  // tensor order, with a buffer of exactly the tensor's byte size; an error it returns ends the
  // write with that status (write() then leaves no file). Checks as the other add_tensor.
  using Fill = std::function<Status(std::span<uint8_t> dst)>;
  Status add_tensor(std::string name, DType dtype, std::span<const int64_t> shape, Fill fill);

  // Writes the file atomically (to "<path>.tmp", then renamed).
  Status write(const std::string& path) const;
  // The same bytes, in memory.
  Result<std::vector<uint8_t>> write_to_memory() const;

 private:
  struct PendingTensor {
    std::string name;
    DType dtype;
    int n_dims;
    std::array<int64_t, kMaxDims> shape;
    uint64_t nbytes;
    std::span<const uint8_t> data;  // when fill is empty
    Fill fill;
  };
  // The checked tensor entry, without its data.
  Result<PendingTensor> check_tensor(std::string name, DType dtype, std::span<const int64_t> shape) const;
  template <class Sink>
  Status emit(Sink& sink) const;
  Result<uint64_t> alignment() const;

  Metadata metadata_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace infer::gguf
