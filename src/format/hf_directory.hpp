// Hugging Face model directories as ModelFiles: config.json, model.safetensors (or the shards of
// model.safetensors.index.json), and the tokenizer files, translated to the GGUF keys and tensor
// names llama.cpp's convert_hf_to_gguf.py writes, so that the model families (src/model/) read a
// directory exactly as they read the GGUF converted from it.
//
// The knowledge of each family's Hugging Face names lives in one table in hf_directory.cpp (the
// format layer cannot see src/model/, and the translation is the converter's job, not the
// model's): its architectures, the name of the norm after attention, whether Q/K rows are
// permuted to GGUF's rotary order (Llama) and whether norms carry +1 (Gemma).
#pragma once

#include <string>
#include <string_view>

#include "core/mapped_file.hpp"
#include "format/metadata.hpp"
#include "format/model_file.hpp"
#include "infer/status.hpp"

namespace infer::hf {

// Metadata key (bool) set on a compressed-tensors checkpoint whose scheme quantizes activations to
// FP8: its FP8 weights compute as W8A8-FP8 (DType::f8_w8a8), as FP8 hardware computes them.
inline constexpr std::string_view kFp8ActivationsKey = "libinfer.compressed_tensors.fp8_activations";
// Metadata key (bool) set on a compressed-tensors checkpoint whose 8-bit int weights come without
// quantized activations (the W8A16 scheme): they compute weight-only (DType::i8_w8a16), not as
// W8A8 (DType::i8_row).
inline constexpr std::string_view kInt8WeightOnlyKey = "libinfer.compressed_tensors.int8_weight_only";

// Opens the directory. Errors name the file and the field: a missing config.json or weights file,
// an architecture that is not supported, a tensor name that maps to nothing, a dtype libinfer
// cannot compute with, and every rule of the safetensors reader.
Result<ModelFile> open_directory(const std::string& dir, MapMode mode = MapMode::automatic);

// The tokenizer files of `dir` as tokenizer.* keys (and general.sampling.* from
// generation_config.json), added to `md` whose general.architecture is set:
//   tokenizer.model (SentencePiece) when present, as convert_hf_to_gguf.py's
//     _set_vocab_sentencepiece writes it ("llama" model);
//   otherwise tokenizer.json: a byte-level BPE model ("gpt2" model, tokenizer.ggml.pre
//     recognised from the pre-tokenizer: llama-bpe, qwen2, smollm, gpt-2), or a SentencePiece-style
//     one (byte fallback: "llama" model, scores from the merge ranks);
//   tokenizer_config.json: bos/eos/unk/pad tokens, add_bos_token/add_eos_token, chat_template
//     (or chat_template.jinja);
//   generation_config.json: temperature, top_p, top_k (general.sampling.temp/top_p/top_k, the
//     keys llama.cpp defines), eos_token_id when tokenizer_config names none.
Status read_tokenizer(const std::string& dir, Metadata& md);

}  // namespace infer::hf
