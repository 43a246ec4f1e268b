// Paged attention and the K/V write on the device, over the cache layout the CPU uses
// (core/kv_view.hpp). The arithmetic is the CPU kernel's (kernels/cpu/attention.hpp), per row
// and head: tiles of 64 positions, chunks of 512 folded in order, each score one fma chain over
// the head dimension in index order, probabilities through exp_ggml, the tile's sum in double
// through the same tree of 8, accumulators one fma chain per element in position order; exp of
// the rescaling factors in double rounded to float (glibc's expf is correctly rounded).
// One block per (row, head): a row's result depends on its sequence's cache alone (batch
// invariance). K/V types: F16, BF16, F32 and Q8_0 (quantized as the CPU's quantize_activations_q8_0),
// rotated or not (KvView::k_rotation: the K/V rows rotated before they are quantized, the query
// before its dots, the output back, by the butterflies of kernels/cpu/hadamard.hpp).
#include <cmath>
#include <type_traits>
#include <vector>

#include "core/status_macros.hpp"
#include "cuda/cuda_backend.cuh"
#include "cuda/hadamard.cuh"
#include "cuda/quant_blocks.cuh"
#include "kernels/cpu/attention.hpp"
#include "ops/gpu_impl.hpp"
#include "ops/op_util.hpp"

