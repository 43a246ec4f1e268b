// SentencePiece's model file (a serialized `sentencepiece.ModelProto`): the fields libinfer
// reads from a tokenizer.model and writes to hand a vocabulary to libsentencepiece. Only the
// protobuf wire format is used, so libinfer needs neither protobuf nor SentencePiece's generated
// headers.
//
//   ModelProto      1: pieces (repeated SentencePiece)  2: trainer_spec  3: normalizer_spec
//   SentencePiece   1: piece (string)  2: score (float)  3: type (enum, 1 normal .. 6 byte)
//   TrainerSpec     3: model_type (1 unigram, 2 BPE, 3 word, 4 char)  24: treat_whitespace_as_suffix
//                   35: byte_fallback  40..43: unk_id, bos_id, eos_id, pad_id
//   NormalizerSpec  1: name  3: add_dummy_prefix  4: remove_extra_whitespaces  5: escape_whitespaces
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "infer/status.hpp"
#include "format/vocab_fields.hpp"

namespace infer {

struct SentencePieceModel {
  enum ModelType : int32_t { unigram = 1, bpe = 2, word = 3, character = 4 };
  struct Piece {
    std::string text;
    float score = 0.0f;
    TokenType type = TokenType::normal;
  };

  std::vector<Piece> pieces;
  int32_t model_type = unigram;  // the proto's defaults throughout
  bool treat_whitespace_as_suffix = false;
  bool byte_fallback = false;
  int32_t unk_id = 0, bos_id = 1, eos_id = 2, pad_id = -1;
  std::string normalizer_name;
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = true;
  bool escape_whitespaces = true;
};

// Parses a tokenizer.model. Fields not listed above are skipped; a truncated or malformed
// message, or a piece type outside 1..6, is a malformed_file error.
Result<SentencePieceModel> parse_sentencepiece_model(std::string_view bytes);

// Serializes the fields above (every one written explicitly, defaults included).
std::string serialize_sentencepiece_model(const SentencePieceModel& model);

// The vocabulary llama.cpp's converter (convert_hf_to_gguf.py, Llama family) writes to GGUF for
// this tokenizer.model: each piece's text and score, its type from the processor (unknown,
// control, unused, byte, else normal), BOS/EOS/UNK/PAD ids from the trainer spec, add_bos_token
// true and add_eos_token false. User-defined pieces are what Hugging Face lists as added tokens:
// the converter types them control when they look special ("<|...|>") and user-defined
// otherwise, with score -1000. add_space_prefix is written only when the model has no dummy
// prefix. Fails (unsupported) for models that are not BPE or that put whitespace after words.
Result<VocabFields> vocab_fields_from_sentencepiece(const SentencePieceModel& model);

// convert_hf_to_gguf.py's does_token_look_special: <pad>, <mask>, <2mass>, [@BOS@], <|...|>,
// <｜...｜>, <unused...>. Such added tokens are made control tokens even when not marked special.
bool token_looks_special(std::string_view text);

}  // namespace infer
