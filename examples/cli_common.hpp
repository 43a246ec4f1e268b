// Shared pieces of the command-line tools: loading a model with its tokenizer, argument parsing
// helpers, and one-line error exits (status 1 for bad input, 2 for usage errors).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "format/model_file.hpp"
#include "model/model.hpp"
#include "tokenizer/tokenizer.hpp"

namespace infer::cli {

[[noreturn]] inline void fail(const char* tool, const std::string& message) {
  std::fprintf(stderr, "%s: %s\n", tool, message.c_str());
  std::exit(1);
}

[[noreturn]] inline void usage_error(const char* tool, const std::string& message, const char* usage) {
  std::fprintf(stderr, "%s: %s\n%s", tool, message.c_str(), usage);
  std::exit(2);
}

// Numbers from the command line, with the flag named in the error.
long long parse_int(const char* tool, const char* usage, const std::string& flag, const char* text, long long lo, long long hi);
double parse_double(const char* tool, const char* usage, const std::string& flag, const char* text, double lo, double hi);

// Reads a whole file (prompt files, evaluation texts).
std::string read_text_file(const char* tool, const std::string& path);

struct LoadedModel {
  std::shared_ptr<const ModelFile> file;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  double load_ms = 0;
};

// "--kv-type" values: f16 or f32 (a usage error otherwise).
DType parse_kv_type(const char* tool, const char* usage, const std::string& text);

// A KV cache with exactly enough blocks for one sequence of n_ctx tokens (exits on error).
KvCache make_kv_cache(const char* tool, const Model& model, int64_t n_ctx, DType kv_type, int64_t n_batch = 512);

// Opens the file, builds the model and its tokenizer; exits with status 1 and one line on error.
LoadedModel load(const char* tool, const std::string& path, bool with_model = true);

}  // namespace infer::cli
