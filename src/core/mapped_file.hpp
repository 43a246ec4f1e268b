// A read-only view of a whole file: memory-mapped when possible, otherwise read into an aligned
// buffer (the fallback path: file systems without mmap, or INFER_NO_MMAP=1, or asked for).
// The bytes stay valid and unchanged for the object's lifetime. Move-only.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "core/aligned_buffer.hpp"
#include "infer/status.hpp"

namespace infer {

enum class MapMode {
  automatic,  // mmap, falling back to reading when mmap fails; INFER_NO_MMAP=1 forces reading
  mmap_only,  // mmap or fail
  read,       // always read into memory
};

class MappedFile {
 public:
  MappedFile() = default;
  static Result<MappedFile> open(const std::string& path, MapMode mode = MapMode::automatic);
  // A copy of `bytes` held in memory, as if read from a file called `name` (tests, fuzzers).
  static Result<MappedFile> from_bytes(std::span<const uint8_t> bytes, std::string name = "<memory>");

  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const uint8_t* data() const noexcept { return data_; }
  uint64_t size() const noexcept { return size_; }
  std::span<const uint8_t> bytes() const noexcept { return {data_, static_cast<size_t>(size_)}; }
  const std::string& path() const noexcept { return path_; }
  bool is_mapped() const noexcept { return mapped_; }
  // Tells the kernel that the mapped bytes [p, p + bytes) will not be read for a while (a weight
  // repacked elsewhere at load): the whole pages inside leave the process's resident memory and
  // are read again from the file if touched. A no-op when the file is not mapped (the bytes live
  // in memory that must keep them) or the range is not inside the file.
  void advise_unused(const void* p, uint64_t bytes) const noexcept;
  // True when advise_unused(p, bytes) releases memory: the file is mapped and holds the range.
  bool can_release(const void* p, uint64_t bytes) const noexcept;

 private:
  void release() noexcept;

  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  bool mapped_ = false;
  AlignedBuffer buffer_;  // holds the bytes when not mapped
  std::string path_;
};

}  // namespace infer
