// infer-quantize's compressed-tensors output: a Hugging Face directory (F32 / F16 / BF16 weights)
// rewritten as the checkpoint llm-compressor writes for the INT8_W8A8, FP8_DYNAMIC, W4A16 and
// W4A16_ASYM presets (and FP8 weight-only, per channel or per tensor), which vLLM serves and
// libinfer loads (docs/huggingface.md#compressed-tensors-checkpoints).
//
// The decoder layers' linear weights (`*_proj.weight` under `layers.`, rows a multiple of 32
// elements) become `weight` codes (I8 / F8_E4M3, same shape) and `weight_scale` (F32, [rows, 1] or
// [1]), quantized by libinfer's quantizers (quant/int8_rows.hpp, quant/fp8_rows.hpp), so the
// checkpoint computes here exactly what `--weight-type` computes on the source. Every other tensor
// is copied as it is; lm_head and the linear weights left float (`--keep`, odd sizes, vision
// towers) are listed in the config's `ignore`. config.json gains the `quantization_config`; the
// other files of the directory (tokenizer, generation config, chat template) are copied.
// w8a16 with a group writes `weight_scale` [rows, groups] (F32) and the config's strategy "group".
// int4 writes pack-quantized weights: `weight_packed` (I32, eight values a word), `weight_scale`
// ([rows, groups], the source's float type), `weight_shape`, and `weight_zero_point` (packed along
// the rows) when asymmetric (quant/int4_groups.hpp). With `w8a16` globs, the matching matrices
// are written as the w8a16 scheme writes them, in a second config group that names them.
// With activation statistics, int8 first applies SmoothQuant and int4 AWQ (compressed_checkpoint.cpp),
// each recording its factors (smoothquant.json, awq.json); int4 also weighs each column's rounding
// error by its importance. int8 rotates the quantized layers' inputs by Walsh-Hadamard matrices,
// online: each weight is stored as W H, and config.json's transform_config names H per module
// (compressed-tensors' deterministic "hadamard" transform, in blocks; one "<module>.h<size>_input.weight"
// tensor holds each size's matrix, as a checkpoint of llm-compressor's shares it).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "hessians.hpp"
#include "infer/status.hpp"

namespace infer::tools {

struct CompressedOptions {
  std::string in, out;  // directories; out must not exist or be empty
  std::string scheme;   // "int8", "w8a16", "fp8", "fp8-tensor", "fp8-dynamic" or "int4"
  std::vector<std::string> keep;  // shell globs on Hugging Face tensor names left unquantized
  // int4: shell globs on Hugging Face tensor names written as W8A16 instead (8-bit int weights, one
  // scale per output row, pack-quantized) in a second config group: a mixed-precision checkpoint.
  std::vector<std::string> w8a16;
  int threads = 1;
  // SmoothQuant (int8 only): each weight's input columns' root mean square over a calibration (the
  // importance matrix's sqrt, by GGUF weight name: "blk.3.attn_q.weight"), and its alpha; null:
  // none. calibration_note goes into smoothquant.json.
  const std::map<std::string, std::vector<float>>* activation_rms = nullptr;
  double smooth_alpha = 0.5;
  std::string calibration_note;
  // int8: rotate each quantized linear layer's input online (transform_config; quant/int8_rows.hpp's
  // i8_input_rotation), its weight stored as W H, after SmoothQuant and before GPTQ.
  bool rotate = true;
  // int4: columns per group (32, 64, 128), zero points or not, AWQ's grid of alphas.
  int64_t group = 128;
  // w8a16: columns per scale (32, 64, 128: compressed-tensors' W8A16 preset takes 128), or 0 for a
  // scale per output row.
  int64_t w8a16_group = 0;
  bool symmetric = true;
  int awq_grid = 20;
  // With these (tools/hessians.hpp, by GGUF weight name): GPTQ (quant/gptq.hpp), after SmoothQuant
  // (int8) or AWQ (int4), alone for w8a16 and the fp8 schemes (activation_rms then serves only to
  // name each layer's input).
  const std::map<std::string, Hessian>* hessians = nullptr;
  // int4 with hessians: GPTQ in activation order with static groups (actorder "weight", quant/gptq.hpp).
  bool actorder = false;
  // Called after each AWQ group's search with its importance-matrix key, the groups done and all.
  std::function<void(const std::string& key, int done, int total)> on_awq_group;
  // Called after each tensor with the input bytes it held and its name.
  std::function<void(uint64_t bytes, const std::string& name)> progress;
};

struct CompressedSummary {
  int tensors = 0, quantized = 0;
  uint64_t bytes_in = 0, bytes_out = 0, elements = 0;
  // The decoder's linear layers alone (quantized or kept): bytes written for them (codes, scales,
  // zero points, shapes) and their weights.
  uint64_t linear_bytes_out = 0, linear_elements = 0;
};

// Is `scheme` one this writer takes?
bool is_compressed_scheme(const std::string& scheme);

Result<CompressedSummary> write_compressed_checkpoint(const CompressedOptions& o);

}  // namespace infer::tools
