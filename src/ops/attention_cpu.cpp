#include <algorithm>

#include "core/thread_pool.hpp"
#include "kernels/cpu/attention.hpp"
#include "ops/cpu_impl.hpp"
#include "ops/op_util.hpp"

namespace infer::ops::cpu {

Status plan_attention(ThreadPool& pool, AttentionPlan& plan) {
  const AttentionShape shape{plan.spec.n_head, plan.spec.n_kv_heads, plan.spec.head_dim, plan.spec.scale};
  const int threads = std::max(1, pool.size());
  plan.scratch_stride = attention_rows_scratch_floats(shape, AttentionPlan::kRowsPerGroup);
  // Few row groups (decoding a few sequences): split each group's heads into parts as well, so
  // that every thread has work. Parts follow KV heads first, so K/V tiles stay shared.
  const int n_groups = static_cast<int>(plan.group_seq.size());
  plan.head_parts = 1;
  plan.ctx_chunks = 0;
  const int32_t longest = plan.n_ctx.empty() ? 0 : *std::max_element(plan.n_ctx.begin(), plan.n_ctx.end());
  const int chunks = (longest + kAttentionChunk - 1) / kAttentionChunk;
  if (n_groups > 0 && n_groups * shape.n_kv_heads < threads && chunks >= 2) {
    // Too few (sequence, KV head) pairs for the threads, and a long context: one task per KV head
    // and chunk of the context, so that every K/V block is still read once; the chunks' states
    // are folded afterwards (attention_combine), with the bits of one task doing it all.
    plan.head_parts = shape.n_kv_heads;
    plan.ctx_chunks = chunks;
  } else if (n_groups > 0 && n_groups < threads) {
    // The fewest parts that give every thread a task; whole KV heads per part when possible.
    const int want = (threads + n_groups - 1) / n_groups;
    int best = 0;
    for (int p = want; p <= shape.n_head && best == 0; ++p)
      if (shape.n_kv_heads % p == 0 || (p % shape.n_kv_heads == 0 && shape.n_head % p == 0)) best = p;
    plan.head_parts = best > 0 ? best : 1;
  }
  const int64_t tasks = static_cast<int64_t>(n_groups) * plan.head_parts * std::max(1, plan.ctx_chunks);
  plan.partial_stride = attention_partial_floats(shape, AttentionPlan::kRowsPerGroup);
  const int64_t partials = plan.ctx_chunks > 0 ? static_cast<int64_t>(n_groups) * plan.ctx_chunks * plan.partial_stride : 0;
  const size_t bytes = static_cast<size_t>(plan.scratch_stride * tasks + partials) * sizeof(float);
  if (plan.scratch.size() < bytes) {
    auto b = AlignedBuffer::allocate(bytes);
    if (!b.ok()) return b.status();
    plan.scratch = std::move(b).value();
  }
  return Status::ok();
}

void kv_write(ThreadPool& pool, const KvView& kv, int layer, const PagedRows& rows, const TensorView& k, const TensorView& v) {
  // Every row has its own (sequence, position) slot: rows split over the threads write apart.
  pool.parallel_for(rows.positions.size(), [&](size_t begin, size_t end) {
    for (size_t r = begin; r < end; ++r) {
      const SequenceTables& seq = rows.sequences[static_cast<size_t>(rows.seq[r])];
      kv_store(kv, layer, seq.table(kv, layer), rows.positions[r], row_f32(k, static_cast<int64_t>(r)),
               row_f32(v, static_cast<int64_t>(r)));
    }
  });
}

void attention(ThreadPool& pool, const AttentionPlan& plan, const KvView& kv, int layer, const PagedRows& rows,
               const TensorView& q, const TensorView& out) {
  const AttentionShape shape{plan.spec.n_head, plan.spec.n_kv_heads, plan.spec.head_dim, plan.spec.scale};
  const int32_t* first = plan.first.data() + static_cast<size_t>(kv.group(layer)) * plan.rows.size();
  float* scratch = plan.scratch.as<float>();
  const int parts = plan.head_parts, heads_per_part = shape.n_head / parts;
  const int chunks = std::max(1, plan.ctx_chunks);
  const size_t n_groups = plan.group_seq.size();
  float* partials = scratch + plan.scratch_stride * static_cast<int64_t>(n_groups) * parts * chunks;
  auto group_rows = [&](size_t g) {
    const int32_t lo = plan.group_begin[g], hi = plan.group_begin[g + 1];
    AttentionRows a;
    a.q = row_f32(q, 0);
    a.q_stride = row_floats(q);
    a.out = row_f32(out, 0);
    a.out_stride = row_floats(out);
    a.rows = plan.rows.data() + lo;
    a.n_ctx = plan.n_ctx.data() + lo;
    a.first = first + lo;
    a.n_rows = hi - lo;
    return a;
  };
  // Tasks: (group, head part, chunk), the chunk fastest.
  pool.parallel_for(
      n_groups * static_cast<size_t>(parts * chunks),
      [&](size_t begin, size_t end) {
        for (size_t task = begin; task < end; ++task) {
          const size_t g = task / static_cast<size_t>(parts * chunks);
          const int part = static_cast<int>(task / static_cast<size_t>(chunks) % static_cast<size_t>(parts));
          const int chunk = plan.ctx_chunks > 0 ? static_cast<int>(task % static_cast<size_t>(chunks)) : -1;
          const SequenceTables& seq = rows.sequences[static_cast<size_t>(plan.group_seq[g])];
          float* part_out = chunk >= 0 ? partials + (static_cast<int64_t>(g) * chunks + chunk) * plan.partial_stride : nullptr;
          attention_rows(shape, kv, layer, seq.table(kv, layer), group_rows(g), scratch + static_cast<int64_t>(task) * plan.scratch_stride,
                         part * heads_per_part, (part + 1) * heads_per_part, chunk, part_out);
        }
      },
      1);
  if (plan.ctx_chunks == 0) return;
  pool.parallel_for(
      n_groups * static_cast<size_t>(parts),
      [&](size_t begin, size_t end) {
        for (size_t task = begin; task < end; ++task) {
          const size_t g = task / static_cast<size_t>(parts);
          const int part = static_cast<int>(task % static_cast<size_t>(parts));
          attention_combine(shape, kv, group_rows(g), partials + static_cast<int64_t>(g) * chunks * plan.partial_stride, chunks,
                            plan.partial_stride, scratch + static_cast<int64_t>(task) * plan.scratch_stride, part * heads_per_part,
                            (part + 1) * heads_per_part);
        }
      },
      1);
}

}  // namespace infer::ops::cpu
