// An owning, 64-byte aligned byte buffer (cache-line and AVX-512 aligned). Move-only. A buffer
// may also own memory of another allocator (adopt(): device or pinned memory of a GPU backend),
// freed by the function it came with.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "infer/status.hpp"

namespace infer {

class AlignedBuffer {
 public:
  static constexpr size_t kAlignment = 64;

  AlignedBuffer() = default;
  // Allocates `size` bytes (contents uninitialized); out_of_memory instead of throwing.
  static Result<AlignedBuffer> allocate(size_t size);
  // As allocate(), zero-filled. From kLazyZerosBytes up, fresh pages of the OS (mmap): zero
  // without a pass over them, each page backed when first touched. (A 256 MiB KV pool took
  // 0.3 s to clear, most of an engine's start on a small model.)
  static constexpr size_t kLazyZerosBytes = size_t{1} << 20;
  static Result<AlignedBuffer> zeros(size_t size);
  // Takes ownership of `size` bytes at `data` (64-byte aligned), freed by release(data).
  using Release = void (*)(void*) noexcept;
  static AlignedBuffer adopt(void* data, size_t size, Release release) noexcept;

  AlignedBuffer(AlignedBuffer&& other) noexcept;
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer();

  uint8_t* data() noexcept { return data_; }
  const uint8_t* data() const noexcept { return data_; }
  size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  template <class T>
  T* as() noexcept { return reinterpret_cast<T*>(data_); }
  template <class T>
  const T* as() const noexcept { return reinterpret_cast<const T*>(data_); }
  std::span<uint8_t> bytes() noexcept { return {data_, size_}; }
  std::span<const uint8_t> bytes() const noexcept { return {data_, size_}; }

 private:
  void reset() noexcept;

  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  Release release_ = nullptr;  // null: std::free, or munmap where mapped_
  bool mapped_ = false;
};

}  // namespace infer
