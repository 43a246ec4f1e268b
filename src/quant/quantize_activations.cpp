#include "quant/quantize_activations.hpp"

#include <cstring>

#include "core/isa_variants.hpp"

namespace infer {

#define INFER_DECLARE_CONVERTERS(ns) \
  namespace ns { \
  void quantize_activations_q8_0(const float* x, void* dst, int64_t n) noexcept; \
  void quantize_activations_q8_1(const float* x, void* dst, int64_t n) noexcept; \
  void quantize_activations_q8_k(const float* x, void* dst, int64_t n) noexcept; \
  void round_activations_f16(const float* x, void* dst, int64_t n) noexcept; \
  void round_activations_bf16(const float* x, void* dst, int64_t n) noexcept; \
  }
INFER_DECLARE_CONVERTERS(isa_ref)
INFER_DECLARE_CONVERTERS(isa_avx2)
INFER_DECLARE_CONVERTERS(isa_avx512)
#undef INFER_DECLARE_CONVERTERS

void quantize_activations_q8_0(const float* x, void* dst, int64_t n) noexcept { INFER_ISA_DISPATCH(quantize_activations_q8_0, x, dst, n); }
void quantize_activations_q8_1(const float* x, void* dst, int64_t n) noexcept { INFER_ISA_DISPATCH(quantize_activations_q8_1, x, dst, n); }
void quantize_activations_q8_k(const float* x, void* dst, int64_t n) noexcept { INFER_ISA_DISPATCH(quantize_activations_q8_k, x, dst, n); }
void round_activations_f16(const float* x, void* dst, int64_t n) noexcept { INFER_ISA_DISPATCH(round_activations_f16, x, dst, n); }
void round_activations_bf16(const float* x, void* dst, int64_t n) noexcept { INFER_ISA_DISPATCH(round_activations_bf16, x, dst, n); }

void copy_activations_f32(const float* x, void* dst, int64_t n) noexcept {
  std::memcpy(dst, x, static_cast<size_t>(n) * sizeof(float));
}

}  // namespace infer
