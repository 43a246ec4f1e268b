#include "tokenizer/byte_level.hpp"

#include <array>

#include "tokenizer/utf8.hpp"

namespace infer::byte_level {

namespace {

bool stands_for_itself(int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE); }

struct Tables {
  std::array<uint32_t, 256> cpt_of{};   // byte -> code point
  std::array<int16_t, 324> byte_of{};   // code point (< 324) -> byte, -1 for none
  std::array<std::string, 256> text_of;  // byte -> UTF-8

  Tables() {
    byte_of.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      cpt_of[b] = stands_for_itself(b) ? static_cast<uint32_t>(b) : next++;
      byte_of[cpt_of[b]] = static_cast<int16_t>(b);
      utf8::append(text_of[b], cpt_of[b]);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

std::string_view char_of(uint8_t b) noexcept { return tables().text_of[b]; }

int byte_of(uint32_t cpt) noexcept { return cpt < tables().byte_of.size() ? tables().byte_of[cpt] : -1; }

bool decode(std::string_view text, std::string& out) {
  for (size_t i = 0; i < text.size();) {
    const size_t len = utf8::lead_length(static_cast<uint8_t>(text[i]));
    if (i + len > text.size() || !utf8::is_one_valid_char(text.substr(i, len))) return false;
    const auto cps = utf8::code_points_lenient(text.substr(i, len));
    const int b = byte_of(cps[0]);
    if (b < 0) return false;
    out += static_cast<char>(b);
    i += len;
  }
  return true;
}

}  // namespace infer::byte_level

namespace infer {

bool is_byte_level_char(std::string_view text) {
  if (text.empty() || !utf8::is_one_valid_char(text)) return false;
  return byte_level::byte_of(utf8::code_points_lenient(text)[0]) >= 0;
}

}  // namespace infer
