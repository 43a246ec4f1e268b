#include "backend/backend.hpp"

#include <algorithm>
#include <cassert>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "core/checked_math.hpp"
#include "core/thread_pool.hpp"
#include "kernels/cpu/dtype_traits.hpp"

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

Result<float*> Backend::host_output(size_t floats) {
  const auto bytes = checked_mul(static_cast<uint64_t>(std::max<size_t>(floats, 1)), uint64_t{sizeof(float)});
  if (!bytes) return invalid_argument("output size overflows");
  if (output_.size() < *bytes) {
    auto grown = allocate_host(static_cast<size_t>(*bytes));
    if (!grown.ok()) return grown.status();
    output_ = std::move(grown).value();
  }
  return output_.as<float>();
}

CpuBackend::CpuBackend(ThreadPool& pool) : pool_(pool) {
  const char* env = std::getenv("INFER_REPACK");
  repack_ = !(env && std::string_view(env) == "0");
}

Result<TensorView> CpuBackend::prepare_weight(const TensorView& w, WeightSource source) {
  if (!repack_ || w.n_dims != 2 || w.layout != Layout::rows) return w;
  const QGemmKernel* k = load_packing_for(w);
  // A plain copy needs a source that is released, and rows that are contiguous.
  if (!k && (source == WeightSource::kept || dtype_row_bytes(w.dtype, static_cast<uint64_t>(w.shape[0])) != w.row_bytes()))
    return w;
  const uint64_t bytes = k ? static_cast<uint64_t>(packed_weight_bytes(*k, w)) : w.nbytes();
  auto dst = weights_.allocate(static_cast<size_t>(bytes));
  if (!dst.ok()) return dst.status().with_context((k ? "repacking a " : "copying a ") + shape_string(w) + " weight");
  TensorView prepared = w;
  prepared.data = *dst;
  if (k) {
    const int64_t groups = (w.shape[1] + k->group_rows - 1) / k->group_rows;
    pool_.parallel_for(static_cast<size_t>(groups), [&](size_t begin, size_t end) {
      pack_weight_groups(*k, w, static_cast<int64_t>(begin), static_cast<int64_t>(end), *dst);
    });
    prepared.layout = Layout::cpu_packed;
  } else {
    // In pieces of 1 MiB over the threads, which also share the page faults.
    constexpr uint64_t kPiece = uint64_t{1} << 20;
    const auto* src = static_cast<const uint8_t*>(w.data);
    pool_.parallel_for(static_cast<size_t>((bytes + kPiece - 1) / kPiece), [&](size_t begin, size_t end) {
      const uint64_t b = begin * kPiece, e = std::min<uint64_t>(bytes, end * kPiece);
      std::memcpy(*dst + b, src + b, static_cast<size_t>(e - b));
    });
  }
  return prepared;
}

ThreadPool& cpu_pool(Backend& be) noexcept {
  assert(be.device() == Device::cpu);
  return static_cast<CpuBackend&>(be).pool();
}

#if !INFER_WITH_CUDA
int cuda_devices() noexcept { return 0; }

Result<std::unique_ptr<Backend>> make_cuda_backend(int) {
  return unsupported("this build of libinfer has no CUDA backend (configure it with -DINFER_CUDA=ON)");
}
#endif

}  // namespace infer
