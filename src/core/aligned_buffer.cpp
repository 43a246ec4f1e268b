#include "core/aligned_buffer.hpp"

#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

namespace infer {

Result<AlignedBuffer> AlignedBuffer::allocate(size_t size) {
  AlignedBuffer b;
  if (size == 0) return b;
  // aligned_alloc needs a multiple of the alignment; guard the round-up against overflow.
  if (size > SIZE_MAX - kAlignment) return out_of_memory("buffer of " + std::to_string(size) + " bytes");
  size_t rounded = (size + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded);
  if (!p) return out_of_memory("could not allocate " + std::to_string(size) + " bytes");
  b.data_ = static_cast<uint8_t*>(p);
  b.size_ = size;
  return b;
}

Result<AlignedBuffer> AlignedBuffer::zeros(size_t size) {
  auto b = allocate(size);
  if (b.ok() && size) std::memset(b->data(), 0, size);
  return b;
}

AlignedBuffer AlignedBuffer::adopt(void* data, size_t size, Release release) noexcept {
  AlignedBuffer b;
  b.data_ = static_cast<uint8_t*>(data);
  b.size_ = size;
  b.release_ = release;
  return b;
}

AlignedBuffer::AlignedBuffer(AlignedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      release_(std::exchange(other.release_, nullptr)) {}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    release_ = std::exchange(other.release_, nullptr);
  }
  return *this;
}

void AlignedBuffer::reset() noexcept {
  if (release_ && data_)
    release_(data_);
  else
    std::free(data_);
}

AlignedBuffer::~AlignedBuffer() { reset(); }

}  // namespace infer
