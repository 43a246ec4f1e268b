// Causal self-attention of one query row over a sequence's paged KV cache, computed as llama.cpp's
// CPU flash attention computes it for a batch of 64 rows or more (the tiled path of
// ggml_compute_forward_flash_attn_ext; smaller batches take another path there, so llama.cpp is
// not batch-invariant; this is). Per head, over tiles of 64 positions [64j, 64j + 64) ∩ [0, n_ctx):
//
//   s_t = scale * (q · k_t), the dot one fused chain over the head dimension in index order;
//   m = max(m_old, max_t s_t); if m > m_old: acc *= exp(m_old - m), sum *= exp(m_old - m)
//     (std::exp; m starts at -inf);
//   p_t = exp_ggml(s_t - m) (kernels/cpu/exp_approx.hpp); sum += the tile's Σp in float64, taken
//     8 at a time through the tree ((p0+p4)+(p2+p6))+((p1+p5)+(p3+p7)) and rounded to float;
//   acc_d = fma(v_t,d, p_t, acc_d) for t in order;
// The tiles are taken in chunks of kAttentionChunk positions [512c, 512c + 512), each chunk from a
// fresh state (m = -inf, sum = 0, acc = 0); the chunks' states are then folded in order, as
// ggml_flash_attn_ext_reduce_partials folds its per-thread chunks (the first non-empty chunk is
// taken as it is; then m = max(m_f, m_c), acc_f = acc_f * exp(m_f - m) + acc_c * exp(m_c - m),
// sum likewise), and out = acc * (1 / sum). A context of at most one chunk is therefore exactly
// llama.cpp's tiled flash attention; a longer one can be split over threads by chunk
// (attention_rows with `chunk`, then attention_combine) with the same bits as one thread
// computing it alone. K and V rows are read as floats (F16 converted exactly). A rotated cache
// (KvView::k_rotation, v_rotation) holds H k and H v: q is rotated alike before its dots (into
// scratch) and out is rotated back, so the formulas above hold for the rotated q, k and v.
// The result depends only on q and this sequence's cache, never on other rows of the batch nor
// on the number of threads.
// Compiled once per ISA (core/isa_variants.hpp); every variant gives the same bits.
#pragma once

#include <cstdint>
#include <span>

#include "core/kv_view.hpp"

namespace infer {

// Positions per tile: ggml's GGML_FA_TILE_KV. The tile boundaries decide where the running max
// is updated, so they are part of the result.
inline constexpr int kAttentionTile = 64;
// Positions per chunk (a multiple of the tile): the chunk boundaries decide where partial states
// are folded, so they are part of the result too; 512 keeps every context llama.cpp's reference
// tests use (up to 512) within one chunk.
inline constexpr int kAttentionChunk = 512;

struct AttentionShape {
  int n_head = 0;
  int n_kv_heads = 0;  // n_head is a multiple (grouped-query attention)
  int head_dim = 0;
  float scale = 1.0f;  // usually 1/sqrt(head_dim)
};

// Floats of scratch attention_row needs (independent of the context length).
int64_t attention_scratch_floats(int head_dim) noexcept;

// For each head h: out_h = softmax(scale * q_h · K_t, first <= t < n_ctx) · V_t as above, reading
// K/V of `layer` through the sequence's block table. Positions before `first` (outside a sliding
// window) are masked, as ggml masks them: tiles stay aligned to multiples of 64 positions, tiles
// wholly before `first` are skipped and the blocks holding them are never read (they may have
// been handed back: table entry -1). `scratch` holds attention_scratch_floats(head_dim).
void attention_row(const float* q, const AttentionShape& shape, const KvView& kv, int layer,
                   std::span<const int32_t> blocks, int32_t n_ctx, float* out, float* scratch,
                   int32_t first = 0) noexcept;

// The same computation for several query rows of one sequence at once, every row's result
// bit-identical to attention_row's: each K/V tile is loaded (and converted) once for all rows and
// all query heads that share a KV head, instead of once per row and head. Row j reads its query
// at q + rows[j] * q_stride, sees positions [first[j], n_ctx[j]) and writes out + rows[j] *
// out_stride. `scratch` holds attention_rows_scratch_floats(shape, n_rows). Only query heads
// [head_begin, head_end) are computed (head_end < 0: all), so that heads can be spread over
// threads when there are few rows.
//
// chunk >= 0 computes only the tiles of chunk `chunk` and, instead of writing out, stores each
// (row j, query head h)'s state {m, sum, acc[head_dim]} at partials + (j * n_head + h) *
// (head_dim + 2); attention_combine() then folds the chunks 0..n_chunks-1 of each (row, head) in
// order (chunk c's partials at partials + c * chunk_stride) and writes out. A long context is so
// spread over threads with the result of chunk < 0. `scratch` of attention_combine: head_dim floats.
struct AttentionRows {
  const float* q = nullptr;
  int64_t q_stride = 0;
  float* out = nullptr;
  int64_t out_stride = 0;
  const int32_t* rows = nullptr;   // n_rows row indices
  const int32_t* n_ctx = nullptr;  // per row
  const int32_t* first = nullptr;  // per row (first visible position)
  int n_rows = 0;
};
int64_t attention_rows_scratch_floats(const AttentionShape& shape, int n_rows) noexcept;
void attention_rows(const AttentionShape& shape, const KvView& kv, int layer, std::span<const int32_t> blocks,
                    const AttentionRows& rows, float* scratch, int head_begin = 0, int head_end = -1, int chunk = -1,
                    float* partials = nullptr) noexcept;
void attention_combine(const AttentionShape& shape, const KvView& kv, const AttentionRows& rows, const float* partials,
                       int n_chunks, int64_t chunk_stride, float* scratch, int head_begin = 0, int head_end = -1) noexcept;
// Floats of one chunk's partials for n_rows rows.
int64_t attention_partial_floats(const AttentionShape& shape, int n_rows) noexcept;

// Stores one token's K and V (n_kv_heads * head_dim floats each) at `pos` of a sequence (each
// head's row rotated first in a rotated cache: H k and H v, kernels/cpu/hadamard.hpp).
void kv_store(const KvView& kv, int layer, std::span<const int32_t> blocks, int32_t pos, const float* k,
              const float* v) noexcept;

}  // namespace infer
