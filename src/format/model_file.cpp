#include "format/model_file.hpp"

#include <cstring>
#include <filesystem>

#include "format/gguf.hpp"
#include "format/hf_directory.hpp"

namespace infer {

ModelFile::ModelFile(Parts parts)
    : file_(std::move(parts.file)),
      path_(parts.path.empty() ? file_->path() : std::move(parts.path)),
      format_(std::move(parts.format)),
      extra_files_(std::move(parts.extra_files)),
      owned_(std::move(parts.owned)),
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

uint64_t ModelFile::file_size() const noexcept {
  uint64_t total = file_->size();
  for (const auto& f : extra_files_) total += f->size();
  return total;
}

bool ModelFile::can_release(const void* p, uint64_t bytes) const noexcept {
  if (file_->can_release(p, bytes)) return true;
  for (const auto& f : extra_files_)
    if (f->can_release(p, bytes)) return true;
  return false;
}

void ModelFile::advise_unused(const void* p, uint64_t bytes) const noexcept {
  // MappedFile ignores ranges outside its own bytes, so each file can simply be told.
  file_->advise_unused(p, bytes);
  for (const auto& f : extra_files_) f->advise_unused(p, bytes);
}

Result<ModelFile> ModelFile::open(const std::string& path, MapMode mode) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return hf::open_directory(path, mode);
  auto file = MappedFile::open(path, mode);
  if (!file.ok()) return file.status();
  const auto bytes = file->bytes();
  if (bytes.size() >= 4 && std::memcmp(bytes.data(), "GGUF", 4) == 0) return gguf::read(std::move(file).value());
  if (bytes.size() >= 4 && std::memcmp(bytes.data(), "FUGG", 4) == 0)
    return unsupported(path + ": big-endian GGUF files are not supported");
  if (bytes.size() >= 9 && bytes[8] == '{')
    return unsupported(path + ": a safetensors file alone is not a model: open the Hugging Face model directory that "
                              "holds it (with its config.json and tokenizer files)");
  return malformed_file(path + ": not a model file this library reads (expected the GGUF magic \"GGUF\", or a Hugging Face "
                              "model directory)");
}

}  // namespace infer
