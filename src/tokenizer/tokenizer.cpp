#include "tokenizer/tokenizer.hpp"

#include "core/mapped_file.hpp"
#include "core/status_macros.hpp"
#include "tokenizer/bpe_tokenizer.hpp"
#include "format/sentencepiece_model.hpp"
#include "tokenizer/sentencepiece_tokenizer.hpp"
#include "tokenizer/vocab.hpp"
#include "tokenizer/wordpiece_tokenizer.hpp"

namespace infer {

Tokenizer::Tokenizer(const Info& info)
    : vocab_size_(info.vocab_size),
      bos_id_(info.bos),
      eos_id_(info.eos),
      eot_id_(info.eot),
      add_bos_(info.add_bos),
      add_eos_(info.add_eos),
      add_space_prefix_(info.add_space_prefix) {}

Tokenizer::~Tokenizer() = default;

std::string Tokenizer::decode(std::span<const int32_t> ids, DecodeOptions options) const {
  // llama.cpp's llama_detokenize: the first piece loses one leading space (the one encoding
  // added) unless a BOS starts the sequence and is dropped.
  bool strip_space = add_space_prefix_ && !options.keep_leading_space;
  if (options.remove_special && add_bos_ && !ids.empty() && ids.front() == bos_id_) {
    strip_space = false;
    ids = ids.subspan(1);
  }
  if (options.remove_special && add_eos_ && !ids.empty() && ids.back() == eos_id_) ids = ids.first(ids.size() - 1);

  std::string out;
  for (const int32_t id : ids) {
    std::string piece = token_to_bytes(id, options.render_special);
    const size_t skip = strip_space && !piece.empty() && piece.front() == ' ' ? 1 : 0;
    out.append(piece, skip);
    strip_space = false;
  }
  return out;
}

Result<std::unique_ptr<Tokenizer>> load_tokenizer(const Metadata& metadata) {
  INFER_ASSIGN_OR_RETURN(VocabFields fields, read_vocab_fields(metadata));
  if (fields.model == "llama") {
    INFER_ASSIGN_OR_RETURN(Vocab vocab, build_sentencepiece_vocab(std::move(fields)));
    return make_sentencepiece_tokenizer(std::move(vocab));
  }
  if (fields.model == "gpt2" || fields.model == "gemma4") {
    INFER_ASSIGN_OR_RETURN(Vocab vocab, build_bpe_vocab(std::move(fields)));
    return make_bpe_tokenizer(std::move(vocab));
  }
  if (fields.model == "bert") {
    INFER_ASSIGN_OR_RETURN(Vocab vocab, build_wordpiece_vocab(std::move(fields)));
    return make_wordpiece_tokenizer(std::move(vocab));
  }
  return unsupported("tokenizer.ggml.model '" + fields.model +
                     "' is not supported (supported: 'llama', SentencePiece; 'gpt2', byte-level BPE; 'gemma4', "
                     "Gemma 4's BPE; 'bert', WordPiece)");
}

Result<std::unique_ptr<Tokenizer>> load_tokenizer(const ModelFile& file) {
  auto tok = load_tokenizer(file.metadata());
  if (!tok.ok()) return tok.status().with_context(file.path());
  return tok;
}

Result<std::unique_ptr<Tokenizer>> load_sentencepiece_file(const std::string& path) {
  auto loaded = [&]() -> Result<std::unique_ptr<Tokenizer>> {
    INFER_ASSIGN_OR_RETURN(MappedFile file, MappedFile::open(path));
    const auto bytes = file.bytes();
    INFER_ASSIGN_OR_RETURN(SentencePieceModel model, parse_sentencepiece_model(std::string_view(
                                                         reinterpret_cast<const char*>(bytes.data()), bytes.size())));
    INFER_ASSIGN_OR_RETURN(VocabFields fields, vocab_fields_from_sentencepiece(model));
    INFER_ASSIGN_OR_RETURN(Vocab vocab, build_sentencepiece_vocab(std::move(fields)));
    return make_sentencepiece_tokenizer(std::move(vocab));
  }();
  if (!loaded.ok()) return loaded.status().with_context(path);
  return loaded;
}

}  // namespace infer
