#include "format/sentencepiece_model.hpp"

#include <cstring>

#include "core/status_macros.hpp"

namespace infer {

namespace {

// Protobuf wire types.
enum WireType : uint32_t { varint_type = 0, fixed64_type = 1, length_delimited = 2, fixed32_type = 5 };

// Reads one message's fields; every read is bounds-checked and names the byte offset on failure.
class WireReader {
 public:
  WireReader(std::string_view bytes, size_t base) : bytes_(bytes), base_(base) {}

  bool done() const noexcept { return pos_ >= bytes_.size(); }
  size_t offset() const noexcept { return base_ + pos_; }

  Result<uint64_t> varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (done()) return error("truncated varint");
      const auto b = static_cast<uint8_t>(bytes_[pos_++]);
      v |= uint64_t(b & 0x7F) << shift;
      if (!(b & 0x80)) return v;
    }
    return error("varint longer than 10 bytes");
  }

  // The next field's number and wire type.
  Result<std::pair<uint32_t, uint32_t>> tag() {
    INFER_ASSIGN_OR_RETURN(const uint64_t t, varint());
    if ((t >> 3) == 0 || (t >> 3) > 0x1FFFFFFF) return error("invalid field number");
    return std::pair<uint32_t, uint32_t>(static_cast<uint32_t>(t >> 3), static_cast<uint32_t>(t & 7));
  }

