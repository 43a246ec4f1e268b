// llama.cpp's own tokenizer test suite, run through libinfer's tokenizers: every
// models/ggml-vocab-*.gguf of the llama.cpp source that has .gguf.inp (texts separated by
// "\n__ggml_vocab_test__\n") and .gguf.out (the expected ids, one line per text). As llama.cpp's
// tests/test-tokenizer-0.cpp: each text tokenized without BOS/EOS and without parsing special
// tokens, the ids compared one for one. Plus the round trip decode(encode(text)) == text for every
// valid UTF-8 text of the vocabularies where it holds (see kNoRoundTrip).
//
//   infer-llama-vocab-suite MODELS_DIR
//
// Prints one line per vocabulary (cases identical / total, round trips) and every difference.
// Exit status 1 on any difference, on a vocabulary that does not load, or when MODELS_DIR holds no
// vocabulary with cases; 2 on a usage error.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "format/model_file.hpp"
#include "tokenizer/tokenizer.hpp"
#include "tokenizer/utf8.hpp"

namespace {

using namespace infer;
namespace fs = std::filesystem;

// Vocabularies whose decode cannot give the text back, and why.
struct NoRoundTrip {
  std::string_view vocab, why;
};
constexpr NoRoundTrip kNoRoundTrip[] = {
    {"bert-bge",
     "WordPiece normalizes: lowercase, accents stripped, whitespace runs become one space, a space "
     "before every word and punctuation mark, unknown words become [UNK]"},
};

std::string read_file(const fs::path& path, bool& ok) {
  std::ifstream in(path, std::ios::binary);
  ok = static_cast<bool>(in);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// test-tokenizer-0.cpp's reading: texts split on the separator (a final separator ends the
// list), one line of ids per text.
bool read_cases(const fs::path& inp, const fs::path& out, std::vector<std::string>& texts,
                std::vector<std::vector<int32_t>>& ids) {
  bool ok_in = false, ok_out = false;
  const std::string raw = read_file(inp, ok_in);
  const std::string expected = read_file(out, ok_out);
  if (!ok_in || !ok_out) return false;
  constexpr std::string_view kSep = "\n__ggml_vocab_test__\n";
  for (size_t pos = 0; pos < raw.size();) {
    const size_t next = raw.find(kSep, pos);
    if (next == std::string::npos) {
      texts.push_back(raw.substr(pos));
      break;
    }
    texts.push_back(raw.substr(pos, next - pos));
    pos = next + kSep.size();
  }
  std::istringstream lines(expected);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::vector<int32_t>& row = ids.emplace_back();
    for (long long id; fields >> id;) row.push_back(static_cast<int32_t>(id));
  }
  return texts.size() == ids.size();
}

std::string shown(std::string_view s) {
  std::string out;
  for (const char c : s) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else out += c;
  }
  return out;
}

std::string joined(const std::vector<int32_t>& ids) {
  std::string out;
  for (const int32_t id : ids) {
    if (!out.empty()) out += ' ';
    out += std::to_string(id);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: infer-llama-vocab-suite MODELS_DIR\n");
    return 2;
  }
  std::vector<fs::path> vocabs;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(argv[1], ec)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("ggml-vocab-") && name.ends_with(".gguf") && fs::exists(entry.path().string() + ".inp") &&
        fs::exists(entry.path().string() + ".out"))
      vocabs.push_back(entry.path());
  }
  if (ec || vocabs.empty()) {
    std::fprintf(stderr, "no ggml-vocab-*.gguf with .inp and .out in %s\n", argv[1]);
    return 1;
  }
  std::sort(vocabs.begin(), vocabs.end());

  size_t total = 0, identical = 0, failed_vocabs = 0, round_trips = 0, round_trips_ok = 0;
  for (const fs::path& path : vocabs) {
    const std::string name = path.stem().string().substr(std::string_view("ggml-vocab-").size());
    std::vector<std::string> texts;
    std::vector<std::vector<int32_t>> expected;
    if (!read_cases(path.string() + ".inp", path.string() + ".out", texts, expected)) {
      std::printf("FAIL %-16s the .inp and .out files do not hold the same number of cases\n", name.c_str());
      ++failed_vocabs;
      continue;
    }
    total += texts.size();
    auto file = ModelFile::open(path.string());
    auto tok = file.ok() ? load_tokenizer(*file) : Result<std::unique_ptr<Tokenizer>>(file.status());
    if (!tok.ok()) {
      std::printf("FAIL %-16s 0/%zu: %s\n", name.c_str(), texts.size(), tok.status().message().c_str());
      ++failed_vocabs;
      continue;
    }
    const auto no_round_trip = std::find_if(std::begin(kNoRoundTrip), std::end(kNoRoundTrip),
                                            [&](const NoRoundTrip& n) { return n.vocab == name; });
    const bool check_round_trip = no_round_trip == std::end(kNoRoundTrip);
    size_t same = 0, trips = 0, trips_ok = 0;
    std::string report;
    for (size_t i = 0; i < texts.size(); ++i) {
      auto ids = (*tok)->encode(texts[i], /*add_special=*/false, /*parse_special=*/false);
      if (!ids.ok()) {
        report += "  case " + std::to_string(i) + " '" + shown(texts[i]) + "': " + ids.status().message() + "\n";
        continue;
      }
      if (*ids == expected[i]) {
        ++same;
      } else {
        report += "  case " + std::to_string(i) + " '" + shown(texts[i]) + "'\n    expected " + joined(expected[i]) +
                  "\n    got      " + joined(*ids) + "\n";
      }
      if (check_round_trip && utf8::is_valid(texts[i])) {
        ++trips;
        const std::string back = (*tok)->decode(*ids);
        if (back == texts[i]) ++trips_ok;
        else report += "  case " + std::to_string(i) + " round trip: '" + shown(back) + "'\n";
      }
    }
    const bool ok = same == texts.size() && trips_ok == trips;
    std::printf("%s %-16s %zu/%zu identical, ", ok ? "ok  " : "FAIL", name.c_str(), same, texts.size());
    if (check_round_trip) std::printf("round trip %zu/%zu\n", trips_ok, trips);
    else std::printf("no round trip: %.*s\n", static_cast<int>(no_round_trip->why.size()), no_round_trip->why.data());
    std::fputs(report.c_str(), stdout);
    identical += same;
    round_trips += trips;
    round_trips_ok += trips_ok;
    if (!ok) ++failed_vocabs;
  }
  std::printf("%zu vocabularies, %zu/%zu cases identical, %zu/%zu round trips, %zu vocabularies failed\n",
              vocabs.size(), identical, total, round_trips_ok, round_trips, failed_vocabs);
  return failed_vocabs == 0 ? 0 : 1;
}
