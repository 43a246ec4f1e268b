// The element-wise ops, RMSNorm, RoPE and the embedding gather on the device: the CPU twins are
// ops/*_cpu.cpp over kernels/cpu/ops_ref.cpp, whose arithmetic each kernel repeats (the files of
// cuda/ build with --fmad=false, so a*b+c is two roundings unless written as fmaf, as on the CPU).
#include <cmath>
#include <vector>

#include "core/status_macros.hpp"
#include "cuda/cuda_backend.cuh"
#include "cuda/hadamard.cuh"
#include "cuda/quant_blocks.cuh"
#include "ops/gpu_impl.hpp"
#include "ops/op_util.hpp"

namespace infer::ops::gpu {
namespace {

using cuda::backend_of;
using cuda::check_launch;
using cuda::grid_for;

constexpr int kThreads = 256;

struct Rows {
  float* p;
  int64_t cols, rows, stride;  // stride in floats
};
Rows rows_of(const TensorView& t) { return {static_cast<float*>(t.data), t.shape[0], t.shape[1], row_floats(t)}; }

// The ggml vector exp (kernels/cpu/exp_approx.hpp), operation for operation.
__device__ float exp_ggml(float x) {
  const float shift = 0x1.8p23f;
  const float z = fmaf(x, 0x1.715476p+0f, shift);
  const float n = z - shift;
  const float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
  const uint32_t e = __float_as_uint(z) << 23;
  const float u = b * b;
  const float j = fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)), u, 0x1.ffffecp-1f * b);
  if (!(fabsf(n) > 126.0f)) return fmaf(j, __uint_as_float(e + 0x3f800000u), __uint_as_float(e + 0x3f800000u));
  const uint32_t g = n <= 0.0f ? 0x82000000u : 0u;
  const float s1 = __uint_as_float(g + 0x7f000000u);
  if (fabsf(n) > 192.0f) return s1 * s1;
  const float s2 = __uint_as_float(e - g);
  return fmaf(s2, j, s2) * s1;
}

template <class F>
__global__ void each_kernel(Rows x, F f) {
  const int64_t n = x.cols * x.rows;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / x.cols, c = i % x.cols;
    f(x.p + r * x.stride + c, r, c);
  }
}

// One CUDA block per (row, block of n columns): the block in shared memory, rotated, written back.
__global__ void hadamard_kernel(Rows x, int n, float scale) {
  extern __shared__ float block[];
  const int64_t per_row = x.cols / n;
  float* p = x.p + (blockIdx.x / per_row) * x.stride + (blockIdx.x % per_row) * n;
  for (int i = threadIdx.x; i < n; i += blockDim.x) block[i] = p[i];
  cuda::hadamard_shared(block, n, n, scale);
  for (int i = threadIdx.x; i < n; i += blockDim.x) p[i] = block[i];
}

template <class F>
Status each(Backend& be, const TensorView& t, F f, const char* name) {
  INFER_ASSIGN_OR_RETURN(cuda::CudaBackend * c, backend_of(be));
  const Rows x = rows_of(t);
  if (x.cols * x.rows == 0) return Status::ok();
  each_kernel<<<grid_for(x.cols * x.rows, kThreads), kThreads, 0, c->stream()>>>(x, f);
  return check_launch(name);
}

struct AddOp {
  Rows y;
  __device__ void operator()(float* v, int64_t r, int64_t c) const { *v += y.p[r * y.stride + c]; }
};
struct AddBiasOp {
  const float* bias;
  __device__ void operator()(float* v, int64_t, int64_t c) const { *v += bias[c]; }
};
struct ScaleOp {
  float s;
  __device__ void operator()(float* v, int64_t, int64_t) const { *v *= s; }
};
struct SoftcapOp {
  float cap;
  // tanhf: within an ulp or two of the CPU's std::tanh, not always bit-equal.
  __device__ void operator()(float* v, int64_t, int64_t) const { *v = tanhf(*v * (1.0f / cap)) * cap; }
};

