// Memory for the weights a backend keeps in its own layout: slabs aligned to 2 MiB and advised
// for transparent huge pages (madvise MADV_HUGEPAGE, which the kernel honours when
// /sys/kernel/mm/transparent_hugepage/enabled is "madvise" or "always"), carved into 64-byte
// aligned pieces that live as long as the arena.
//
// Why: a decode step streams every weight once, and on 4 KiB pages it pays a page walk per 4 KiB
// and a hardware prefetcher that stops at every page boundary. On a 2-core Intel Xeon VM the
// TinyLlama-shape Q8_0 decode read from the file's mapping ran at 15.1 tokens/s, from 4 KiB
// anonymous pages at 21.2, from huge pages at 23.6 (docs/benchmarks.md).
//
// Slabs grow from 2 MiB to 64 MiB (a small model takes a small slab), each piece goes to the
// first slab with room for it, and a piece larger than a slab gets a slab of its own: the pages of
// a slab that no piece has touched are never faulted in, so what stays resident beyond the pieces
// is at most the huge page each slab's last piece ends in.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/aligned_buffer.hpp"
#include "infer/status.hpp"

namespace infer {

class WeightArena {
 public:
  static constexpr size_t kHugePage = size_t{2} << 20;
  static constexpr size_t kMaxSlab = size_t{64} << 20;

  // `bytes` bytes (uninitialized, 64-byte aligned); out_of_memory when no slab can be had.
  Result<uint8_t*> allocate(size_t bytes);
  // Bytes handed out so far, and bytes of the slabs reserved for them.
  uint64_t used_bytes() const noexcept { return used_; }
  uint64_t reserved_bytes() const noexcept { return reserved_; }

 private:
  struct Slab {
    AlignedBuffer memory;
    size_t used = 0;
  };
  std::vector<Slab> slabs_;
  uint64_t used_ = 0;
  uint64_t reserved_ = 0;
};

}  // namespace infer
