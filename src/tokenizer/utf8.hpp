// UTF-8 helpers shared by the tokenizers and the incremental detokenizer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace infer::utf8 {

// Length of the character that starts with `lead`, judged by its high four bits alone (1 for
// ASCII and stray continuation bytes, 2, 3 or 4). This is how llama.cpp and SentencePiece both cut
// text into symbols before merging, valid or not.
inline size_t lead_length(uint8_t lead) noexcept {
  static constexpr uint8_t kByHighNibble[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kByHighNibble[lead >> 4];
}

// True when `s` is exactly one well-formed UTF-8 character (shortest form, no surrogate, at most
// U+10FFFF), the same strictness as SentencePiece's decoder.
bool is_one_valid_char(std::string_view s) noexcept;

// True when all of `s` is well-formed UTF-8.
bool is_valid(std::string_view s) noexcept;

// Number of bytes at the end of `s` that begin a character but do not finish it yet (0..3): a
// lead byte followed by fewer continuation bytes than it announces. Bytes that can never become
// part of a valid character are not counted.
size_t incomplete_tail(std::string_view s) noexcept;

// `s` with every byte that is not part of a well-formed character replaced by U+FFFD, so the
// result is always valid UTF-8 (valid input comes back unchanged).
std::string sanitize(std::string_view s);

// The code points of `s` read the way llama.cpp's unicode_cpts_from_utf8 reads them, for the BPE
// pre-tokenizers: a character is taken by its lead byte when its continuation bytes are present
// (overlong forms and surrogates included); any other byte becomes one U+FFFD. A 4-byte form
// above U+10FFFF is U+FFFD per byte too (llama.cpp throws on it later).
std::vector<uint32_t> code_points_lenient(std::string_view s);

// Appends the UTF-8 form of `cpt` (at most U+10FFFF; surrogates are encoded as they are).
void append(std::string& out, uint32_t cpt);

}  // namespace infer::utf8
