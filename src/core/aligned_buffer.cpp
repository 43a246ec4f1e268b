#include "core/aligned_buffer.hpp"

#include <sys/mman.h>
#include <unistd.h>

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

namespace {
size_t mapped_length(size_t size) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (size + page - 1) / page * page;
}
}  // namespace

Result<AlignedBuffer> AlignedBuffer::zeros(size_t size) {
  if (size >= kLazyZerosBytes && size <= SIZE_MAX / 2) {
    void* p = mmap(nullptr, mapped_length(size), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return out_of_memory("could not map " + std::to_string(size) + " bytes");
    AlignedBuffer b;  // page-aligned, so 64-byte aligned
    b.data_ = static_cast<uint8_t*>(p);
    b.size_ = size;
    b.mapped_ = true;
    return b;
  }
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
      release_(std::exchange(other.release_, nullptr)),
      mapped_(std::exchange(other.mapped_, false)) {}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    release_ = std::exchange(other.release_, nullptr);
    mapped_ = std::exchange(other.mapped_, false);
  }
  return *this;
}

void AlignedBuffer::reset() noexcept {
  if (release_ && data_)
    release_(data_);
  else if (mapped_ && data_)
    munmap(data_, mapped_length(size_));
  else
    std::free(data_);
}

AlignedBuffer::~AlignedBuffer() { reset(); }

}  // namespace infer
