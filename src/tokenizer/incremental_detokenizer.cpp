#include "tokenizer/tokenizer.hpp"
#include "tokenizer/utf8.hpp"

namespace infer {

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer, DecodeOptions options)
    : tokenizer_(tokenizer), options_(options) {}

void IncrementalDetokenizer::reset() {
  first_ = true;
  strip_space_ = false;
  eos_held_ = false;
  pending_.clear();
}

std::string IncrementalDetokenizer::push(int32_t id) {
  // The same rules as Tokenizer::decode, applied as the ids arrive.
  const auto append = [&](int32_t token) {
    const std::string piece = tokenizer_.token_to_bytes(token, options_.render_special);
    pending_.append(piece, strip_space_ && !piece.empty() && piece.front() == ' ' ? 1 : 0);
    strip_space_ = false;
  };
  if (first_) {
    first_ = false;
    strip_space_ = tokenizer_.add_space_prefix() && !options_.keep_leading_space;
    if (options_.remove_special && tokenizer_.add_bos() && id == tokenizer_.bos_id()) {
      strip_space_ = false;
      return {};
    }
  }
  // An EOS is dropped only if it is the last id, which the next push (or flush) tells.
  if (eos_held_) {
    eos_held_ = false;
    append(tokenizer_.eos_id());
  }
  if (options_.remove_special && tokenizer_.add_eos() && id == tokenizer_.eos_id()) eos_held_ = true;
  else append(id);

  // A character still waiting for bytes is held back; bytes that can never complete one (a lead
  // byte followed by a non-continuation, a stray continuation) become U+FFFD, so every chunk a
  // stream consumer sees is valid UTF-8.
  const size_t ready = pending_.size() - utf8::incomplete_tail(pending_);
  std::string out = utf8::sanitize(std::string_view(pending_).substr(0, ready));
  pending_.erase(0, ready);
  return out;
}

std::string IncrementalDetokenizer::flush() {
  std::string out = utf8::sanitize(pending_);
  reset();
  return out;
}

}  // namespace infer