// silu_mul: elements in groups of 8 through exp_ggml, a row's tail (n % 8) through expf.
struct SiluOp {
  Rows gate, up;
  int64_t tail_from;
  __device__ void operator()(float* o, int64_t r, int64_t c) const {
    const float g = gate.p[r * gate.stride + c], u = up.p[r * up.stride + c];
    const float e = c < tail_from ? exp_ggml(0.0f - g) : expf(-g);
    *o = g / (1.0f + e) * u;
  }
};
struct GeluOp {
  Rows gate, up;
  const uint16_t* table;
  __device__ void operator()(float* o, int64_t r, int64_t c) const {
    const float g = gate.p[r * gate.stride + c], u = up.p[r * up.stride + c];
    if (g <= -10.0f) {
      *o = 0.0f;
    } else if (g >= 10.0f) {
      *o = g * u;
    } else {
      const unsigned short h = __half_as_ushort(__float2half_rn(g));
      *o = __half2float(__ushort_as_half(table[h])) * u;
    }
  }
};

// One block per row segment of n elements: the sum of squares in double, reduced in a fixed
// tree (the same for every row and batch), then y = (x * scale) * w.
__global__ void rms_norm_kernel(Rows x, Rows y, const float* w, int64_t n, float eps) {
  const int64_t seg_per_row = x.cols / n;
  const int64_t r = blockIdx.x / seg_per_row, s = blockIdx.x % seg_per_row;
  const float* xr = x.p + r * x.stride + s * n;
  float* yr = y.p + r * y.stride + s * n;
  __shared__ double part[kThreads];
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sum += static_cast<double>(xr[i] * xr[i]);
  part[threadIdx.x] = sum;
  __syncthreads();
  for (int w2 = blockDim.x / 2; w2 > 0; w2 /= 2) {
    if (threadIdx.x < w2) part[threadIdx.x] += part[threadIdx.x + w2];
    __syncthreads();
  }
  const float mean = static_cast<float>(part[0] / static_cast<double>(n));
  const float scale = 1.0f / sqrtf(mean + eps);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) yr[i] = (xr[i] * scale) * w[i];
}

// rope_cache: theta built by repeated float multiplication from pos, so one thread per row walks
// the pairs in order; cos/sin of the float angle through double (correctly rounded in nearly
// every case, as glibc's cosf/sinf).
__global__ void rope_table_kernel(Rows t, const int32_t* pos, int n_rot, float theta_scale, float freq_scale, const float* factors) {
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; r < t.rows; r += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float theta = static_cast<float>(pos[r]);
    float* cs = t.p + r * t.stride;
    for (int i = 0; i < n_rot / 2; ++i) {
      const float factor = factors ? factors[i] : 1.0f;
      const float a = freq_scale * (theta / factor);
      cs[2 * i] = static_cast<float>(cos(static_cast<double>(a)));
      cs[2 * i + 1] = static_cast<float>(sin(static_cast<double>(a)));
      theta *= theta_scale;
    }
  }
}

__global__ void rope_kernel(Rows x, Rows t, int n_heads, int head_dim, int n_rot, bool neox) {
  const int half = n_rot / 2;
  const int64_t n = x.rows * n_heads * half;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / (n_heads * half);
    const int h = static_cast<int>(i / half % n_heads), k = static_cast<int>(i % half);
    float* v = x.p + r * x.stride + static_cast<int64_t>(h) * head_dim;
    const float* cs = t.p + r * t.stride;
    const float c = cs[2 * k], s = cs[2 * k + 1];
    const int ia = neox ? k : 2 * k, ib = neox ? k + half : 2 * k + 1;
    const float a = v[ia], b = v[ib];
    v[ia] = fmaf(a, c, -(b * s));
    v[ib] = fmaf(a, s, b * c);
  }
}

