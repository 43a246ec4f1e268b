// How the ids come out identical to llama.cpp's (llama-vocab.cpp, SPM):
//
//   1. the prompt is split on special-token strings (special_split.cpp);
//   2. a text run that starts the prompt or follows a special token gets a leading space when
//      the vocabulary asks for one; spaces become "▁";
//   3. the run is cut into characters by their lead bytes (a malformed one becomes byte tokens,
//      step 4), and adjacent symbols are merged, best-scoring pair first (leftmost on ties), as
//      long as the merged text is a vocabulary entry — any entry, whatever its type;
//   4. a symbol that is no entry becomes byte tokens, looked up by the text "<0xAB>" (or the
//      one-byte text itself).
//
// libsentencepiece's BPE model runs step 3 exactly so when every entry is an ordinary (NORMAL)
// piece, so the model handed to it types them all NORMAL. Its own byte fallback and user-defined
// matching are left off: libinfer does steps 1, 2 and 4 itself, because llama.cpp's versions
// differ (text-based byte lookup, per-run space prefix, invalid UTF-8 kept as bytes where
// SentencePiece would substitute U+FFFD).
#include "tokenizer/sentencepiece_tokenizer.hpp"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <array>
#include <unordered_set>

#include "core/status_macros.hpp"
#include "format/sentencepiece_model.hpp"
#include "tokenizer/special_split.hpp"
#include "tokenizer/utf8.hpp"
#include "tokenizer/vocab_tokenizer.hpp"

namespace infer {

namespace {

class SentencePieceTokenizer final : public VocabTokenizer {
 public:
  explicit SentencePieceTokenizer(Vocab vocab) : VocabTokenizer(std::move(vocab)) {}

  Status init();

  Result<std::vector<int32_t>> encode(std::string_view text, bool add_special, bool parse_special) const override;

 private:
  // Appends the ids of one text run (spaces not yet escaped), with a leading space if asked.
  Status encode_run(std::string_view text, bool space_prefix, std::vector<int32_t>& out) const;
  // Appends the ids of valid UTF-8 text through libsentencepiece.
  Status encode_valid(std::string_view text, std::vector<int32_t>& out) const;
  Status push_bytes(std::string_view bytes, std::vector<int32_t>& out) const;

