// libFuzzer target for the safetensors reader and the Hugging Face directory reader. The first
// input byte picks what the rest is:
//   0: a safetensors file: it must give tensors whose bytes lie inside the input, tiling the data
//      section, or a failed Status with a message;
//   1: a model.safetensors.index.json: a shard list of plain file names, or an error;
//   2: a whole model directory: u32 length + config.json, u32 length + tokenizer.json, then
//      model.safetensors, written to a scratch directory and opened with ModelFile::open; whatever
//      opens also goes through the tokenizer loader.
// Never a crash, a sanitizer report, a hang, or an allocation out of proportion to the input (run
// with -malloc_limit_mb).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "format/model_file.hpp"
#include "format/safetensors.hpp"
#include "tokenizer/tokenizer.hpp"

namespace {

void check_file(const uint8_t* data, size_t size) {
  auto file = infer::MappedFile::from_bytes({data, size}, "fuzz.safetensors");
  if (!file.ok()) return;
  auto st = infer::safetensors::read(std::move(file).value());
  if (!st.ok()) {
    if (st.status().message().empty()) std::abort();
    return;
  }
  const uint8_t* begin = st->file->data();
  const uint8_t* end = begin + st->file->size();
  uint64_t expected = 0;
  for (const auto& t : st->tensors) {
    if (t.begin != expected || t.end < t.begin) std::abort();
    expected = t.end;
    if (t.nbytes() > 0 && (t.data < begin || t.data + t.nbytes() > end)) std::abort();
    volatile uint8_t sink = 0;
    if (t.nbytes() > 0) sink = t.data[t.nbytes() - 1];
    (void)sink;
  }
  if (st->header_bytes + expected != st->file->size()) std::abort();
}

bool take(const uint8_t*& p, size_t& left, std::string& out) {
  uint32_t n = 0;
  if (left < 4) return false;
  std::memcpy(&n, p, 4);
  p += 4;
  left -= 4;
  if (n > left) return false;
  out.assign(reinterpret_cast<const char*>(p), n);
  p += n;
  left -= n;
  return true;
}

void write(const std::filesystem::path& p, const void* data, size_t size) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
}

void check_directory(const uint8_t* p, size_t left) {
  std::string config, tokenizer;
  if (!take(p, left, config) || !take(p, left, tokenizer)) return;
  // One scratch directory per process, removed at exit.
  struct Scratch {
    std::filesystem::path dir = std::filesystem::temp_directory_path() / ("infer-fuzz-hf-" + std::to_string(::getpid()));
    Scratch() { std::filesystem::create_directories(dir); }
    ~Scratch() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  };
  static const Scratch scratch;
  const std::filesystem::path& dir = scratch.dir;
  write(dir / "config.json", config.data(), config.size());
  write(dir / "tokenizer.json", tokenizer.data(), tokenizer.size());
  write(dir / "model.safetensors", p, left);
  auto mf = infer::ModelFile::open(dir.string());
  if (!mf.ok()) {
    if (mf.status().message().empty()) std::abort();
    return;
  }
  for (const auto& t : mf->tensors()) {
    volatile uint8_t sink = 0;
    if (t.nbytes > 0) sink = static_cast<const uint8_t*>(t.view.data)[t.nbytes - 1];
    (void)sink;
  }
  auto tok = infer::load_tokenizer(*mf);
  if (!tok.ok() && tok.status().message().empty()) std::abort();
  if (tok.ok()) {
    auto ids = (*tok)->encode("Hello world 123 \xC3\xA9!", true, true);
    if (ids.ok()) (void)(*tok)->decode(*ids);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  switch (data[0] % 3) {
    case 0: check_file(data + 1, size - 1); break;
    case 1: {
      auto index = infer::safetensors::parse_shard_index({reinterpret_cast<const char*>(data + 1), size - 1}, "index.json");
      if (!index.ok() && index.status().message().empty()) std::abort();
      if (index.ok())
        for (const auto& s : index->shards)
          if (s.empty() || s.find('/') != std::string::npos || s == "." || s == "..") std::abort();
      break;
    }
    default: check_directory(data + 1, size - 1); break;
  }
  return 0;
}