  // A length-delimited payload, with the offset where it starts.
  Result<std::pair<std::string_view, size_t>> payload() {
    INFER_ASSIGN_OR_RETURN(const uint64_t n, varint());
    if (n > bytes_.size() - pos_) return error("length " + std::to_string(n) + " runs past the end");
    const size_t at = offset();
    const std::string_view p = bytes_.substr(pos_, static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return std::pair<std::string_view, size_t>(p, at);
  }

  Result<float> fixed32_float() {
    if (bytes_.size() - pos_ < 4) return error("truncated fixed32");
    float f;
    std::memcpy(&f, bytes_.data() + pos_, 4);  // little-endian on every platform libinfer targets
    pos_ += 4;
    return f;
  }

  Status skip(uint32_t wire_type) {
    switch (wire_type) {
      case varint_type: return varint().status();
      case length_delimited: return payload().status();
      case fixed64_type:
      case fixed32_type: {
        const size_t n = wire_type == fixed64_type ? 8 : 4;
        if (bytes_.size() - pos_ < n) return error("truncated fixed-size field");
        pos_ += n;
        return Status::ok();
      }
      default: return error("unsupported wire type " + std::to_string(wire_type));
    }
  }

  Status expect(uint32_t wire_type, uint32_t wanted, const char* field) const {
    if (wire_type == wanted) return Status::ok();
    return error(std::string("field ") + field + " has wire type " + std::to_string(wire_type));
  }

  Status error(const std::string& what) const {
    return malformed_file("sentencepiece model: " + what + " at byte " + std::to_string(offset()));
  }

 private:
  std::string_view bytes_;
  size_t base_;
  size_t pos_ = 0;
};

Status parse_piece(std::string_view bytes, size_t base, SentencePieceModel::Piece& piece) {
  WireReader r(bytes, base);
  while (!r.done()) {
    INFER_ASSIGN_OR_RETURN(const auto t, r.tag());
    const auto [field, wt] = t;
    if (field == 1) {
      INFER_RETURN_IF_ERROR(r.expect(wt, length_delimited, "piece"));
      INFER_ASSIGN_OR_RETURN(const auto p, r.payload());
      piece.text = std::string(p.first);
    } else if (field == 2) {
      INFER_RETURN_IF_ERROR(r.expect(wt, fixed32_type, "score"));
      INFER_ASSIGN_OR_RETURN(piece.score, r.fixed32_float());
    } else if (field == 3) {
      INFER_RETURN_IF_ERROR(r.expect(wt, varint_type, "type"));
      INFER_ASSIGN_OR_RETURN(const uint64_t type, r.varint());
      if (type < 1 || type > 6) return r.error("piece type " + std::to_string(type) + " is not 1..6");
      piece.type = static_cast<TokenType>(type);
    } else {
      INFER_RETURN_IF_ERROR(r.skip(wt));
    }
  }
  return Status::ok();
}

Status parse_trainer_spec(std::string_view bytes, size_t base, SentencePieceModel& m) {
  WireReader r(bytes, base);
  while (!r.done()) {
    INFER_ASSIGN_OR_RETURN(const auto t, r.tag());
    const auto [field, wt] = t;
    int32_t* int_field = field == 3    ? &m.model_type
                         : field == 40 ? &m.unk_id
                         : field == 41 ? &m.bos_id
                         : field == 42 ? &m.eos_id
                         : field == 43 ? &m.pad_id
                                       : nullptr;
    bool* bool_field = field == 24 ? &m.treat_whitespace_as_suffix : field == 35 ? &m.byte_fallback : nullptr;
    if (int_field || bool_field) {
      INFER_RETURN_IF_ERROR(r.expect(wt, varint_type, "of the trainer spec"));
      INFER_ASSIGN_OR_RETURN(const uint64_t v, r.varint());
      // int32 fields store negative values sign-extended to 64 bits.
      if (int_field) *int_field = static_cast<int32_t>(static_cast<int64_t>(v));
      else *bool_field = v != 0;
    } else {
      INFER_RETURN_IF_ERROR(r.skip(wt));
    }
  }
  return Status::ok();
}

Status parse_normalizer_spec(std::string_view bytes, size_t base, SentencePieceModel& m) {
  WireReader r(bytes, base);
  while (!r.done()) {
    INFER_ASSIGN_OR_RETURN(const auto t, r.tag());
    const auto [field, wt] = t;
    bool* bool_field = field == 3   ? &m.add_dummy_prefix
                       : field == 4 ? &m.remove_extra_whitespaces
                       : field == 5 ? &m.escape_whitespaces
                                    : nullptr;
    if (field == 1) {
      INFER_RETURN_IF_ERROR(r.expect(wt, length_delimited, "name"));
      INFER_ASSIGN_OR_RETURN(const auto p, r.payload());
      m.normalizer_name = std::string(p.first);
    } else if (bool_field) {
      INFER_RETURN_IF_ERROR(r.expect(wt, varint_type, "of the normalizer spec"));
      INFER_ASSIGN_OR_RETURN(const uint64_t v, r.varint());
      *bool_field = v != 0;
    } else {
      INFER_RETURN_IF_ERROR(r.skip(wt));
    }
  }
  return Status::ok();
}

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void put_tag(std::string& out, uint32_t field, WireType wt) { put_varint(out, (uint64_t(field) << 3) | wt); }
void put_int(std::string& out, uint32_t field, int64_t v) {
  put_tag(out, field, varint_type);
  put_varint(out, static_cast<uint64_t>(v));
}
void put_bytes(std::string& out, uint32_t field, std::string_view bytes) {
  put_tag(out, field, length_delimited);
  put_varint(out, bytes.size());
  out.append(bytes);
}
void put_float(std::string& out, uint32_t field, float f) {
  put_tag(out, field, fixed32_type);
  char b[4];
  std::memcpy(b, &f, 4);
  out.append(b, 4);
}

// Hugging Face added tokens that llama.cpp's converter makes control tokens although they are not
// flagged special.
// SentencePiece's space symbol U+2581 back to plain spaces.
std::string unescape_spaces(std::string_view text) {
  constexpr std::string_view kSpace = "\xE2\x96\x81";
  std::string out;
  for (size_t i = 0; i < text.size();) {
    if (text.substr(i, kSpace.size()) == kSpace) {
      out += ' ';
      i += kSpace.size();
    } else {
      out += text[i++];
    }
  }
  return out;
}


}  // namespace

bool token_looks_special(std::string_view t) {
  const auto wrapped = [&](std::string_view open, std::string_view close) {
    return t.size() >= open.size() + close.size() && t.substr(0, open.size()) == open &&
           t.substr(t.size() - close.size()) == close;
  };
  return t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]" || wrapped("<|", "|>") ||
         wrapped("<\xEF\xBD\x9C", "\xEF\xBD\x9C>") || wrapped("<unused", ">");
}

