// GPT-2's byte-to-character mapping (bytes_to_unicode): byte-level BPE vocabularies spell every
// byte as one printable character, so that token texts are valid UTF-8 without spaces or control
// characters. Bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF stand for themselves (as code points);
// the other 68 bytes, in increasing order, become U+0100, U+0101, ... (space is U+0120 'Ġ',
// '\n' is U+010A 'Ċ').
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace infer::byte_level {

// The UTF-8 text of the character that stands for byte `b`.
std::string_view char_of(uint8_t b) noexcept;

// The byte a code point stands for; -1 when it stands for none.
int byte_of(uint32_t cpt) noexcept;

// The bytes a byte-level text stands for; false when a character of it stands for no byte (or
// it is not valid UTF-8), leaving `out` with the bytes before that character.
bool decode(std::string_view text, std::string& out);

}  // namespace infer::byte_level

namespace infer {

// `text` is exactly one character that stands for a byte (a byte token of a BPE vocabulary).
bool is_byte_level_char(std::string_view text);

}  // namespace infer