namespace infer::ops::gpu {
namespace {

using cuda::hadamard_shared;

using cuda::backend_of;
using cuda::check_launch;

constexpr int kTile = kAttentionTile;     // 64: one thread per position of a tile
constexpr int kChunk = kAttentionChunk;   // 512
constexpr int kMaxHeadDim = 4 * kTile;    // 4 accumulators per thread

// The step's rows as uploaded by plan_attention (int32, in the backend's scratch slot 4):
//   ctx[n] | first[G][n] | table offset[G][n] | the tables, one after another
struct StepRows {
  const int32_t* ctx;
  const int32_t* first;
  const int32_t* toff;
  const int32_t* tables;
  int n;
};

struct LayerKv {
  uint8_t* k;  // the layer's slot in its group's pool
  uint8_t* v;
  int group, n_kv_heads, head_dim, block_size;
  int64_t row_bytes;
  int k_rotation, v_rotation;  // 0: not rotated
  float k_scale, v_scale;      // the float nearest 1 / sqrt(rotation), as the CPU's
};

__device__ __forceinline__ int64_t row_offset(const LayerKv& kv, int32_t block, int h, int32_t slot) {
  return ((static_cast<int64_t>(block) * kv.n_kv_heads + h) * kv.block_size + slot) * kv.row_bytes;
}

template <class T>
__device__ __forceinline__ float load_elem(const uint8_t* row, int i) {
  return T::elem(row + static_cast<int64_t>(i / T::kElems) * T::kBytes, i % T::kElems);
}

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

__device__ __forceinline__ float exp_rounded(float x) { return static_cast<float>(exp(static_cast<double>(x))); }

template <class T>
__global__ void __launch_bounds__(kTile) attention_kernel(StepRows rows, LayerKv kv, const float* q, int64_t qs, float* out, int64_t os,
                                                          int n_head, float scale) {
  const int r = blockIdx.x, h = blockIdx.y, tid = threadIdx.x;
  const int hd = kv.head_dim;
  const int kvh = h / (n_head / kv.n_kv_heads);
  extern __shared__ float sh[];
  float* qh = sh;       // [hd]
  float* p = sh + hd;   // [kTile]
  __shared__ float warp_max[kTile / 32];
  for (int i = tid; i < hd; i += kTile) qh[i] = q[r * qs + static_cast<int64_t>(h) * hd + i];
  if (kv.k_rotation > 0) hadamard_shared(qh, hd, kv.k_rotation, kv.k_scale);
  const int32_t n_ctx = rows.ctx[r];
  const int32_t first = rows.first[kv.group * rows.n + r];
  const int32_t* table = rows.tables + rows.toff[kv.group * rows.n + r];
  float acc[4] = {0, 0, 0, 0}, facc[4] = {0, 0, 0, 0};
  float m = -INFINITY, sum = 0.0f, fm = -INFINITY, fsum = 0.0f;
  auto fold = [&]() {
    if (sum == 0.0f) return;
    if (fsum == 0.0f) {
      fm = m;
      fsum = sum;
      for (int j = 0; j < 4; ++j) facc[j] = acc[j];
      return;
    }
    const float m_new = fmaxf(fm, m);
    const float so = exp_rounded(fm - m_new), sn = exp_rounded(m - m_new);
    for (int j = 0; j < 4; ++j) facc[j] = facc[j] * so + acc[j] * sn;
    fsum = fsum * so + sum * sn;
    fm = m_new;
  };
  const int32_t start = first / kTile * kTile;
  for (int32_t t0 = start; t0 < n_ctx; t0 += kTile) {
    if (t0 % kChunk == 0 && t0 != start) {
      fold();
      m = -INFINITY, sum = 0.0f;
      for (int j = 0; j < 4; ++j) acc[j] = 0.0f;
    }
    const int n = min(kTile, n_ctx - t0);
    const int lo = max(0, first - t0);
    __syncthreads();  // qh written; p free again
    const bool visible = tid >= lo && tid < n;
    float s = 0.0f;
    if (visible) {
      const int32_t pos = t0 + tid;
      const uint8_t* krow = kv.k + row_offset(kv, table[pos / kv.block_size], kvh, pos % kv.block_size);
      for (int i = 0; i < hd; ++i) s = fmaf(qh[i], load_elem<T>(krow, i), s);
      s *= scale;
    }
    float mx = visible ? s : -INFINITY;
    for (int off = 16; off > 0; off /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
    if (tid % 32 == 0) warp_max[tid / 32] = mx;
    __syncthreads();
    const float tile_max = fmaxf(warp_max[0], warp_max[1]);
    const float m_new = fmaxf(m, tile_max);
    if (m_new > m) {
      const float rescale = exp_rounded(m - m_new);
      for (int j = 0; j < 4; ++j) acc[j] *= rescale;
      sum *= rescale;
    }
    m = m_new;
    p[tid] = visible ? exp_ggml(s - m) : 0.0f;
    __syncthreads();
    double tile_sum = 0.0;
    for (int g = 0; g < kTile; g += 8) {
      const float* l = p + g;
      tile_sum += static_cast<double>(((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7])));
    }
    sum = static_cast<float>(static_cast<double>(sum) + tile_sum);
    for (int t = lo; t < n; ++t) {
      const int32_t pos = t0 + t;
      const uint8_t* vrow = kv.v + row_offset(kv, table[pos / kv.block_size], kvh, pos % kv.block_size);
      const float pt = p[t];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int d = tid + j * kTile;
        if (d < hd) acc[j] = fmaf(load_elem<T>(vrow, d), pt, acc[j]);
      }
    }
  }
  fold();
  const float inv = fsum == 0.0f ? 0.0f : 1.0f / fsum;
  if (kv.v_rotation > 0) {
    // The output rotated back, staged in qh once every thread is done reading it.
    __syncthreads();
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int d = tid + j * kTile;
      if (d < hd) qh[d] = facc[j] * inv;
    }
    hadamard_shared(qh, hd, kv.v_rotation, kv.v_scale);
    for (int d = tid; d < hd; d += kTile) out[r * os + static_cast<int64_t>(h) * hd + d] = qh[d];
    return;
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int d = tid + j * kTile;
    if (d < hd) out[r * os + static_cast<int64_t>(h) * hd + d] = facc[j] * inv;
  }
}

