#include "tokenizer/special_split.hpp"

namespace infer {

namespace {

// C's isspace in the "C" locale, which is what llama.cpp strips.
bool is_ascii_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

}  // namespace

std::vector<Fragment> split_on_special_tokens(const Vocab& vocab, std::string_view text, bool parse_special) {
  std::vector<Fragment> fragments, next;
  if (!text.empty()) fragments.push_back({text, -1});
  for (const int32_t id : vocab.split_tokens) {
    const uint32_t attr = vocab.attr[id];
    if (!parse_special && (attr & (token_attr::control | token_attr::unknown))) continue;
    const std::string_view special = vocab.text[id];  // never empty (see Vocab::text)
    next.clear();
    for (const Fragment& f : fragments) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      size_t pos = 0;
      for (;;) {
        const size_t match = f.text.find(special, pos);
        if (match == std::string_view::npos) {
          if (pos < f.text.size()) next.push_back({f.text.substr(pos), -1});
          break;
        }
        size_t left_end = match;
        if (attr & token_attr::lstrip)
          while (left_end > pos && is_ascii_space(f.text[left_end - 1])) --left_end;
        if (left_end > pos) next.push_back({f.text.substr(pos, left_end - pos), -1});
        next.push_back({{}, id});
        pos = match + special.size();
        if (attr & token_attr::rstrip)
          while (pos < f.text.size() && is_ascii_space(f.text[pos])) ++pos;
      }
    }
    fragments.swap(next);
  }
  return fragments;
}

}  // namespace infer
