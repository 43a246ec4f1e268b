// Writes llama.cpp's CPU results for tests/unit/test_qmatmul.cpp: ggml's mul_mat of every weight type
// libinfer computes with, and ggml's activation quantizers, on this machine's ISA. Built and run
// by tests/reference/make-matmul-reference.sh against the static ggml libraries of
// scripts/build-llama-cpp; it is not part of the libinfer build.
//
//   ggml-matmul-reference OUT_DIR
//
// Files written (little-endian):
//   manifest.txt          N_IN N_OUT N_ROWS, then one weight type name per line
//   x.f32                 N_ROWS activation rows of N_IN floats
//   x.q8_0, x.q8_1,       ggml's CPU quantize_row_q8_0 / q8_1 / q8_K of each row (the activation
//   x.q8_k                quantizers mul_mat uses)
//   <type>.w              N_OUT weight rows, ggml_quantize_chunk of random floats (F32/F16/BF16:
//                         converted)
//   <type>.y              mul_mat(W, x): N_ROWS rows of N_OUT floats, computed by the CPU backend
//                         with the weights in the buffer llama.cpp would put them in (the repacking
//                         buffer for the types it repacks on this CPU)
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"

extern "C" {
// ggml-cpu's activation quantizers (ggml-cpu/quants.h, not a public header).
void quantize_row_q8_0(const float* x, void* y, int64_t k);
void quantize_row_q8_1(const float* x, void* y, int64_t k);
void quantize_row_q8_K(const float* x, void* y, int64_t k);
}

namespace {

constexpr int64_t kIn = 512;    // two K-quant super-blocks, sixteen 32-blocks
constexpr int64_t kOut = 32;    // a multiple of 8, so Q4_0 / Q4_K are repacked as in a real model
constexpr int64_t kRows = 16;   // >= 8: the batched (prompt) kernels, as llama-perplexity runs them

void write(const std::string& path, const void* data, size_t bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(data, 1, bytes, f) != bytes) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    std::exit(1);
  }
  std::fclose(f);
}

// Types llama.cpp's CPU backend repacks on AVX2 (ggml_repack_get_optimal_repack_type).
bool repacked_on_avx2(ggml_type t) { return t == GGML_TYPE_Q4_0 || t == GGML_TYPE_Q4_K; }

ggml_backend_buffer_type_t repack_buffer_type(ggml_backend_t backend) {
  ggml_backend_dev_t dev = ggml_backend_get_device(backend);
  auto get = reinterpret_cast<ggml_backend_dev_get_extra_bufts_t>(
      ggml_backend_reg_get_proc_address(ggml_backend_dev_backend_reg(dev), "ggml_backend_dev_get_extra_bufts"));
  if (!get) return nullptr;
  for (ggml_backend_buffer_type_t* b = get(dev); b && *b; ++b)
    if (std::strcmp(ggml_backend_buft_name(*b), "CPU_REPACK") == 0) return *b;
  return nullptr;
}

std::vector<uint8_t> weight_bytes(ggml_type t, const std::vector<float>& src) {
  std::vector<uint8_t> out(ggml_row_size(t, kIn) * kOut);
  if (t == GGML_TYPE_F32) {
    std::memcpy(out.data(), src.data(), out.size());
  } else if (t == GGML_TYPE_F16) {
    ggml_fp32_to_fp16_row(src.data(), reinterpret_cast<ggml_fp16_t*>(out.data()), kIn * kOut);
  } else if (t == GGML_TYPE_BF16) {
    ggml_fp32_to_bf16_row_ref(src.data(), reinterpret_cast<ggml_bf16_t*>(out.data()), kIn * kOut);
  } else {
    ggml_quantize_chunk(t, src.data(), out.data(), 0, kOut, kIn, nullptr);
  }
  return out;
}