// One block per row: its K and V heads quantized to Q8_0, one thread per 32 values.
__global__ void kv_write_q8_0_kernel(StepRows rows, LayerKv kv, const float* k, int64_t ks, const float* v, int64_t vs) {
  const int r = blockIdx.x;
  const int32_t pos = rows.ctx[r] - 1;
  const int32_t block = rows.tables[rows.toff[kv.group * rows.n + r] + pos / kv.block_size];
  const int32_t slot = pos % kv.block_size;
  const int per_head = kv.head_dim / 32;
  for (int e = threadIdx.x; e < kv.n_kv_heads * per_head; e += blockDim.x) {
    const int h = e / per_head, b = e % per_head;
    const int64_t off = row_offset(kv, block, h, slot) + static_cast<int64_t>(b) * cuda::BlockQ8_0::kBytes;
    cuda::quantize_q8_0(k + r * ks + static_cast<int64_t>(h) * kv.head_dim + 32 * b, kv.k + off);
    cuda::quantize_q8_0(v + r * vs + static_cast<int64_t>(h) * kv.head_dim + 32 * b, kv.v + off);
  }
}

// One block per (row, KV head) of a rotated Q8_0 cache: the head's K and V rotated in shared
// memory ([2][head_dim] floats), then quantized, one thread per 32 values.
__global__ void kv_write_q8_0_rotated_kernel(StepRows rows, LayerKv kv, const float* k, int64_t ks, const float* v, int64_t vs) {
  const int r = blockIdx.x, h = blockIdx.y, hd = kv.head_dim;
  extern __shared__ float sh[];
  float* kr = sh;
  float* vr = sh + hd;
  const int32_t pos = rows.ctx[r] - 1;
  const int32_t block = rows.tables[rows.toff[kv.group * rows.n + r] + pos / kv.block_size];
  const int32_t slot = pos % kv.block_size;
  for (int i = threadIdx.x; i < hd; i += blockDim.x) {
    kr[i] = k[r * ks + static_cast<int64_t>(h) * hd + i];
    vr[i] = v[r * vs + static_cast<int64_t>(h) * hd + i];
  }
  hadamard_shared(kr, hd, kv.k_rotation, kv.k_scale);
  hadamard_shared(vr, hd, kv.v_rotation, kv.v_scale);
  for (int b = threadIdx.x; b < hd / 32; b += blockDim.x) {
    const int64_t off = row_offset(kv, block, h, slot) + static_cast<int64_t>(b) * cuda::BlockQ8_0::kBytes;
    cuda::quantize_q8_0(kr + 32 * b, kv.k + off);
    cuda::quantize_q8_0(vr + 32 * b, kv.v + off);
  }
}

// One block per row: its K and V heads converted to the cache's type (round to nearest even).
template <class T>
__global__ void kv_write_kernel(StepRows rows, LayerKv kv, const float* k, int64_t ks, const float* v, int64_t vs) {
  const int r = blockIdx.x;
  const int32_t pos = rows.ctx[r] - 1;
  const int32_t block = rows.tables[rows.toff[kv.group * rows.n + r] + pos / kv.block_size];
  const int32_t slot = pos % kv.block_size;
  const int width = kv.n_kv_heads * kv.head_dim;
  for (int e = threadIdx.x; e < width; e += blockDim.x) {
    const int h = e / kv.head_dim, i = e % kv.head_dim;
    const int64_t off = row_offset(kv, block, h, slot);
    T* kd = reinterpret_cast<T*>(kv.k + off) + i;
    T* vd = reinterpret_cast<T*>(kv.v + off) + i;
    if constexpr (std::is_same_v<T, float>) {
      *kd = k[r * ks + e];
      *vd = v[r * vs + e];
    } else if constexpr (std::is_same_v<T, __half>) {
      *kd = __float2half_rn(k[r * ks + e]);
      *vd = __float2half_rn(v[r * vs + e]);
    } else {
      *kd = __float2bfloat16_rn(k[r * ks + e]);
      *vd = __float2bfloat16_rn(v[r * vs + e]);
    }
  }
}