template <class Block>
__global__ void embed_kernel(const uint8_t* table, int64_t row_bytes, const int32_t* tokens, Rows out, float scale) {
  const int64_t n = out.cols * out.rows;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / out.cols, c = i % out.cols;
    const uint8_t* row = table + tokens[r] * row_bytes;
    float v = Block::elem(row + (c / Block::kElems) * Block::kBytes, static_cast<int>(c % Block::kElems));
    if (scale != 1.0f) v *= scale;
    out.p[r * out.stride + c] = v;
  }
}

__global__ void copy_rows_kernel(Rows x, const int32_t* idx, Rows out) {
  const int64_t n = out.cols * out.rows;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / out.cols, c = i % out.cols;
    out.p[r * out.stride + c] = x.p[idx[r] * x.stride + c];
  }
}

}  // namespace

bool can_read(DType t) noexcept {
  switch (t) {
    case DType::f32: case DType::f16: case DType::bf16: case DType::q4_0: case DType::q8_0: case DType::q4_k: case DType::q6_k:
      return true;
    default:
      return false;
  }
}

Status add(Backend& be, const TensorView& x, const TensorView& y) { return each(be, x, AddOp{rows_of(y)}, "add"); }
Status add_bias(Backend& be, const TensorView& x, const TensorView& bias) {
  return each(be, x, AddBiasOp{static_cast<const float*>(bias.data)}, "add_bias");
}
Status scale(Backend& be, const TensorView& x, float s) { return each(be, x, ScaleOp{s}, "scale"); }
Status softcap(Backend& be, const TensorView& x, float cap) { return each(be, x, SoftcapOp{cap}, "softcap"); }

// Blocks up to 8192 columns (32 KiB of shared memory, within every device's default).
Status hadamard(Backend& be, const TensorView& t, int block) {
  constexpr int kMaxShared = 8192;
  if (block > kMaxShared)
    return unsupported("hadamard: the CUDA kernel rotates blocks of at most " + std::to_string(kMaxShared) + " columns, not " +
                       std::to_string(block));
  INFER_ASSIGN_OR_RETURN(cuda::CudaBackend * c, backend_of(be));
  const Rows x = rows_of(t);
  const int64_t blocks = x.rows * (x.cols / block);
  if (blocks == 0) return Status::ok();
  const float scale = 1.0f / std::sqrt(static_cast<float>(block));  // as kernels/cpu/hadamard.hpp
  hadamard_kernel<<<static_cast<unsigned>(blocks), kThreads, static_cast<size_t>(block) * sizeof(float), c->stream()>>>(x, block, scale);
  return check_launch("hadamard");
}

Status glu(Backend& be, Activation act, const TensorView& gate, const TensorView& up, const TensorView& out) {
  INFER_ASSIGN_OR_RETURN(cuda::CudaBackend * c, backend_of(be));
  if (act == Activation::silu) return each(be, out, SiluOp{rows_of(gate), rows_of(up), gate.shape[0] / 8 * 8}, "glu (silu)");
  return each(be, out, GeluOp{rows_of(gate), rows_of(up), c->gelu_table()}, "glu (gelu)");
}

Status rms_norm(Backend& be, const TensorView& x, const TensorView& w, const TensorView& y, float eps) {
  INFER_ASSIGN_OR_RETURN(cuda::CudaBackend * c, backend_of(be));
  const int64_t n = w.shape[0];
  const int64_t blocks = x.shape[1] * (x.shape[0] / n);
  if (blocks == 0) return Status::ok();
  if (blocks > INT32_MAX) return invalid_argument("rms_norm: too many rows for one launch");
  rms_norm_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, c->stream()>>>(rows_of(x), rows_of(y), static_cast<const float*>(w.data), n, eps);
  return check_launch("rms_norm");
}

