// The safetensors reader (Hugging Face's tensor file format), hardened like the GGUF one: the file
// is untrusted input.
//
//   bytes 0..8        N, the header length, u64 little-endian (at most kMaxHeaderBytes)
//   bytes 8..8+N      a JSON object: "__metadata__": {string: string} (optional), and per tensor
//                     "name": {"dtype": "BF16", "shape": [rows, cols], "data_offsets": [begin, end]}
//   bytes 8+N..       the data section; offsets are relative to its start
//
// Rules kept: the header fits the file; the JSON is an object of objects with exactly these
// fields; dtypes are known; every dimension and the byte size go through checked_math; each
// tensor's [begin, end) lies inside the data section, begin <= end, and holds exactly numel x
// element-size bytes; sorted by offset the tensors tile the data section from 0 to its end with no
// gap and no overlap (as the format's specification requires); no duplicate names. Errors name the
// file, the tensor or field, and what was expected.
//
// Element types beyond the ones libinfer computes with (U8, F8_E4M3: compressed-tensors
// checkpoints) are read and described here; what to do with them is the caller's business.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/dtype.hpp"
#include "core/mapped_file.hpp"
#include "infer/status.hpp"

namespace infer::safetensors {

inline constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // 100 MB, as the reference implementation
inline constexpr int kMaxDims = 8;

enum class Dtype { f32, f16, bf16, i8, u8, i32, i64, f8_e4m3, f64 };

// "F32", "BF16", "F8_E4M3", ... as the format spells them.
const char* dtype_name(Dtype t) noexcept;
uint32_t dtype_size(Dtype t) noexcept;
// Element i of F32, F16, BF16 or F64 data (t one of those), as float: the readers' norms and
// transform matrices (llm-compressor stores its transforms' matrices in F64).
float element_as_f32(DType t, const uint8_t* p, int64_t i) noexcept;

struct Tensor {
  std::string name;
  Dtype dtype = Dtype::f32;
  std::vector<int64_t> shape;  // row-major, outermost first (as the file)
  uint64_t begin = 0, end = 0;  // byte range in the data section
  const uint8_t* data = nullptr;  // begin's address in the mapped file

  uint64_t nbytes() const { return end - begin; }
};

struct File {
  std::shared_ptr<const MappedFile> file;
  uint64_t header_bytes = 0;  // 8 + N: where the data section starts
  std::vector<std::pair<std::string, std::string>> metadata;  // "__metadata__", in key order
  std::vector<Tensor> tensors;  // sorted by data offset
};

// Parses a safetensors file held in memory or mapped. malformed_file (with the file's path) on any
// rule above; unsupported for a dtype that is valid in the format but unknown here.
Result<File> read(MappedFile file);
Result<File> read_file(const std::string& path, MapMode mode = MapMode::automatic);

// The shard files of a sharded checkpoint's index (model.safetensors.index.json: {"metadata":
// {...}, "weight_map": {tensor: shard file}}): each shard once, in first-mention order, and the
// tensor → shard map. A shard name must be a plain file name (no '/', not "." or "..").
struct ShardIndex {
  std::vector<std::string> shards;
  std::vector<std::pair<std::string, std::string>> weight_map;
};
Result<ShardIndex> parse_shard_index(std::string_view json, const std::string& path);

// Writes a safetensors file: the tensors in the order added, each at the next offset (so they tile
// the data section), the header padded with spaces to a multiple of 8 bytes, `metadata` as
// "__metadata__" when not empty. Each tensor's bytes are produced while the file is written (one
// tensor in memory at a time): fill gets a buffer of exactly its size. Atomic: "<path>.tmp", then
// renamed; an error (a failed fill, a full disk) leaves no file.
class Writer {
 public:
  using Fill = std::function<Status(std::span<uint8_t> dst)>;
  // Checks: a non-empty name not added before, at most kMaxDims dimensions, the byte size
  // (checked arithmetic) within 2^48.
  Status add_tensor(std::string name, Dtype dtype, std::vector<int64_t> shape, Fill fill);
  std::vector<std::pair<std::string, std::string>>& metadata() noexcept { return metadata_; }
  Status write(const std::string& path) const;
  uint64_t data_bytes() const noexcept { return data_bytes_; }

 private:
  struct Pending {
    std::string name;
    Dtype dtype;
    std::vector<int64_t> shape;
    uint64_t nbytes;
    Fill fill;
  };
  std::vector<Pending> tensors_;
  std::vector<std::pair<std::string, std::string>> metadata_;
  uint64_t data_bytes_ = 0;
};

}  // namespace infer::safetensors
