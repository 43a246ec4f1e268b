// Paged causal self-attention over a step's rows, and the write of their K/V into the cache.
//
// A step's rows come from any number of sequences; each sequence reads its K/V through its block
// tables (SequenceTables: one per KV cache group). Row r of sequence s at position p attends to
// positions [first, p] of s in the layer (first = 0, or p - window + 1 in a layer of a
// sliding-window group), so its result never depends on the other rows (batch invariance).
//
// Per step: plan() checks the rows against the cache (every table covers the positions its rows
// name, block ids inside their pool) and groups them by sequence; per layer: kv_write() then
// attention(), which take the plan as proof that the rows were checked.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.hpp"
#include "core/kv_view.hpp"

namespace infer::ops {

// The rows of a step as attention sees them: position and sequence of each row.
struct PagedRows {
  std::span<const int32_t> positions;
  std::span<const int32_t> seq;                 // index into sequences
  std::span<const SequenceTables> sequences;
};

struct AttentionSpec {
  int n_head = 0;
  int n_kv_heads = 0;  // divides n_head (grouped-query attention)
  int head_dim = 0;
  float scale = 1.0f;  // applied to q·k (1 when the model scales Q itself)
};

class AttentionPlan {
 public:
  // Checks the rows (invalid_argument naming the problem) and groups them by sequence, up to
  // kRowsPerGroup consecutive rows of one sequence per group (each K/V tile is then read once per
  // group). Call once per step, before kv_write() and attention().
  static constexpr int kRowsPerGroup = 16;
  Status plan(Backend& be, const PagedRows& rows, const KvView& kv, const AttentionSpec& spec);

  // Internal to the implementations.
  AttentionSpec spec;
  std::vector<int32_t> rows, n_ctx;  // grouped row order
  std::vector<int32_t> first;        // [KV cache group][row in grouped order]: first visible position
  std::vector<int32_t> group_begin, group_seq;  // group g: rows[begin[g], begin[g+1])
  int64_t scratch_stride = 0;
  int head_parts = 1;  // query heads of a group split in head_parts tasks
  int ctx_chunks = 0;  // > 0: each (group, part) split further by context chunk (kAttentionChunk)
  int64_t partial_stride = 0;  // floats of one (group, chunk)'s partial states
  int64_t n_rows = 0;  // rows planned
  mutable AlignedBuffer scratch;  // working memory of attention() (one step at a time)
};

// Stores every row's K and V (k, v: [n_kv_heads * head_dim, rows]) at its position in `layer`.
Status kv_write(Backend& be, const AttentionPlan& plan, const KvView& kv, int layer, const PagedRows& rows, const TensorView& k, const TensorView& v);
// out row r = attention of q row r ([n_head * head_dim, rows]) over its sequence's cache in `layer`.
Status attention(Backend& be, const AttentionPlan& plan, const KvView& kv, int layer, const PagedRows& rows,
                 const TensorView& q, const TensorView& out);

}  // namespace infer::ops
