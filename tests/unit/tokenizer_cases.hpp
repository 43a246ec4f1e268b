// The tokenizer reference cases under tests/data/tokenizer/ (cases.txt, bpe-cases.txt): reading
// the files and their escapes. Shared by the SentencePiece and BPE tokenizer tests.
#pragma once

#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace infer::test {

inline std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The lines of a data file that are neither empty nor comments (#).
inline std::vector<std::string> data_lines(const std::string& path) {
  std::istringstream in(read_text_file(path));
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#') lines.push_back(line);
  return lines;
}

// The cases' escapes: \n \t \r \\ \xHH.
inline std::string unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\') {
      out += s[i];
      continue;
    }
    REQUIRE(i + 1 < s.size());
    const char e = s[++i];
    if (e == 'n') out += '\n';
    else if (e == 't') out += '\t';
    else if (e == 'r') out += '\r';
    else if (e == '\\') out += '\\';
    else {
      REQUIRE(e == 'x');
      REQUIRE(i + 2 < s.size());
      out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    }
  }
  return out;
}

struct Case {
  std::string name, text;
};

// NAME<TAB>TEXT rows of a cases file.
inline std::vector<Case> load_cases(const std::string& path) {
  std::vector<Case> cases;
  for (const std::string& line : data_lines(path)) {
    const size_t tab = line.find('\t');
    cases.push_back({line.substr(0, tab), tab == std::string::npos ? "" : unescape(line.substr(tab + 1))});
  }
  return cases;
}

}  // namespace infer::test