Status rope_table(Backend& be, const RopeSpec& spec, std::span<const int32_t> positions, const TensorView& table) {
  INFER_ASSIGN_OR_RETURN(cuda::CudaBackend * c, backend_of(be));
  if (positions.empty()) return Status::ok();
  INFER_ASSIGN_OR_RETURN(void* pos, c->upload(1, positions.data(), positions.size_bytes()));
  // The same float as the CPU's std::pow(base, -2 / n_rot), computed on the host.
  const float theta_scale = std::pow(spec.base, -2.0f / static_cast<float>(spec.n_rot));
  rope_table_kernel<<<grid_for(static_cast<int64_t>(positions.size()), 128), 128, 0, c->stream()>>>(
      rows_of(table), static_cast<const int32_t*>(pos), spec.n_rot, theta_scale, spec.freq_scale, spec.freq_factors);
  return check_launch("rope_table");
}

Status rope(Backend& be, const TensorView& x, int n_heads, int head_dim, int n_rot, RopeStyle style, const TensorView& table) {
  INFER_ASSIGN_OR_RETURN(cuda::CudaBackend * c, backend_of(be));
  const int64_t n = x.shape[1] * n_heads * (n_rot / 2);
  if (n == 0) return Status::ok();
  rope_kernel<<<grid_for(n, kThreads), kThreads, 0, c->stream()>>>(rows_of(x), rows_of(table), n_heads, head_dim, n_rot, style == RopeStyle::neox);
  return check_launch("rope");
}

Status embed(Backend& be, const TensorView& table, std::span<const int32_t> tokens, const TensorView& out, float scale) {
  INFER_ASSIGN_OR_RETURN(cuda::CudaBackend * c, backend_of(be));
  if (tokens.empty()) return Status::ok();
  INFER_ASSIGN_OR_RETURN(void* ids, c->upload(2, tokens.data(), tokens.size_bytes()));
  const auto* t = static_cast<const uint8_t*>(table.data);
  const auto rb = static_cast<int64_t>(table.row_bytes());
  const auto* idx = static_cast<const int32_t*>(ids);
  const Rows o = rows_of(out);
  const unsigned g = grid_for(o.cols * o.rows, kThreads);
  cudaStream_t s = c->stream();
  switch (table.dtype) {
    case DType::f32: embed_kernel<cuda::BlockF32><<<g, kThreads, 0, s>>>(t, rb, idx, o, scale); break;
    case DType::f16: embed_kernel<cuda::BlockF16><<<g, kThreads, 0, s>>>(t, rb, idx, o, scale); break;
    case DType::bf16: embed_kernel<cuda::BlockBF16><<<g, kThreads, 0, s>>>(t, rb, idx, o, scale); break;
    case DType::q8_0: embed_kernel<cuda::BlockQ8_0><<<g, kThreads, 0, s>>>(t, rb, idx, o, scale); break;
    case DType::q4_0: embed_kernel<cuda::BlockQ4_0><<<g, kThreads, 0, s>>>(t, rb, idx, o, scale); break;
    case DType::q4_k: embed_kernel<cuda::BlockQ4_K><<<g, kThreads, 0, s>>>(t, rb, idx, o, scale); break;
    case DType::q6_k: embed_kernel<cuda::BlockQ6_K><<<g, kThreads, 0, s>>>(t, rb, idx, o, scale); break;
    default: return unsupported("embed: no CUDA kernel reads " + std::string(dtype_name(table.dtype)));
  }
  return check_launch("embed");
}

Status copy_rows(Backend& be, const TensorView& x, std::span<const int32_t> rows, const TensorView& out) {
  INFER_ASSIGN_OR_RETURN(cuda::CudaBackend * c, backend_of(be));
  if (rows.empty()) return Status::ok();
  INFER_ASSIGN_OR_RETURN(void* idx, c->upload(3, rows.data(), rows.size_bytes()));
  const Rows o = rows_of(out);
  copy_rows_kernel<<<grid_for(o.cols * o.rows, kThreads), kThreads, 0, c->stream()>>>(rows_of(x), static_cast<const int32_t*>(idx), o);
  return check_launch("copy_rows");
}

}  // namespace infer::ops::gpu
