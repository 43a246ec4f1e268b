#include "tokenizer/utf8.hpp"

namespace infer::utf8 {

namespace {

bool is_continuation(uint8_t b) noexcept { return (b & 0xC0) == 0x80; }

// Bytes a character starting with `lead` takes; 0 when `lead` cannot start one.
size_t expected_length(uint8_t lead) noexcept {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

}  // namespace

bool is_one_valid_char(std::string_view s) noexcept {
  if (s.empty()) return false;
  const auto* b = reinterpret_cast<const uint8_t*>(s.data());
  const size_t n = expected_length(b[0]);
  if (n == 0 || n != s.size()) return false;
  for (size_t i = 1; i < n; ++i)
    if (!is_continuation(b[i])) return false;
  if (n == 3) {
    const uint32_t cp = (uint32_t(b[0] & 0x0F) << 12) | (uint32_t(b[1] & 0x3F) << 6) | (b[2] & 0x3F);
    return cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF);
  }
  if (n == 4) {
    const uint32_t cp = (uint32_t(b[0] & 0x07) << 18) | (uint32_t(b[1] & 0x3F) << 12) |
                        (uint32_t(b[2] & 0x3F) << 6) | (b[3] & 0x3F);
    return cp >= 0x10000 && cp <= 0x10FFFF;
  }
  return true;
}

bool is_valid(std::string_view s) noexcept {
  size_t i = 0;
  while (i < s.size()) {
    const size_t n = lead_length(static_cast<uint8_t>(s[i]));
    if (n > s.size() - i || !is_one_valid_char(s.substr(i, n))) return false;
    i += n;
  }
  return true;
}

size_t incomplete_tail(std::string_view s) noexcept {
  for (size_t k = 1; k <= 3 && k <= s.size(); ++k) {
    const auto b = static_cast<uint8_t>(s[s.size() - k]);
    if (is_continuation(b)) continue;
    return expected_length(b) > k ? k : 0;
  }
  return 0;
}

std::string sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const size_t n = lead_length(static_cast<uint8_t>(s[i]));
    if (n <= s.size() - i && is_one_valid_char(s.substr(i, n))) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

}  // namespace infer::utf8

namespace infer::utf8 {

std::vector<uint32_t> code_points_lenient(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  const auto* b = reinterpret_cast<const uint8_t*>(s.data());
  const size_t n = s.size();
  const auto cont = [&](size_t i) { return i < n && is_continuation(b[i]); };
  for (size_t i = 0; i < n;) {
    const uint8_t lead = b[i];
    uint32_t cp = 0xFFFD;
    size_t len = 1;
    if (lead < 0x80) {
      cp = lead;
    } else if ((lead & 0xE0) == 0xC0 && cont(i + 1)) {
      cp = (uint32_t(lead & 0x1F) << 6) | (b[i + 1] & 0x3F);
      len = 2;
    } else if ((lead & 0xF0) == 0xE0 && cont(i + 1) && cont(i + 2)) {
      cp = (uint32_t(lead & 0x0F) << 12) | (uint32_t(b[i + 1] & 0x3F) << 6) | (b[i + 2] & 0x3F);
      len = 3;
    } else if ((lead & 0xF8) == 0xF0 && cont(i + 1) && cont(i + 2) && cont(i + 3)) {
      const uint32_t v = (uint32_t(lead & 0x07) << 18) | (uint32_t(b[i + 1] & 0x3F) << 12) |
                         (uint32_t(b[i + 2] & 0x3F) << 6) | (b[i + 3] & 0x3F);
      if (v <= 0x10FFFF) {
        cp = v;
        len = 4;
      }
    }
    out.push_back(cp);
    i += len;
  }
  return out;
}

void append(std::string& out, uint32_t cpt) {
  if (cpt < 0x80) {
    out += static_cast<char>(cpt);
  } else if (cpt < 0x800) {
    out += static_cast<char>(0xC0 | (cpt >> 6));
    out += static_cast<char>(0x80 | (cpt & 0x3F));
  } else if (cpt < 0x10000) {
    out += static_cast<char>(0xE0 | (cpt >> 12));
    out += static_cast<char>(0x80 | ((cpt >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cpt & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cpt >> 18));
    out += static_cast<char>(0x80 | ((cpt >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cpt >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cpt & 0x3F));
  }
}

}  // namespace infer::utf8
