// infer-inspect: what a model file holds — architecture, hyper-parameters, tokenizer, tensors.
//
//   infer-inspect MODEL.gguf|MODEL_DIR [--json] [--no-tensors] [--full-arrays]
//
// A Hugging Face directory (config.json, safetensors, tokenizer files) is shown as libinfer reads
// it: the GGUF keys and tensor names its files translate to.
//
// Exit status: 0 on success, 1 when the file cannot be read or is malformed (one line on
// stderr), 2 on a usage error.
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "format/gguf.hpp"
#include "format/model_file.hpp"

namespace {

using namespace infer;

struct Options {
  std::string path;
  bool json = false;
  bool tensors = true;
  bool full_arrays = false;
};

void usage(std::FILE* out) {
  std::fprintf(out,
               "usage: infer-inspect MODEL.gguf|MODEL_DIR [--json] [--no-tensors] [--full-arrays]\n"
               "  --json         print one JSON object instead of text\n"
               "  --no-tensors   leave out the tensor table (totals are still printed)\n"
               "  --full-arrays  print metadata arrays whole (default: long arrays are summarized)\n");
}

std::string tokenizer_kind(const std::string& model) {
  if (model == "llama") return "SentencePiece (llama)";
  if (model == "gpt2") return "byte-level BPE (gpt2)";
  if (model == "bert") return "WordPiece (bert)";
  if (model == "t5") return "Unigram (t5)";
  if (model == "rwkv") return "RWKV";
  if (model == "none") return "none";
  return model;
}

std::string human_bytes(uint64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.2f %s" : "%.0f %s", v, units[u]);
  return buf;
}

struct Totals {
  uint64_t parameters = 0;
  uint64_t bytes = 0;
  std::map<std::string, std::pair<uint64_t, uint64_t>> by_type;  // name -> (tensors, bytes)
};

Totals totals_of(const ModelFile& mf) {
  Totals t;
  for (const auto& ti : mf.tensors()) {
    t.parameters += static_cast<uint64_t>(ti.numel());
    t.bytes += ti.nbytes;
    auto& bt = t.by_type[std::string(dtype_name(ti.dtype))];
    bt.first += 1;
    bt.second += ti.nbytes;
  }
  return t;
}

// Metadata keys "<arch>.*" that hold scalars: the architecture's hyper-parameters.
std::vector<const Metadata::Entry*> hyperparameters(const ModelFile& mf, const std::string& arch) {
  std::vector<const Metadata::Entry*> out;
  if (arch.empty()) return out;
  const std::string prefix = arch + ".";
  for (const auto& e : mf.metadata().entries())
    if (e.key.compare(0, prefix.size(), prefix) == 0) out.push_back(&e);
  return out;
}

uint64_t vocab_size(const ModelFile& mf, const std::string& arch) {
  if (const Array* tokens = mf.metadata().get_array("tokenizer.ggml.tokens")) return tokens->count;
  if (auto v = mf.metadata().get_integer(arch + ".vocab_size")) return static_cast<uint64_t>(*v);
  return 0;
}

constexpr size_t kSummaryItems = 8;

std::string metadata_json(const Value& v, bool full) {
  const Array* a = v.as_array();
  if (!a || full || a->count <= 64) return value_to_json(v);
  return std::string("{\"type\": \"array\", \"element_type\": \"") + value_type_name(a->elem_type) +
         "\", \"count\": " + std::to_string(a->count) + ", \"head\": " + value_to_json(v, kSummaryItems) + "}";
}

void print_text(const ModelFile& mf, const Options& opt) {
  const Metadata& md = mf.metadata();
  const std::string arch = md.get_string("general.architecture") ? *md.get_string("general.architecture") : "";
  std::printf("file:          %s\n", mf.path().c_str());
  if (std::strcmp(mf.format(), "gguf") == 0)
    std::printf("format:        GGUF v%u, %s, alignment %" PRIu64 ", %s\n", mf.version(),
                human_bytes(mf.file_size()).c_str(), mf.alignment(), mf.is_mapped() ? "memory-mapped" : "read into memory");
  else
    std::printf("format:        %s directory, %zu file%s, %s, %s\n", mf.format(), mf.file_count(), mf.file_count() == 1 ? "" : "s",
                human_bytes(mf.file_size()).c_str(), mf.is_mapped() ? "memory-mapped" : "read into memory");
  std::printf("architecture:  %s\n", arch.empty() ? "(none)" : arch.c_str());
  if (const std::string* name = md.get_string("general.name")) std::printf("name:          %s\n", name->c_str());
  if (auto ft = md.get_integer("general.file_type")) std::printf("file type:     %" PRId64 "\n", *ft);

  const auto hp = hyperparameters(mf, arch);
  if (!hp.empty()) {
    std::printf("\nhyper-parameters:\n");
    for (const auto* e : hp)
      std::printf("  %-40s %s\n", e->key.c_str() + arch.size() + 1,
                  value_to_string(e->value, opt.full_arrays ? SIZE_MAX : kSummaryItems).c_str());
  }

  std::printf("\ntokenizer:     ");
  if (const std::string* tm = md.get_string("tokenizer.ggml.model")) {
    std::printf("%s, %" PRIu64 " tokens", tokenizer_kind(*tm).c_str(), vocab_size(mf, arch));
    if (const std::string* pre = md.get_string("tokenizer.ggml.pre")) std::printf(", pre-tokenizer %s", pre->c_str());
    if (auto bos = md.get_integer("tokenizer.ggml.bos_token_id")) std::printf(", bos %" PRId64, *bos);
    if (auto eos = md.get_integer("tokenizer.ggml.eos_token_id")) std::printf(", eos %" PRId64, *eos);
    if (const Array* merges = md.get_array("tokenizer.ggml.merges")) std::printf(", %" PRIu64 " merges", merges->count);
    std::printf("\n");
  } else {
    std::printf("(none)\n");
  }

  std::printf("\nmetadata (%zu keys):\n", md.size());
  for (const auto& e : md.entries())
    std::printf("  %-48s %-7s %s\n", e.key.c_str(), value_type_name(e.value.type()),
                value_to_string(e.value, opt.full_arrays ? SIZE_MAX : kSummaryItems).c_str());

  if (opt.tensors) {
    std::printf("\ntensors (%zu):\n", mf.tensors().size());
    std::printf("  %-40s %-8s %-28s %14s\n", "name", "type", "shape", "bytes");
    for (const auto& t : mf.tensors())
      std::printf("  %-40s %-8s %-28s %14" PRIu64 "\n", t.name.c_str(), std::string(dtype_name(t.dtype)).c_str(),
                  shape_string(t.n_dims, t.shape).c_str(), t.nbytes);
  }

  const Totals tot = totals_of(mf);
  std::printf("\ntotals:        %zu tensors, %" PRIu64 " parameters, %" PRIu64 " bytes (%s)", mf.tensors().size(),
              tot.parameters, tot.bytes, human_bytes(tot.bytes).c_str());
  if (tot.parameters) std::printf(", %.2f bits per weight", 8.0 * static_cast<double>(tot.bytes) / static_cast<double>(tot.parameters));
  std::printf("\n");
  for (const auto& [name, nb] : tot.by_type)
    std::printf("  %-8s %6" PRIu64 " tensors %14" PRIu64 " bytes\n", name.c_str(), nb.first, nb.second);
}

void print_json(const ModelFile& mf, const Options& opt) {
  const Metadata& md = mf.metadata();
  const std::string arch = md.get_string("general.architecture") ? *md.get_string("general.architecture") : "";
  std::string o = "{";
  o += "\"file\": " + json_quote(mf.path());
  o += ", \"format\": \"" + std::string(mf.format()) + "\", \"version\": " + std::to_string(mf.version());
  o += ", \"file_size\": " + std::to_string(mf.file_size());
  o += ", \"alignment\": " + std::to_string(mf.alignment());
  o += ", \"data_offset\": " + std::to_string(mf.data_offset());
  o += ", \"architecture\": " + (arch.empty() ? std::string("null") : json_quote(arch));
  const std::string* name = md.get_string("general.name");
  o += ", \"name\": " + (name ? json_quote(*name) : std::string("null"));

  o += ", \"hyperparameters\": {";
  bool first = true;
  for (const auto* e : hyperparameters(mf, arch)) {
    o += first ? "" : ", ";
    first = false;
    o += json_quote(e->key.substr(arch.size() + 1)) + ": " + metadata_json(e->value, opt.full_arrays);
  }
  o += "}";

  o += ", \"tokenizer\": ";
  if (const std::string* tm = md.get_string("tokenizer.ggml.model")) {
    o += "{\"model\": " + json_quote(*tm) + ", \"kind\": " + json_quote(tokenizer_kind(*tm)) +
         ", \"vocab_size\": " + std::to_string(vocab_size(mf, arch));
    const std::string* pre = md.get_string("tokenizer.ggml.pre");
    o += ", \"pre\": " + (pre ? json_quote(*pre) : std::string("null"));
    for (const char* k : {"bos_token_id", "eos_token_id"}) {
      auto v = md.get_integer(std::string("tokenizer.ggml.") + k);
      o += std::string(", \"") + k + "\": " + (v ? std::to_string(*v) : std::string("null"));
    }
    o += "}";
  } else {
    o += "null";
  }

  o += ", \"metadata\": {";
  first = true;
  for (const auto& e : md.entries()) {
    o += first ? "" : ", ";
    first = false;
    o += json_quote(e.key) + ": " + metadata_json(e.value, opt.full_arrays);
  }
  o += "}";

  if (opt.tensors) {
    o += ", \"tensors\": [";
    first = true;
    for (const auto& t : mf.tensors()) {
      o += first ? "" : ", ";
      first = false;
      o += "{\"name\": " + json_quote(t.name) + ", \"type\": \"" + std::string(dtype_name(t.dtype)) + "\", \"shape\": [";
      for (int d = 0; d < t.n_dims; ++d) o += (d ? ", " : "") + std::to_string(t.shape[d]);
      o += "], \"offset\": " + std::to_string(t.offset) + ", \"bytes\": " + std::to_string(t.nbytes) + "}";
    }
    o += "]";
  }

  const Totals tot = totals_of(mf);
  o += ", \"totals\": {\"tensors\": " + std::to_string(mf.tensors().size()) +
       ", \"parameters\": " + std::to_string(tot.parameters) + ", \"bytes\": " + std::to_string(tot.bytes) +
       ", \"by_type\": {";
  first = true;
  for (const auto& [tname, nb] : tot.by_type) {
    o += first ? "" : ", ";
    first = false;
    o += "\"" + tname + "\": {\"tensors\": " + std::to_string(nb.first) + ", \"bytes\": " + std::to_string(nb.second) + "}";
  }
  o += "}}}\n";
  std::fputs(o.c_str(), stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (!std::strcmp(a, "--json")) opt.json = true;
    else if (!std::strcmp(a, "--no-tensors")) opt.tensors = false;
    else if (!std::strcmp(a, "--full-arrays")) opt.full_arrays = true;
    else if (!std::strcmp(a, "-h") || !std::strcmp(a, "--help")) { usage(stdout); return 0; }
    else if (a[0] == '-' && a[1] != '\0') {
      std::fprintf(stderr, "infer-inspect: unknown option %s\n", a);
      usage(stderr);
      return 2;
    } else if (opt.path.empty()) opt.path = a;
    else {
      std::fprintf(stderr, "infer-inspect: more than one model file given\n");
      return 2;
    }
  }
  if (opt.path.empty()) {
    usage(stderr);
    return 2;
  }
  try {
    auto mf = infer::ModelFile::open(opt.path);
    if (!mf.ok()) {
      std::fprintf(stderr, "infer-inspect: %s\n", mf.status().message().c_str());
      return 1;
    }
    if (opt.json) print_json(*mf, opt);
    else print_text(*mf, opt);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "infer-inspect: %s: %s\n", opt.path.c_str(), e.what());
    return 1;
  }
  return std::fflush(stdout) == 0 ? 0 : 1;
}
