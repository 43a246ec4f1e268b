#include "core/weight_arena.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <string>

namespace infer {
namespace {

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

}  // namespace

Result<uint8_t*> WeightArena::allocate(size_t bytes) {
  if (bytes > SIZE_MAX / 2) return out_of_memory("weight of " + std::to_string(bytes) + " bytes");
  const size_t need = round_up(std::max<size_t>(bytes, 1), AlignedBuffer::kAlignment);
  for (Slab& s : slabs_)
    if (s.memory.size() - s.used >= need) {
      uint8_t* p = s.memory.data() + s.used;
      s.used += need;
      used_ += bytes;
      return p;
    }
  const size_t grown = slabs_.empty() ? kHugePage : std::min(kMaxSlab, 2 * slabs_.back().memory.size());
  const size_t size = std::max(grown, round_up(need, kHugePage));
  void* p = std::aligned_alloc(kHugePage, size);
  if (!p) return out_of_memory("could not allocate " + std::to_string(size) + " bytes for weights");
#ifdef MADV_HUGEPAGE
  // A hint: without transparent huge pages (or with them off) the slab keeps 4 KiB pages.
  (void)::madvise(p, size, MADV_HUGEPAGE);
#endif
  slabs_.push_back({AlignedBuffer::adopt(p, size, [](void* q) noexcept { std::free(q); }), need});
  used_ += bytes;
  reserved_ += size;
  return static_cast<uint8_t*>(p);
}

}  // namespace infer