Result<SentencePieceModel> parse_sentencepiece_model(std::string_view bytes) {
  SentencePieceModel m;
  WireReader r(bytes, 0);
  while (!r.done()) {
    INFER_ASSIGN_OR_RETURN(const auto t, r.tag());
    const auto [field, wt] = t;
    if (field >= 1 && field <= 3) {
      INFER_RETURN_IF_ERROR(r.expect(wt, length_delimited, "of the model"));
      INFER_ASSIGN_OR_RETURN(const auto p, r.payload());
      if (field == 1) {
        m.pieces.emplace_back();
        INFER_RETURN_IF_ERROR(parse_piece(p.first, p.second, m.pieces.back()));
      } else if (field == 2) {
        INFER_RETURN_IF_ERROR(parse_trainer_spec(p.first, p.second, m));
      } else {
        INFER_RETURN_IF_ERROR(parse_normalizer_spec(p.first, p.second, m));
      }
    } else {
      INFER_RETURN_IF_ERROR(r.skip(wt));
    }
  }
  if (m.pieces.empty()) return malformed_file("sentencepiece model: no pieces");
  return m;
}

std::string serialize_sentencepiece_model(const SentencePieceModel& m) {
  std::string out, msg;
  for (const auto& p : m.pieces) {
    msg.clear();
    put_bytes(msg, 1, p.text);
    put_float(msg, 2, p.score);
    put_int(msg, 3, static_cast<int32_t>(p.type));
    put_bytes(out, 1, msg);
  }
  msg.clear();
  put_int(msg, 3, m.model_type);
  put_int(msg, 4, static_cast<int64_t>(m.pieces.size()));  // vocab_size
  put_int(msg, 24, m.treat_whitespace_as_suffix);
  put_int(msg, 35, m.byte_fallback);
  put_int(msg, 40, m.unk_id);
  put_int(msg, 41, m.bos_id);
  put_int(msg, 42, m.eos_id);
  put_int(msg, 43, m.pad_id);
  put_bytes(out, 2, msg);
  msg.clear();
  put_bytes(msg, 1, m.normalizer_name);
  put_int(msg, 3, m.add_dummy_prefix);
  put_int(msg, 4, m.remove_extra_whitespaces);
  put_int(msg, 5, m.escape_whitespaces);
  put_bytes(out, 3, msg);
  return out;
}

Result<VocabFields> vocab_fields_from_sentencepiece(const SentencePieceModel& m) {
  static const char* const kTypeNames[] = {"", "unigram", "BPE", "word", "char"};
  if (m.model_type != SentencePieceModel::bpe) {
    const bool known = m.model_type >= 1 && m.model_type <= 4;
    return unsupported(std::string("sentencepiece model: model type ") +
                       (known ? kTypeNames[m.model_type] : std::to_string(m.model_type).c_str()) +
                       " is not supported (only BPE)");
  }
  if (m.treat_whitespace_as_suffix)
    return unsupported("sentencepiece model: whitespace as a suffix (treat_whitespace_as_suffix) is not supported");

  VocabFields f;
  f.model = "llama";
  const size_t n = m.pieces.size();
  f.tokens.reserve(n);
  f.scores.reserve(n);
  f.token_types.reserve(n);
  for (const auto& p : m.pieces) {
    std::string text = p.text;
    float score = p.score;
    TokenType type = p.type;
    if (type == TokenType::user_defined) {
      score = -1000.0f;
      if (token_looks_special(text)) {
        type = TokenType::control;
      } else {
        text = unescape_spaces(text);  // the converter writes user-defined spaces as plain spaces
      }
    }
    f.tokens.push_back(std::move(text));
    f.scores.push_back(score);
    f.token_types.push_back(static_cast<int32_t>(type));
  }
  const auto id = [&](int32_t v) { return v >= 0 ? std::optional<int64_t>(v) : std::nullopt; };
  f.bos = id(m.bos_id);
  f.eos = id(m.eos_id);
  f.unk = id(m.unk_id);
  f.pad = id(m.pad_id);
  f.add_bos = true;
  f.add_eos = false;
  if (!m.add_dummy_prefix) f.add_space_prefix = false;
  return f;
}

}  // namespace infer
