// The CPU implementations of the ops (the *_cpu.cpp files), called by the ops' entry points after
// their checks. Arguments are valid here; nothing fails but allocation (std::bad_alloc).
#pragma once

#include "ops/attention.hpp"
#include "ops/elementwise.hpp"
#include "ops/rope.hpp"

namespace infer {
class ThreadPool;
}

namespace infer::ops::cpu {

void embed(const TensorView& table, std::span<const int32_t> tokens, const TensorView& out, float scale);
void rms_norm(ThreadPool& pool, const TensorView& x, const float* w, int64_t n, const TensorView& y, float eps);
void rope_table(const RopeSpec& spec, std::span<const int32_t> positions, const TensorView& table);
void rope(const TensorView& x, int n_heads, int head_dim, int n_rot, RopeStyle style, const TensorView& table);
void matmul(ThreadPool& pool, const TensorView& w, const TensorView& x, const TensorView& y);
void add(const TensorView& x, const TensorView& y);
void add_bias(const TensorView& x, const float* bias);
void scale(const TensorView& x, float s);
void softcap(const TensorView& x, float cap);
void hadamard(ThreadPool& pool, const TensorView& x, int block);
void glu(ThreadPool& pool, Activation act, const TensorView& gate, const TensorView& up, const TensorView& out);
void copy_rows(const TensorView& x, std::span<const int32_t> rows, const TensorView& out);
Status plan_attention(ThreadPool& pool, AttentionPlan& plan);
void kv_write(ThreadPool& pool, const KvView& kv, int layer, const PagedRows& rows, const TensorView& k, const TensorView& v);
void attention(ThreadPool& pool, const AttentionPlan& plan, const KvView& kv, int layer, const PagedRows& rows,
               const TensorView& q, const TensorView& out);

}  // namespace infer::ops::cpu
