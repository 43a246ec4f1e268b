#include "format/model_file.hpp"

#include <cstring>

#include "format/gguf.hpp"

namespace infer {

ModelFile::ModelFile(Parts parts)
    : file_(std::move(parts.file)),
      version_(parts.version),
      alignment_(parts.alignment),
      data_offset_(parts.data_offset),
      metadata_(std::move(parts.metadata)),
      tensors_(std::move(parts.tensors)) {
  tensor_index_.reserve(tensors_.size());
  for (size_t i = 0; i < tensors_.size(); ++i) tensor_index_.emplace(tensors_[i].name, i);
}

const TensorInfo* ModelFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

Result<ModelFile> ModelFile::open(const std::string& path, MapMode mode) {
  auto file = MappedFile::open(path, mode);
  if (!file.ok()) return file.status();
  const auto bytes = file->bytes();
  if (bytes.size() >= 4 && std::memcmp(bytes.data(), "GGUF", 4) == 0) return gguf::read(std::move(file).value());
  if (bytes.size() >= 4 && std::memcmp(bytes.data(), "FUGG", 4) == 0)
    return unsupported(path + ": big-endian GGUF files are not supported");
  return malformed_file(path + ": not a model file this library reads (expected the GGUF magic \"GGUF\")");
}

}  // namespace infer