Result<StepRows> step_rows(cuda::CudaBackend& c, const AttentionPlan& plan, const KvView& kv) {
  const int n = static_cast<int>(plan.n_rows);
  const size_t words = static_cast<size_t>(n) * (1 + 2 * static_cast<size_t>(kv.n_groups));
  INFER_ASSIGN_OR_RETURN(void* p, c.scratch(4, 4 * words));  // already holds the step's rows
  const auto* base = static_cast<const int32_t*>(p);
  return StepRows{base, base + n, base + n + static_cast<size_t>(kv.n_groups) * n,
                  base + n + 2 * static_cast<size_t>(kv.n_groups) * n, n};
}

LayerKv layer_kv(const KvView& kv, int layer) {
  const KvGroupView& g = kv.groups[static_cast<size_t>(kv.group(layer))];
  const uint64_t slot_bytes = static_cast<uint64_t>(g.n_blocks) * kv.n_kv_heads * kv.block_size * kv.row_bytes;
  const uint64_t off = static_cast<uint64_t>(kv.slot(layer)) * slot_bytes;
  auto scale = [](int n) { return n > 0 ? 1.0f / std::sqrt(static_cast<float>(n)) : 1.0f; };
  return {g.k_base + off,       g.v_base + off, kv.group(layer), kv.n_kv_heads, kv.head_dim, kv.block_size, static_cast<int64_t>(kv.row_bytes),
          kv.k_rotation,        kv.v_rotation,  scale(kv.k_rotation), scale(kv.v_rotation)};
}

Status check_kv(const KvView& kv, const char* op) {
  if (kv.kv_type != DType::f16 && kv.kv_type != DType::bf16 && kv.kv_type != DType::f32 && kv.kv_type != DType::q8_0)
    return unsupported(std::string(op) + ": the CUDA backend reads F16, BF16, F32 and Q8_0 KV caches, not " + std::string(dtype_name(kv.kv_type)));
  if (kv.kv_type == DType::q8_0 && kv.head_dim % 32 != 0) return unsupported(std::string(op) + ": a Q8_0 cache needs head sizes of a multiple of 32");
  if (kv.head_dim > kMaxHeadDim) return unsupported(std::string(op) + ": the CUDA kernel takes head sizes up to 256");
  if ((kv.k_rotation > 0 || kv.v_rotation > 0) && kv.kv_type != DType::q8_0)
    return unsupported(std::string(op) + ": the CUDA backend rotates Q8_0 caches only");
  return Status::ok();
}

}  // namespace

Status plan_attention(Backend& be, const PagedRows& rows, const KvView& kv) {
  INFER_RETURN_IF_ERROR(check_kv(kv, "attention"));
  INFER_ASSIGN_OR_RETURN(cuda::CudaBackend * c, backend_of(be));
  const size_t n = rows.positions.size();
  const size_t G = static_cast<size_t>(kv.n_groups);
  std::vector<int32_t> buf(n * (1 + 2 * G));
  // Each (sequence, group) table once, after the per-row arrays.
  std::vector<int32_t> offset(rows.sequences.size() * G, -1);
  for (size_t r = 0; r < n; ++r) {
    const int32_t pos = rows.positions[r];
    buf[r] = pos + 1;
    const auto s = static_cast<size_t>(rows.seq[r]);
    for (size_t g = 0; g < G; ++g) {
      const int w = kv.groups[g].sliding_window;
      buf[n + g * n + r] = w > 0 && pos >= w ? pos - w + 1 : 0;
      int32_t& off = offset[s * G + g];
      if (off < 0) {
        off = static_cast<int32_t>(buf.size() - n * (1 + 2 * G));
        const std::span<const int32_t> t = rows.sequences[s].tables[g];
        buf.insert(buf.end(), t.begin(), t.end());
      }
      buf[n + G * n + g * n + r] = off;
    }
  }
  if (n == 0) return Status::ok();
  return c->upload(4, buf.data(), buf.size() * sizeof(int32_t)).status();
}

