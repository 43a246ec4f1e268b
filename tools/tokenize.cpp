// infer-tokenize: the token ids of a text, as llama.cpp's llama-tokenize gives them.
//
//   infer-tokenize -m MODEL (-p TEXT | -f FILE) [--no-bos] [--pieces] [--parse-special]
//
// MODEL is a GGUF file, a Hugging Face model directory or a SentencePiece tokenizer.model. Prints the ids on one line, separated
// by spaces; with --pieces, id:entry pairs (the raw vocabulary entry, "▁" for a space). The text
// is used byte for byte (no escape processing). Exit status: 0 on success, 1 when the model
// cannot be loaded or the text not tokenized (one line on stderr), 2 on a usage error.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>

#include "cli_common.hpp"
#include "format/model_file.hpp"
#include "tokenizer/tokenizer.hpp"

namespace {

using namespace infer;

struct Options {
  std::string model;
  std::optional<std::string> prompt, prompt_file;
  bool bos = true;
  bool pieces = false;
  bool parse_special = false;
};

void usage(std::FILE* out) {
  std::fprintf(out,
               "usage: infer-tokenize -m MODEL (-p TEXT | -f FILE) [--no-bos] [--pieces] [--parse-special]\n"
               "  -m MODEL         a GGUF file, a Hugging Face model directory or a SentencePiece tokenizer.model\n"
               "  -p TEXT          the text to tokenize\n"
               "  -f FILE          tokenize the contents of FILE\n"
               "  --no-bos         do not add the BOS token the model asks for\n"
               "  --pieces         print id:entry pairs instead of ids alone\n"
               "  --parse-special  control-token text in the input (\"<|im_start|>\") becomes that token\n");
}

int usage_error(const std::string& msg) {
  std::fprintf(stderr, "infer-tokenize: %s\n", msg.c_str());
  usage(stderr);
  return 2;
}

int failure(const std::string& msg) {
  std::fprintf(stderr, "infer-tokenize: %s\n", msg.c_str());
  return 1;
}

bool is_gguf(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

Result<std::unique_ptr<Tokenizer>> load(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec) && !is_gguf(path)) return load_sentencepiece_file(path);
  auto file = ModelFile::open(path);
  if (!file.ok()) return file.status();
  return load_tokenizer(*file);
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (a == "-m" || a == "--model" || a == "-p" || a == "--prompt" || a == "-f" || a == "--file") {
      const char* v = value();
      if (!v) return usage_error(a + " needs a value");
      if (a == "-m" || a == "--model") opt.model = v;
      else if (a == "-p" || a == "--prompt") opt.prompt = v;
      else opt.prompt_file = v;
    } else if (a == "--no-bos") {
      opt.bos = false;
    } else if (a == "--pieces") {
      opt.pieces = true;
    } else if (a == "--parse-special") {
      opt.parse_special = true;
    } else if (a == "-h" || a == "--help") {
      usage(stdout);
      return 0;
    } else {
      return usage_error("unknown argument " + a);
    }
  }
  if (opt.model.empty()) opt.model = infer::cli::default_model_path();
  if (opt.model.empty()) return usage_error("-m MODEL is required (or install the default model: scripts/fetch-model)");
  if (opt.prompt.has_value() == opt.prompt_file.has_value()) return usage_error("give exactly one of -p TEXT and -f FILE");

  std::string text;
  if (opt.prompt) {
    text = *opt.prompt;
  } else {
    std::ifstream in(*opt.prompt_file, std::ios::binary);
    if (!in) return failure(*opt.prompt_file + ": cannot open");
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (in.bad()) return failure(*opt.prompt_file + ": read error");
  }

  auto tok = load(opt.model);
  if (!tok.ok()) return failure(tok.status().message());
  // As llama-tokenize: the model's BOS (and EOS, if it asks for one) unless --no-bos.
  const bool add_special = (*tok)->add_bos() && opt.bos;
  auto ids = (*tok)->encode(text, add_special, opt.parse_special);
  if (!ids.ok()) return failure(ids.status().message());

  std::string line;
  for (size_t i = 0; i < ids->size(); ++i) {
    const int32_t id = (*ids)[i];
    if (i) line += ' ';
    line += std::to_string(id);
    if (opt.pieces) {
      line += ':';
      line += (*tok)->token_text(id);
    }
  }
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}
