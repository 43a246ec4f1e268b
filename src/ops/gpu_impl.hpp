// The CUDA implementations of the ops (cuda/ops_*.cu), called by the ops' entry points after
// their checks, in builds with INFER_CUDA=ON only (INFER_WITH_CUDA). Arguments are valid here;
// what fails is the device (launch errors, out of memory), reported as a Status. Each mirrors the
// arithmetic of its CPU twin (*_cpu.cpp and kernels/cpu/*_ref.cpp) where the device allows, so a
// GPU run compares with the CPU path within a tolerance per dtype (docs/cuda.md says where the
// arithmetic differs).
#pragma once

#include "ops/attention.hpp"
#include "ops/elementwise.hpp"
#include "ops/rope.hpp"

namespace infer::ops::gpu {

// The weight types the CUDA kernels read (matmul and embed).
bool can_read(DType t) noexcept;

Status embed(Backend& be, const TensorView& table, std::span<const int32_t> tokens, const TensorView& out, float scale);
Status rms_norm(Backend& be, const TensorView& x, const TensorView& w, const TensorView& y, float eps);
Status rope_table(Backend& be, const RopeSpec& spec, std::span<const int32_t> positions, const TensorView& table);
Status rope(Backend& be, const TensorView& x, int n_heads, int head_dim, int n_rot, RopeStyle style, const TensorView& table);
Status matmul(Backend& be, const TensorView& w, const TensorView& x, const TensorView& y);
Status add(Backend& be, const TensorView& x, const TensorView& y);
Status add_bias(Backend& be, const TensorView& x, const TensorView& bias);
Status scale(Backend& be, const TensorView& x, float s);
Status softcap(Backend& be, const TensorView& x, float cap);
Status hadamard(Backend& be, const TensorView& x, int block);
Status glu(Backend& be, Activation act, const TensorView& gate, const TensorView& up, const TensorView& out);
Status copy_rows(Backend& be, const TensorView& x, std::span<const int32_t> rows, const TensorView& out);
// Uploads the step's rows (positions, first visible positions, block tables) for kv_write and
// attention, which read them from the backend's scratch.
Status plan_attention(Backend& be, const PagedRows& rows, const KvView& kv);
Status kv_write(Backend& be, const AttentionPlan& plan, const KvView& kv, int layer, const TensorView& k, const TensorView& v);
Status attention(Backend& be, const AttentionPlan& plan, const KvView& kv, int layer, const TensorView& q, const TensorView& out);

}  // namespace infer::ops::gpu
