// A thread's scratch buffer for the per-ISA kernel files (*_avx2.cpp, *_avxvnni.cpp, *_avx512.cpp).
//
// Code those files instantiate with external linkage is compiled with their ISA's flags, and the
// linker keeps one copy of each such function for the whole program: std::vector<float>'s growth,
// instantiated in an AVX-512 file, ended the AVX2 path of an AVX2-only CPU with SIGILL. So the
// buffer is plain ::operator new (which still throws std::bad_alloc) in an anonymous namespace:
// each file keeps its own copy. tests/integration/isa_symbols.py checks the objects for the rest.
#pragma once

#include <cstddef>
#include <new>
#include <type_traits>

namespace infer::isa_scratch {
namespace {

template <class T>
class Buffer {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>);
  static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__);

 public:
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { ::operator delete(data_); }

  // At least n elements; their values are whatever the last use left (or uninitialized).
  T* at_least(size_t n) {
    if (count_ < n) {
      void* grown = ::operator new(n * sizeof(T));  // throws std::bad_alloc; the old buffer stays
      ::operator delete(data_);
      data_ = static_cast<T*>(grown);
      count_ = n;
    }
    return data_;
  }

 private:
  T* data_ = nullptr;
  size_t count_ = 0;
};

}  // namespace
}  // namespace infer::isa_scratch
