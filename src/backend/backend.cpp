#include "backend/backend.hpp"

#include <cassert>

#include "core/checked_math.hpp"

namespace infer {

Result<TensorView> Backend::activation(int slot, int64_t cols, int64_t rows) {
  if (slot < 0 || slot >= kMaxSlots) return invalid_argument("activation slot " + std::to_string(slot) + " out of range");
  if (cols <= 0 || rows < 0) return invalid_argument("activation shape out of range");
  const auto floats = checked_mul(static_cast<uint64_t>(cols), static_cast<uint64_t>(rows));
  const auto bytes = floats ? checked_mul(*floats, uint64_t{sizeof(float)}) : std::nullopt;
  if (!bytes) return invalid_argument("activation size overflows");
  if (slots_.size() < static_cast<size_t>(kMaxSlots)) slots_.resize(static_cast<size_t>(kMaxSlots));
  AlignedBuffer& buf = slots_[static_cast<size_t>(slot)];
  if (buf.size() < *bytes || buf.empty()) {
    auto grown = allocate(std::max<size_t>(*bytes, sizeof(float)));
    if (!grown.ok()) return grown.status();
    buf = std::move(grown).value();
  }
  return TensorView::contiguous(DType::f32, 2, {cols, rows, 1, 1}, buf.data(), device());
}

ThreadPool& cpu_pool(Backend& be) noexcept {
  assert(be.device() == Device::cpu);
  return static_cast<CpuBackend&>(be).pool();
}

}  // namespace infer
