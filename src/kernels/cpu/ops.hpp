// Element-wise and normalization kernels of the transformer block, compiled once per ISA
// (core/isa_variants.hpp; every variant gives the same bits): mostly plain scalar code the
// compiler vectorizes, as they are a small share of the time next to the matmuls; rms_norm_rows
// (whose single-row float64 chain the compiler cannot vectorize) has AVX2 / AVX-512 code. Their
// fixed loop order keeps every row's result independent of the other rows in the batch.
#pragma once

#include <cstdint>

namespace infer {

// y = x / sqrt(mean(x^2) + eps) * w, over n elements (sum accumulated in double, as llama.cpp's
// ggml_compute_forward_rms_norm does, then scaled in float).
void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) noexcept;
// rms_norm of `count` rows at once (row k: x[k] to y[k], n elements each, the same w), each row's
// result bit-identical to rms_norm's: the AVX2 and AVX-512 variants run up to 32 rows' float64
// chains side by side, as the single row's chain is bound by the add's latency.
void rms_norm_rows(const float* const* x, float* const* y, int count, const float* w, int64_t n, float eps) noexcept;

// y = silu(g) * u, element-wise, silu(x) = x / (1 + exp(-x)) computed as llama.cpp's AVX2 build
// computes it: elements in groups of 8 with ggml's vector exp (exp_ggml), the tail with expf.
void silu_mul(const float* g, const float* u, float* y, int64_t n) noexcept;

// y = gelu(g) * u, element-wise, with GELU's tanh approximation evaluated as ggml's CPU backend
// does: g rounded to f16, gelu(that value) in float rounded to f16 (its lookup table), g <= -10
// giving 0 and g >= 10 giving g itself. gelu_mul runs the variant for active_isa(); the AVX2 one
// (F16C conversions, a gather from the table) is bit-identical to the scalar reference.
void gelu_mul(const float* g, const float* u, float* y, int64_t n) noexcept;
void gelu_mul_ref(const float* g, const float* u, float* y, int64_t n) noexcept;
void gelu_mul_avx2(const float* g, const float* u, float* y, int64_t n) noexcept;
// The table both read: 65537 entries, entry h = f16(gelu_tanh(h as f16)), the last one 0.
const uint16_t* gelu_f16_table() noexcept;
// The tanh-approximated GELU in float: 0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x^2))).
float gelu_tanh(float x) noexcept;

// x *= s.
void scale_inplace(float* x, float s, int64_t n) noexcept;

// x[b .. b + n) <- H_n x[b .. b + n) for each block of n of the `len` elements: the butterflies of
// kernels/cpu/hadamard.hpp's hadamard_blocks (its scalar twin), the same operations on each element
// in the same stage order, so every variant gives its bits. The AVX2 / AVX-512 ones do the stages
// within a vector (s < 8 or 16) by permutes in registers, the others a vector of pairs at a time.
// n a power of two, len a multiple of n.
void hadamard_inplace(float* x, int64_t len, int n) noexcept;

// x += y.
void add_inplace(float* x, const float* y, int64_t n) noexcept;

// In-place softmax over n values (max-subtracted; the sum accumulated in double).
void softmax_inplace(float* x, int64_t n) noexcept;

// Rotary position embedding tables for one position: cos/sin of each of the n_rot/2 pairs,
// computed as llama.cpp does (theta = pos * freq_scale / factor_i * base^(-2i/n_rot), the power
// built by repeated float multiplication).
struct RopeParams {
  int n_rot = 0;
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;             // 1 / linear scaling factor
  const float* freq_factors = nullptr; // n_rot/2 per-pair divisors (Llama 3 scaling), or null
};
void rope_cache(const RopeParams& p, int32_t pos, float* cos_sin /* n_rot: cos0, sin0, cos1, ... */) noexcept;
// Rotates adjacent pairs (x[2i], x[2i+1]) of each of n_heads heads of head_dim elements.
void rope_apply_norm(float* x, int n_heads, int head_dim, int n_rot, const float* cos_sin) noexcept;
// GPT-NeoX style (Gemma, Qwen, ...): rotates the pairs (x[i], x[i + n_rot/2]), pair i using
// the i-th cos/sin.
void rope_apply_neox(float* x, int n_heads, int head_dim, int n_rot, const float* cos_sin) noexcept;

}  // namespace infer