  sentencepiece::SentencePieceProcessor processor_;
  int32_t unknown_piece_ = -1;            // libsentencepiece's id for "no such entry"
  std::array<int32_t, 256> byte_token_{};  // byte -> token, -1 when the vocabulary has none
};

Status SentencePieceTokenizer::init() {
  const int32_t n = vocab_.size();
  std::unordered_set<std::string_view> taken(vocab_.text.begin(), vocab_.text.end());
  // Text no entry has. Multi-character and typed CONTROL (so never a merge result nor a lookup
  // hit for a single character), it can stand in where a piece must exist but never match.
  const auto unused_text = [&](const std::string& base) {
    std::string t = base;
    for (int i = 0; taken.count(t); ++i) t = base + "#" + std::to_string(i);
    return t;
  };

  SentencePieceModel m;
  m.model_type = SentencePieceModel::bpe;
  m.normalizer_name = "identity";
  m.add_dummy_prefix = false;  // added per text run in encode()
  m.remove_extra_whitespaces = false;
  m.escape_whitespaces = false;  // done in encode_run()
  m.byte_fallback = false;  // done in push_bytes()
  m.bos_id = m.eos_id = m.pad_id = -1;
  m.pieces.resize(static_cast<size_t>(n) + 1);
  std::unordered_set<std::string_view> seen;
  // Walk backwards so that, as in llama.cpp's text-to-id map, the last of duplicate entries
  // owns the text; earlier duplicates get an unmatchable stand-in (SentencePiece forbids
  // duplicates).
  for (int32_t id = n - 1; id >= 0; --id) {
    auto& p = m.pieces[id];
    p.score = vocab_.score[id];
    if (seen.insert(vocab_.text[id]).second) {
      p.text = vocab_.text[id];
      p.type = TokenType::normal;
    } else {
      p.text = unused_text("<duplicate of " + vocab_.text[id] + " at " + std::to_string(id) + ">");
      p.type = TokenType::control;
    }
  }
  unknown_piece_ = n;
  m.unk_id = n;
  m.pieces[n].text = unused_text("<libinfer unknown>");
  m.pieces[n].type = TokenType::unknown;

  const auto status = processor_.LoadFromSerializedProto(serialize_sentencepiece_model(m));
  if (!status.ok()) return internal_error(std::string("libsentencepiece refused the vocabulary: ") + status.message());

  // llama.cpp's byte_to_token: the entry "<0xAB>", else the entry that is the byte itself.
  for (int b = 0; b < 256; ++b) {
    const int id = processor_.PieceToId(byte_token_text(static_cast<uint8_t>(b)));
    const int raw = processor_.PieceToId(std::string(1, static_cast<char>(b)));
    byte_token_[b] = id != unknown_piece_ ? id : raw != unknown_piece_ ? raw : -1;
  }
  return Status::ok();
}

Result<std::vector<int32_t>> SentencePieceTokenizer::encode(std::string_view text, bool add_special,
                                                            bool parse_special) const {
  std::vector<int32_t> out;
  if (add_special && add_bos()) {
    if (bos_id() < 0) return invalid_argument("the vocabulary asks for a BOS token but has none");
    out.push_back(bos_id());
  }
  // A text run that starts the prompt or follows a special token gets the space prefix.
  bool after_special = true;
  for (const Fragment& f : split_on_special_tokens(vocab_, text, parse_special)) {
    if (f.token >= 0) {
      out.push_back(f.token);
      after_special = true;
      continue;
    }
    INFER_RETURN_IF_ERROR(encode_run(f.text, add_space_prefix() && after_special, out));
    after_special = false;
  }
  if (add_special && add_eos()) {
    if (eos_id() < 0) return invalid_argument("the vocabulary asks for an EOS token but has none");
    out.push_back(eos_id());
  }
  return out;
}

Status SentencePieceTokenizer::encode_run(std::string_view raw, bool space_prefix, std::vector<int32_t>& out) const {
  const std::string escaped = (space_prefix ? std::string(kSpaceSymbol) : std::string()) + escape_spaces(raw);
  const std::string_view text = escaped;
  // Characters are cut by their lead byte, after escaping (so a malformed lead byte can swallow
  // part of a "▁"). A malformed character never merges with a neighbour (no entry contains it):
  // it splits the run and becomes byte tokens.
  size_t start = 0, i = 0;
  while (i < text.size()) {
    const size_t len = std::min(utf8::lead_length(static_cast<uint8_t>(text[i])), text.size() - i);
    const std::string_view ch = text.substr(i, len);
    i += len;
    if (utf8::is_one_valid_char(ch)) continue;
    INFER_RETURN_IF_ERROR(encode_valid(text.substr(start, i - len - start), out));
    INFER_RETURN_IF_ERROR(push_bytes(ch, out));
    start = i;
  }
  return encode_valid(text.substr(start), out);
}

Status SentencePieceTokenizer::encode_valid(std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return Status::ok();
  sentencepiece::ImmutableSentencePieceText pieces;
  const auto status = processor_.Encode(text, pieces.mutable_proto());
  if (!status.ok()) return internal_error(std::string("libsentencepiece: ") + status.message());
  for (const auto& p : pieces.pieces()) {
    const auto id = static_cast<int32_t>(p.id());
    if (id == unknown_piece_) INFER_RETURN_IF_ERROR(push_bytes(p.piece(), out));  // spaces already "▁"
    else out.push_back(id);
  }
  return Status::ok();
}

Status SentencePieceTokenizer::push_bytes(std::string_view bytes, std::vector<int32_t>& out) const {
  for (const char c : bytes) {
    if (byte_token_[static_cast<uint8_t>(c)] >= 0) continue;
    // No byte tokens: one unknown token for the whole symbol, as SentencePiece would (llama.cpp
    // has no answer and fails).
    if (vocab_.unk < 0) {
      static constexpr char kHex[] = "0123456789ABCDEF";
      const auto b = static_cast<uint8_t>(c);
      return invalid_argument(std::string("the vocabulary has neither a token for the byte 0x") + kHex[b >> 4] +
                              kHex[b & 15] + " nor an unknown token");
    }
    out.push_back(vocab_.unk);
    return Status::ok();
  }
  for (const char c : bytes) out.push_back(byte_token_[static_cast<uint8_t>(c)]);
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> make_sentencepiece_tokenizer(Vocab vocab) {
  auto tok = std::make_unique<SentencePieceTokenizer>(std::move(vocab));
  INFER_RETURN_IF_ERROR(tok->init());
  return std::unique_ptr<Tokenizer>(std::move(tok));
}

}  // namespace infer