Status kv_write(Backend& be, const AttentionPlan& plan, const KvView& kv, int layer, const TensorView& k, const TensorView& v) {
  INFER_RETURN_IF_ERROR(check_kv(kv, "kv_write"));
  INFER_ASSIGN_OR_RETURN(cuda::CudaBackend * c, backend_of(be));
  if (plan.n_rows == 0) return Status::ok();
  INFER_ASSIGN_OR_RETURN(StepRows sr, step_rows(*c, plan, kv));
  const LayerKv lk = layer_kv(kv, layer);
  const auto* kp = static_cast<const float*>(k.data);
  const auto* vp = static_cast<const float*>(v.data);
  const auto grid = static_cast<unsigned>(plan.n_rows);
  switch (kv.kv_type) {
    case DType::f32: kv_write_kernel<float><<<grid, 256, 0, c->stream()>>>(sr, lk, kp, row_floats(k), vp, row_floats(v)); break;
    case DType::bf16: kv_write_kernel<__nv_bfloat16><<<grid, 256, 0, c->stream()>>>(sr, lk, kp, row_floats(k), vp, row_floats(v)); break;
    case DType::q8_0:
      if (kv.k_rotation > 0)
        kv_write_q8_0_rotated_kernel<<<dim3(grid, static_cast<unsigned>(kv.n_kv_heads)), 128, 2 * kv.head_dim * sizeof(float), c->stream()>>>(
            sr, lk, kp, row_floats(k), vp, row_floats(v));
      else
        kv_write_q8_0_kernel<<<grid, 128, 0, c->stream()>>>(sr, lk, kp, row_floats(k), vp, row_floats(v));
      break;
    default: kv_write_kernel<__half><<<grid, 256, 0, c->stream()>>>(sr, lk, kp, row_floats(k), vp, row_floats(v)); break;
  }
  return check_launch("kv_write");
}

Status attention(Backend& be, const AttentionPlan& plan, const KvView& kv, int layer, const TensorView& q, const TensorView& out) {
  INFER_RETURN_IF_ERROR(check_kv(kv, "attention"));
  INFER_ASSIGN_OR_RETURN(cuda::CudaBackend * c, backend_of(be));
  if (plan.n_rows == 0) return Status::ok();
  INFER_ASSIGN_OR_RETURN(StepRows sr, step_rows(*c, plan, kv));
  const LayerKv lk = layer_kv(kv, layer);
  const dim3 grid(static_cast<unsigned>(plan.n_rows), static_cast<unsigned>(plan.spec.n_head));
  const size_t shared = static_cast<size_t>(kv.head_dim + kTile) * sizeof(float);
  const auto* qp = static_cast<const float*>(q.data);
  auto* op = static_cast<float*>(out.data);
  switch (kv.kv_type) {
    case DType::f32:
      attention_kernel<cuda::BlockF32><<<grid, kTile, shared, c->stream()>>>(sr, lk, qp, row_floats(q), op, row_floats(out), plan.spec.n_head, plan.spec.scale);
      break;
    case DType::q8_0:
      attention_kernel<cuda::BlockQ8_0><<<grid, kTile, shared, c->stream()>>>(sr, lk, qp, row_floats(q), op, row_floats(out), plan.spec.n_head, plan.spec.scale);
      break;
    case DType::bf16:
      attention_kernel<cuda::BlockBF16><<<grid, kTile, shared, c->stream()>>>(sr, lk, qp, row_floats(q), op, row_floats(out), plan.spec.n_head, plan.spec.scale);
      break;
    default:
      attention_kernel<cuda::BlockF16><<<grid, kTile, shared, c->stream()>>>(sr, lk, qp, row_floats(q), op, row_floats(out), plan.spec.n_head, plan.spec.scale);
      break;
  }
  return check_launch("attention");
}

}  // namespace infer::ops::gpu
