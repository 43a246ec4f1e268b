// The paged KV cache's storage: one AlignedBuffer, planned once from a byte budget into one pool
// of blocks per cache group, and the view (core/kv_view.hpp) the model reads and writes through.
// It hands out no blocks: KvCacheManager (kv/kv_manager.hpp) is the one allocator over it.
//
// Groups (vLLM's KVCacheSpec): the layers of a model that share a spec get one pool and, per
// sequence, one block table. A model has a full-attention group (every layer that sees the whole
// context) and a group per sliding window W (Gemma 3's local layers: a query at p sees p - W + 1
// .. p). A windowed group needs only a window per sequence, so its pool is sized for
// max_sequences sequences of one window plus one step each (plus nothing for a long context);
// full-attention groups take the rest of the budget.
//
//   buffer: [group 0: K slots x blocks | V slots x blocks][group 1: K | V] ...
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/aligned_buffer.hpp"
#include "core/dtype.hpp"
#include "core/kv_view.hpp"
#include "infer/status.hpp"

namespace infer {

// One cache group: the layers that share a pool and a block table.
struct KvCacheSpec {
  int sliding_window = 0;       // 0: full attention; W > 0: each query sees the last W positions
  std::vector<int32_t> layers;  // model layers stored in the group's pool, in slot order

  bool windowed() const noexcept { return sliding_window > 0; }
  bool operator==(const KvCacheSpec&) const = default;
};

// The groups of a model whose layer l is windowed when window_layers[l] != 0 (empty: none) with
// window `sliding_window`: the full-attention group first (when a layer sees the whole context),
// then the windowed one.
std::vector<KvCacheSpec> kv_cache_groups(int n_layer, const std::vector<uint8_t>& window_layers, int sliding_window);

struct KvCacheConfig {
  int n_layer = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int block_size = 16;          // tokens per block
  DType kv_type = DType::f16;   // element type: f16 (llama.cpp's default), f32, bf16, q8_0 or f8_e4m3
  // Rotate a Q8_0 cache whose head size is a multiple of 64 (kv_rotation()). Off: INFER_KV_ROTATE=0.
  bool rotate = true;
  uint64_t budget_bytes = 256ull << 20;
  std::vector<KvCacheSpec> groups;  // each layer in exactly one; empty: one full-attention group
  // Sizing of windowed pools: at most this many sequences, each growing by at most
  // max_step_tokens positions per step (larger steps still work while blocks are free).
  int max_sequences = 1;
  int max_step_tokens = 512;

  // Blocks of a windowed group (window W) one sequence can need at once.
  int64_t window_blocks_per_sequence(int window) const noexcept;
  // The groups as create() uses them (`groups`, or one full-attention group of every layer).
  std::vector<KvCacheSpec> resolved_groups() const;
};

// Where the storage comes from: `bytes` zero-filled bytes, 64-byte aligned (the engine passes
// its backend's Backend::allocate_kv; empty: host memory).
using KvAllocator = std::function<Result<AlignedBuffer>(size_t bytes)>;

// The rotation blocks {K, V} (KvView::k_rotation, v_rotation) create() gives a cache: {0, 0}
// unless `rotate`, the type is Q8_0 and the head size a multiple of 64. Then K (and so Q) is
// rotated in the largest power-of-two block that divides the head size, at most kMaxKvRotation,
// and V in blocks of 64: llama.cpp's choice for its quantized caches (K over the whole head where
// it can; V's smaller block measured better there). A Q8_0 block's one scale per 32 elements is
// set by their largest magnitude; the rotation spreads a channel's outliers over the block, so
// the other elements keep their precision: mean KLD against an F16 cache 0.00107 -> 0.00031 on
// SmolLM2-135M, 0.00102 -> 0.00053 on Gemma 3 270M (docs/quantization.md). FP8 caches are not
// rotated: the rotation halved their loss on SmolLM2 but raised it by 60% on Gemma 3.
struct KvRotation {
  int k = 0, v = 0;
};
KvRotation kv_rotation(const KvCacheConfig& config) noexcept;

class KvCache {
 public:
  // Plans the pools from the budget and allocates them with `allocate`: out_of_range when a
  // group gets no block, invalid_argument for a bad shape, type or grouping.
  static Result<KvCache> create(const KvCacheConfig& config, const KvAllocator& allocate = {});
  // The budget create() turns into exactly n_tokens positions of full-attention blocks (for one
  // sequence, or shared by several) plus the windowed pools it plans for max_sequences.
  static uint64_t budget_for_tokens(const KvCacheConfig& config, int64_t n_tokens);

  const KvCacheConfig& config() const noexcept { return config_; }  // groups resolved
  int n_groups() const noexcept { return static_cast<int>(config_.groups.size()); }
  const KvCacheSpec& spec(int g) const noexcept { return config_.groups[static_cast<size_t>(g)]; }
  int64_t n_blocks(int g) const noexcept { return view_.groups[static_cast<size_t>(g)].n_blocks; }
  // Bytes of one block of group g (K and V of all its layers).
  uint64_t bytes_per_block(int g) const noexcept { return block_bytes_[static_cast<size_t>(g)]; }
  uint64_t bytes() const noexcept { return storage_.size(); }
  const KvView& view() const noexcept { return view_; }

  // Copies block `from` of group g (every layer, head and slot) over block `to`.
  void copy_block(int g, int32_t from, int32_t to) noexcept;

 private:
  KvCacheConfig config_;
  std::vector<uint64_t> block_bytes_;
  AlignedBuffer storage_;
  KvView view_;
};

}  // namespace infer
