#include "ops/attention.hpp"

#include <string>

#include "core/profile.hpp"
#include "core/status_macros.hpp"
#include "ops/cpu_impl.hpp"
#include "ops/gpu_impl.hpp"
#include "ops/op_util.hpp"

namespace infer::ops {
namespace {

// The table covers `pos`, and every block from `first` to `pos` is a block of the pool.
Status check_table(std::span<const int32_t> table, const KvView& kv, int64_t pool, int32_t first, int32_t pos,
                   const char* which) {
  if (static_cast<size_t>(pos / kv.block_size) >= table.size())
    return invalid_argument("batch: position " + std::to_string(pos) + " has no KV block" + which);
  for (size_t i = static_cast<size_t>(first / kv.block_size); i <= static_cast<size_t>(pos / kv.block_size); ++i)
    if (table[i] < 0 || table[i] >= pool) return invalid_argument(std::string("batch: KV block id out of range") + which);
  return Status::ok();
}

Status check_rows(const PagedRows& rows, const KvView& kv, const AttentionSpec& spec) {
  if (rows.seq.size() != rows.positions.size()) return invalid_argument("batch: per-row arrays differ in length");
  if (kv.n_kv_heads != spec.n_kv_heads || kv.head_dim != spec.head_dim || kv.block_size <= 0)
    return invalid_argument("batch: KV cache shape does not match the model");
  if (spec.n_kv_heads <= 0 || spec.n_head % spec.n_kv_heads != 0)
    return invalid_argument("attention: " + std::to_string(spec.n_kv_heads) + " KV heads do not divide " +
                            std::to_string(spec.n_head) + " heads");
  if (kv.n_groups <= 0 || kv.n_groups > kMaxKvGroups) return invalid_argument("batch: KV cache has no cache group");
  for (size_t r = 0; r < rows.positions.size(); ++r) {
    if (rows.seq[r] < 0 || static_cast<size_t>(rows.seq[r]) >= rows.sequences.size())
      return invalid_argument("batch: row " + std::to_string(r) + " names no sequence");
    const int32_t pos = rows.positions[r];
    if (pos < 0) return invalid_argument("batch: negative position " + std::to_string(pos));
    const SequenceTables& s = rows.sequences[static_cast<size_t>(rows.seq[r])];
    for (int g = 0; g < kv.n_groups; ++g) {
      const KvGroupView& gv = kv.groups[static_cast<size_t>(g)];
      const int32_t first = gv.sliding_window > 0 && pos >= gv.sliding_window ? pos - gv.sliding_window + 1 : 0;
      INFER_RETURN_IF_ERROR(check_table(s.tables[static_cast<size_t>(g)], kv, gv.n_blocks, first, pos,
                                        gv.sliding_window > 0 ? " (sliding-window layers)" : ""));
    }
  }
  return Status::ok();
}

Status check_layer(const AttentionPlan& plan, const KvView& kv, int layer, const PagedRows& rows) {
  if (plan.n_rows != static_cast<int64_t>(rows.positions.size()))
    return invalid_argument("attention: the plan was made for " + std::to_string(plan.n_rows) + " rows, not " +
                            std::to_string(rows.positions.size()));
  const size_t n_layers = kv.layer_group.empty() ? SIZE_MAX : kv.layer_group.size();
  if (layer < 0 || static_cast<size_t>(layer) >= n_layers) return invalid_argument("attention: layer " + std::to_string(layer) + " out of range");
  if (kv.group(layer) >= kv.n_groups || static_cast<size_t>(kv.group(layer) + 1) * plan.rows.size() > plan.first.size())
    return invalid_argument("attention: layer " + std::to_string(layer) + "'s cache group is not the plan's");
  return Status::ok();
}

}  // namespace

Status AttentionPlan::plan(Backend& be, const PagedRows& r, const KvView& kv, const AttentionSpec& s) {
  const OpTimer timer("attention_plan");
  n_rows = -1;  // unusable until the checks pass
  INFER_RETURN_IF_ERROR(check_rows(r, kv, s));
  spec = s;
  rows.clear();
  n_ctx.clear();
  group_begin.clear();
  group_seq.clear();
  const int32_t n = static_cast<int32_t>(r.positions.size());
  // Rows of each sequence in batch order (increasing positions), cut into groups.
  for (int32_t sq = 0; sq < static_cast<int32_t>(r.sequences.size()); ++sq) {
    int in_group = 0;
    for (int32_t i = 0; i < n; ++i) {
      if (r.seq[static_cast<size_t>(i)] != sq) continue;
      if (in_group == 0) {
        group_begin.push_back(static_cast<int32_t>(rows.size()));
        group_seq.push_back(sq);
      }
      const int32_t pos = r.positions[static_cast<size_t>(i)];
      rows.push_back(i);
      n_ctx.push_back(pos + 1);
      in_group = (in_group + 1) % kRowsPerGroup;
    }
  }
  group_begin.push_back(static_cast<int32_t>(rows.size()));
  // The first position each row sees, per cache group (0 in a full-attention group).
  first.resize(static_cast<size_t>(kv.n_groups) * rows.size());
  for (int g = 0; g < kv.n_groups; ++g) {
    const int w = kv.groups[static_cast<size_t>(g)].sliding_window;
    for (size_t j = 0; j < rows.size(); ++j) {
      const int32_t pos = n_ctx[j] - 1;
      first[static_cast<size_t>(g) * rows.size() + j] = w > 0 && pos >= w ? pos - w + 1 : 0;
    }
  }
#if INFER_WITH_CUDA
  if (be.device() == Device::cuda) {
    INFER_RETURN_IF_ERROR(gpu::plan_attention(be, r, kv));
    n_rows = n;
    return Status::ok();
  }
#endif
  if (be.device() != Device::cpu) return no_kernel(be, "attention");
  INFER_RETURN_IF_ERROR(cpu::plan_attention(cpu_pool(be), *this));
  n_rows = n;
  return Status::ok();
}

namespace {

struct Operand {
  const char* name;
  const TensorView& t;
};

// The checks kv_write and attention share: the layer against the plan, two F32 operands of one
// shape [width, rows of the plan] on the backend's device, and a kernel for the device.
Status check_step_operands(Backend& be, const AttentionPlan& plan, const KvView& kv, int layer, const PagedRows& rows,
                           const char* op, Operand a, Operand b, int64_t width) {
  INFER_RETURN_IF_ERROR(check_layer(plan, kv, layer, rows));
  INFER_RETURN_IF_ERROR(check_f32(be, op, a.name, a.t));
  INFER_RETURN_IF_ERROR(check_f32(be, op, b.name, b.t));
  INFER_RETURN_IF_ERROR(check_same_shape(op, a.t, b.t));
  if (a.t.shape[0] != width || a.t.shape[1] != plan.n_rows)
    return invalid_argument(std::string(op) + ": " + a.name + " " + shape_string(a.t) + " does not match the heads (" +
                            std::to_string(width) + " values) or the " + std::to_string(plan.n_rows) + " rows");
  if (be.device() != Device::cpu && be.device() != Device::cuda) return no_kernel(be, op);
  return Status::ok();
}

}  // namespace

Status kv_write(Backend& be, const AttentionPlan& plan, const KvView& kv, int layer, const PagedRows& rows,
                const TensorView& k, const TensorView& v) {
  const OpTimer timer("kv_write");
  INFER_RETURN_IF_ERROR(check_step_operands(be, plan, kv, layer, rows, "kv_write", {"k", k}, {"v", v},
                                             static_cast<int64_t>(kv.n_kv_heads) * kv.head_dim));
#if INFER_WITH_CUDA
  if (be.device() == Device::cuda) return gpu::kv_write(be, plan, kv, layer, k, v);
#endif
  if (be.device() != Device::cpu) return no_kernel(be, "kv_write");
  cpu::kv_write(cpu_pool(be), kv, layer, rows, k, v);
  return Status::ok();
}

Status attention(Backend& be, const AttentionPlan& plan, const KvView& kv, int layer, const PagedRows& rows,
                 const TensorView& q, const TensorView& out) {
  const OpTimer timer("attention");
  INFER_RETURN_IF_ERROR(check_step_operands(be, plan, kv, layer, rows, "attention", {"q", q}, {"out", out},
                                             static_cast<int64_t>(plan.spec.n_head) * plan.spec.head_dim));
#if INFER_WITH_CUDA
  if (be.device() == Device::cuda) return gpu::attention(be, plan, kv, layer, q, out);
#endif
  if (be.device() != Device::cpu) return no_kernel(be, "attention");
  cpu::attention(cpu_pool(be), plan, kv, layer, rows, q, out);
  return Status::ok();
}

}  // namespace infer::ops