std::vector<float> mul_mat(ggml_backend_t backend, ggml_type t, const std::vector<uint8_t>& w,
                           const std::vector<float>& x) {
  ggml_init_params params{16 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true};
  ggml_context* wctx = ggml_init(params);
  ggml_context* ctx = ggml_init(params);
  ggml_tensor* W = ggml_new_tensor_2d(wctx, t, kIn, kOut);
  ggml_tensor* X = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, kIn, kRows);
  ggml_tensor* Y = ggml_mul_mat(ctx, W, X);
  ggml_backend_buffer_type_t wbuft =
      repacked_on_avx2(t) && repack_buffer_type(backend) ? repack_buffer_type(backend)
                                                         : ggml_backend_get_default_buffer_type(backend);
  ggml_backend_buffer_t wbuf = ggml_backend_alloc_ctx_tensors_from_buft(wctx, wbuft);
  ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, backend);
  ggml_backend_tensor_set(W, w.data(), 0, w.size());
  ggml_backend_tensor_set(X, x.data(), 0, x.size() * sizeof(float));
  ggml_cgraph* gf = ggml_new_graph(ctx);
  ggml_build_forward_expand(gf, Y);
  if (ggml_backend_graph_compute(backend, gf) != GGML_STATUS_SUCCESS) {
    std::fprintf(stderr, "mul_mat failed for %s\n", ggml_type_name(t));
    std::exit(1);
  }
  std::vector<float> y(static_cast<size_t>(kOut * kRows));
  ggml_backend_tensor_get(Y, y.data(), 0, y.size() * sizeof(float));
  std::fprintf(stderr, "%-5s weights in %s\n", ggml_type_name(t), ggml_backend_buft_name(wbuft));
  ggml_backend_buffer_free(buf);
  ggml_backend_buffer_free(wbuf);
  ggml_free(ctx);
  ggml_free(wctx);
  return y;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  const std::string out = argv[1];
  ggml_cpu_init();
  ggml_backend_t backend = ggml_backend_cpu_init();
  ggml_backend_cpu_set_n_threads(backend, 2);

  // Activations: per 32-block magnitudes from 1e-3 to 1e2, a few outliers, exact ties of +-max
  // in some blocks (quantizer tie rules), and one all-zero block.
  std::mt19937_64 rng(20260101);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(kIn * kRows));
  for (int64_t b = 0; b < kIn * kRows / 32; ++b) {
    const float scale = std::pow(10.0f, -3.0f + 5.0f * static_cast<float>(rng() % 1000) / 1000.0f);
    for (int j = 0; j < 32; ++j) x[static_cast<size_t>(b * 32 + j)] = scale * normal(rng);
    if (b % 7 == 3) x[static_cast<size_t>(b * 32 + rng() % 32)] *= 20.0f;
    if (b % 11 == 5) {
      float m = 0;
      for (int j = 0; j < 32; ++j) m = std::max(m, std::fabs(x[static_cast<size_t>(b * 32 + j)]));
      x[static_cast<size_t>(b * 32 + 3)] = -m;
      x[static_cast<size_t>(b * 32 + 20)] = m;
    }
  }
  std::fill_n(x.begin() + 5 * 32, 32, 0.0f);
  write(out + "/x.f32", x.data(), x.size() * sizeof(float));

  struct {
    const char* name;
    ggml_type type;
    void (*quantize)(const float*, void*, int64_t);
  } acts[] = {{"q8_0", GGML_TYPE_Q8_0, quantize_row_q8_0},
              {"q8_1", GGML_TYPE_Q8_1, quantize_row_q8_1},
              {"q8_k", GGML_TYPE_Q8_K, quantize_row_q8_K}};
  for (const auto& a : acts) {
    const size_t row = ggml_row_size(a.type, kIn);
    std::vector<uint8_t> q(row * kRows);
    for (int64_t r = 0; r < kRows; ++r) a.quantize(x.data() + r * kIn, q.data() + r * row, kIn);
    write(out + "/x." + a.name, q.data(), q.size());
  }

  std::vector<float> wsrc(static_cast<size_t>(kIn * kOut));
  for (auto& v : wsrc) v = 0.05f * normal(rng);
  const ggml_type types[] = {GGML_TYPE_F32,  GGML_TYPE_F16,  GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0,
                             GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_Q2_K, GGML_TYPE_Q3_K,
                             GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K};
  std::string manifest = "# N_IN N_OUT N_ROWS, then the weight types (tests/reference/make-matmul-reference.sh)\n" +
                         std::to_string(kIn) + " " + std::to_string(kOut) + " " + std::to_string(kRows) + "\n";
  for (ggml_type t : types) {
    std::string name = ggml_type_name(t);
    for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const auto w = weight_bytes(t, wsrc);
    const auto y = mul_mat(backend, t, w, x);
    write(out + "/" + name + ".w", w.data(), w.size());
    write(out + "/" + name + ".y", y.data(), y.size() * sizeof(float));
    manifest += std::string(ggml_type_name(t)) + "\n";
  }
  write(out + "/manifest.txt", manifest.data(), manifest.size());
  ggml_backend_free(backend);
  return 0;
}
