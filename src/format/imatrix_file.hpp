// llama.cpp's importance-matrix files, both of them, read and written as llama.cpp does (so that
// llama-quantize reads ours and infer-quantize reads llama-imatrix's).
//
// GGUF (llama-imatrix's default, general.type = "imatrix"):
//   metadata  general.type = "imatrix", imatrix.datasets = [string...], imatrix.chunk_count: u32,
//             imatrix.chunk_size: u32 (tokens per chunk)
//   tensors   per weight, by name: "<weight>.in_sum2" F32 [cols, n_mat] (Σ x², raw) and
//             "<weight>.counts" F32 [1, n_mat] (rows seen)
//
// Legacy .dat (--output-format dat), little-endian:
//   i32 n_entries, then per entry: i32 len, name[len], i32 ncall, i32 nval, f32 values[nval]
//   (values = Σ x² / count · ncall, ncall = ceil(count / chunk_size)); then, optionally,
//   i32 chunk_count, i32 len, dataset[len].
#pragma once

#include <string>

#include "core/imatrix.hpp"
#include "infer/status.hpp"

namespace infer {

// Either format, told apart by the GGUF magic. Every size is checked against the file; a
// malformed_file status names what is wrong. A GGUF file must have the three imatrix.* keys (as
// llama-quantize requires).
Result<Imatrix> read_imatrix(const std::string& path);

// The GGUF file, written atomically. `m` must not come from a legacy file.
Status write_imatrix_gguf(const Imatrix& m, const std::string& path);
// The legacy file: entries that saw no rows are left out, as llama-imatrix does.
Status write_imatrix_dat(const Imatrix& m, const std::string& path);

}  // namespace infer
