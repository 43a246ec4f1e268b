// infer-make-model: writes a GGUF of one of the families libinfer loads (llama, gemma3, qwen2,
// qwen3, phi3) with random weights, for tests, demos and benchmarks (real weights cannot be
// downloaded here). Shapes, metadata and tensor names follow what llama.cpp's converter writes
// for that family, so llama.cpp's tools load the file too.
//
//   infer-make-model -o OUT.gguf [--arch llama|gemma3|qwen2|qwen3|phi3] [--n-embd 64] [--n-layer 2] [--n-head 4]
//                    [--n-head-kv 2] [--head-dim N] [--n-ff 128] [--ctx 256]
//                    [--type f32|f16|bf16|q8_0|q4_0] [--tied] [--seed 1] [--rope-base 10000]
//                    [--sliding-window N] [--name NAME] [--vocab tokenizer.model|VOCAB.gguf]
//                    [--init default|scaled]
//
// gemma3 and qwen3: --head-dim sets attention.key_length (default n_embd / n_head). gemma3:
// --sliding-window the local layers' window (0: none; layers follow llama.cpp's default pattern,
// every sixth global); the output is always tied to the embeddings. qwen2: Q/K/V projections with
// biases. qwen3: per-head Q/K norms. phi3: fused attn_qkv and gate-up (ffn_up holds 2 n_ff rows)
// projections, and attention.sliding_window 2047 as Phi-3-mini's converter writes it (ignored by
// llama.cpp and libinfer alike).
//
// --init scaled draws each matrix at 1/sqrt(fan_in) (Q and K at 2/sqrt(fan_in)), so activations
// keep unit size and attention and logits are peaked as in trained models; the default (0.08
// everywhere) gives near-uniform distributions, where small arithmetic differences never show.
//
// The vocabulary is the minimal SentencePiece byte-fallback one (<unk>, <s>, </s> and the 256
// byte tokens <0x00>..<0xFF>), or with --vocab the one of a SentencePiece BPE tokenizer.model,
// written as llama.cpp's convert_hf_to_gguf.py writes it for a Llama model (see
// src/format/sentencepiece_model.hpp), or the tokenizer.* keys of a GGUF file copied as they
// are (llama.cpp's vocabulary-only models/ggml-vocab-llama-spm.gguf: Llama 2's and TinyLlama's
// 32000 tokens). The embedding and output shapes follow the vocabulary.
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/mapped_file.hpp"
#include "format/gguf.hpp"
#include "format/model_file.hpp"
#include "kernels/cpu/dtype_traits.hpp"
#include "format/sentencepiece_model.hpp"

namespace {

using namespace infer;

struct Options {
  std::string out;
  std::string arch = "llama";
  int head_dim = 0, sliding_window = 0;
  int n_embd = 64, n_layer = 2, n_head = 4, n_head_kv = 2, n_ff = 128, ctx = 256;
  DType type = DType::f32;
  bool tied = false;
  uint64_t seed = 1;
  float rope_base = 10000.0f;
  std::string name = "libinfer random llama";
  std::string vocab;  // a tokenizer.model or a GGUF file; empty: the minimal byte vocabulary
  bool scaled_init = false;  // --init scaled: matrices at 1/sqrt(fan_in), Q and K at 2/sqrt(fan_in)
};

[[noreturn]] void fail(const std::string& msg) {
  std::fprintf(stderr, "infer-make-model: %s\n", msg.c_str());
  std::exit(1);
}

[[noreturn]] void usage_error(const std::string& msg) {
  std::fprintf(stderr, "infer-make-model: %s\n", msg.c_str());
  std::fprintf(stderr,
               "usage: infer-make-model -o OUT.gguf [--arch llama|gemma3|qwen2|qwen3|phi3] [--n-embd N] [--n-layer N] [--n-head N]\n"
               "                        [--n-head-kv N] [--head-dim N] [--n-ff N] [--ctx N] [--type f32|f16|bf16|q8_0|q4_0]\n"
               "                        [--tied] [--seed S] [--rope-base F] [--sliding-window N] [--name NAME]\n"
               "                        [--vocab tokenizer.model|VOCAB.gguf] [--init default|scaled]\n");
  std::exit(2);
}

long parse_int(const char* s, const char* flag) {
  char* end = nullptr;
  long v = std::strtol(s, &end, 10);
  if (!*s || *end || v <= 0 || v > (1 << 20)) usage_error(std::string(flag) + " needs a positive integer");
  return v;
}

class WeightMaker {
 public:
  WeightMaker(uint64_t seed, DType type) : rng_(seed), type_(type) {}

  // A tensor of n values drawn from N(mean, std), stored in the chosen type (norms stay F32 as
  // llama.cpp's converter keeps them).
  const std::vector<uint8_t>& make(size_t n, float mean, float std, DType type) {
    std::normal_distribution<float> dist(mean, std);
    store_.emplace_back();
    auto& out = store_.back();
    // Values through the type's from_float: F16/BF16 rounded to nearest even, Q8_0/Q4_0 through
    // ggml's reference quantizers block by block (what llama-quantize --pure writes from the F32
    // model of the same arguments).
    std::vector<float> x(n);
    for (float& v : x) v = dist(rng_);
    out.resize(*dtype_row_bytes(type, n));
    cpu_type_traits(type)->from_float(x.data(), out.data(), static_cast<int64_t>(n));
    return out;
  }
  DType type() const { return type_; }

 private:
  std::mt19937_64 rng_;
  DType type_;
  std::vector<std::vector<uint8_t>> store_;  // keeps data alive until the writer has written
};

// SentencePiece byte fallback alone. Token types: 2 unknown, 3 control, 6 byte.
VocabFields byte_vocab() {
  VocabFields v;
  v.model = "llama";
  v.tokens = {"<unk>", "<s>", "</s>"};
  v.scores = {0.0f, 0.0f, 0.0f};
  v.token_types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    char piece[8];
    std::snprintf(piece, sizeof piece, "<0x%02X>", b);
    v.tokens.push_back(piece);
    v.scores.push_back(0.0f);
    v.token_types.push_back(6);
  }
  return v;
}

VocabFields read_vocab(const std::string& path) {
  auto file = MappedFile::open(path);
  if (!file.ok()) fail(file.status().message());
  const auto bytes = file->bytes();
  auto model = parse_sentencepiece_model({reinterpret_cast<const char*>(bytes.data()), bytes.size()});
  if (!model.ok()) fail(path + ": " + model.status().message());
  auto fields = vocab_fields_from_sentencepiece(*model);
  if (!fields.ok()) fail(path + ": " + fields.status().message());
  return std::move(fields).value();
}

bool is_gguf(const std::string& path) {
  auto file = MappedFile::open(path);
  if (!file.ok()) fail(file.status().message());
  const auto bytes = file->bytes();
  return bytes.size() >= 4 && std::memcmp(bytes.data(), "GGUF", 4) == 0;
}

// The tokenizer.* keys of a GGUF file, and the number of its tokens.
Metadata read_gguf_vocab(const std::string& path, int& n_vocab) {
  auto file = ModelFile::open(path);
  if (!file.ok()) fail(file.status().message());
  Metadata keys;
  for (const Metadata::Entry& e : file->metadata().entries())
    if (e.key.rfind("tokenizer.", 0) == 0) keys.set(e.key, e.value);
  const Array* tokens = keys.get_array("tokenizer.ggml.tokens");
  if (!tokens || tokens->count == 0 || tokens->count > (1u << 24)) fail(path + ": no tokenizer.ggml.tokens array of 1 to 2^24 tokens");
  n_vocab = static_cast<int>(tokens->count);
  return keys;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) usage_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "-o" || a == "--out") o.out = next();
    else if (a == "--arch") o.arch = next();
    else if (a == "--head-dim") o.head_dim = static_cast<int>(parse_int(next(), "--head-dim"));
    else if (a == "--sliding-window") o.sliding_window = static_cast<int>(parse_int(next(), "--sliding-window"));
    else if (a == "--n-embd") o.n_embd = static_cast<int>(parse_int(next(), "--n-embd"));
    else if (a == "--n-layer") o.n_layer = static_cast<int>(parse_int(next(), "--n-layer"));
    else if (a == "--n-head") o.n_head = static_cast<int>(parse_int(next(), "--n-head"));
    else if (a == "--n-head-kv") o.n_head_kv = static_cast<int>(parse_int(next(), "--n-head-kv"));
    else if (a == "--n-ff") o.n_ff = static_cast<int>(parse_int(next(), "--n-ff"));
    else if (a == "--ctx") o.ctx = static_cast<int>(parse_int(next(), "--ctx"));
    else if (a == "--seed") o.seed = static_cast<uint64_t>(parse_int(next(), "--seed"));
    else if (a == "--rope-base") o.rope_base = std::strtof(next(), nullptr);
    else if (a == "--name") o.name = next();
    else if (a == "--vocab") o.vocab = next();
    else if (a == "--tied") o.tied = true;
    else if (a == "--init") {
      const std::string v = next();
      if (v == "scaled") o.scaled_init = true;
      else if (v != "default") usage_error("--init must be default or scaled");
    }
    else if (a == "--type") {
      const std::string t = next();
      // Other types: infer-quantize (their rows and the model's shapes must agree on block sizes).
      const auto type = dtype_from_name(t);
      if (t != "f32" && t != "f16" && t != "bf16" && t != "q8_0" && t != "q4_0")
        usage_error("--type must be f32, f16, bf16, q8_0 or q4_0");
      o.type = *type;
    } else usage_error("unknown argument " + a);
  }
  if (o.out.empty()) usage_error("-o OUT.gguf is required");
  if (o.arch != "llama" && o.arch != "gemma3" && o.arch != "qwen2" && o.arch != "qwen3" && o.arch != "phi3")
    usage_error("--arch must be llama, gemma3, qwen2, qwen3 or phi3");
  const bool gemma = o.arch == "gemma3", qwen2 = o.arch == "qwen2", qwen3 = o.arch == "qwen3", phi3 = o.arch == "phi3";
  if (!gemma && o.sliding_window != 0) usage_error("--sliding-window needs --arch gemma3");
  if (!gemma && !qwen3 && o.head_dim != 0) usage_error("--head-dim needs --arch gemma3 or qwen3");
  if (o.head_dim == 0 && o.n_embd % o.n_head != 0) usage_error("--n-embd must be a multiple of --n-head");
  if (o.n_head % o.n_head_kv != 0) usage_error("--n-head must be a multiple of --n-head-kv");
  // (llama.cpp gives the special tokens of a model whose name contains "phi3" Phi-3's attributes
  // and then requires <|endoftext|> in the vocabulary: the default name avoids it.)
  if (o.name == "libinfer random llama") o.name = phi3 ? std::string("libinfer random fused-projection model") : "libinfer random " + o.arch;

  const int head_dim = o.head_dim != 0 ? o.head_dim : o.n_embd / o.n_head;
  const int n_embd_q = head_dim * o.n_head;
  const int n_embd_kv = head_dim * o.n_head_kv;
  if ((o.type == DType::q8_0 || o.type == DType::q4_0) && (o.n_embd % 32 != 0 || o.n_ff % 32 != 0 || n_embd_q % 32 != 0))
    usage_error("--type q8_0 and q4_0 need --n-embd, --n-ff and the query width (heads x head size) to be multiples of 32");

  const bool gguf_vocab = !o.vocab.empty() && is_gguf(o.vocab);
  int n_vocab = 0;
  const Metadata vocab_keys = gguf_vocab ? read_gguf_vocab(o.vocab, n_vocab) : Metadata{};
  const VocabFields vocab = gguf_vocab ? VocabFields{} : o.vocab.empty() ? byte_vocab() : read_vocab(o.vocab);
  if (!gguf_vocab) n_vocab = static_cast<int>(vocab.tokens.size());

  gguf::Writer w;
  Metadata& md = w.metadata();
  const std::string a = o.arch + ".";
  md.set("general.architecture", o.arch);
  md.set("general.name", o.name);
  // llama_ftype: ALL_F32 0, MOSTLY_F16 1, MOSTLY_Q4_0 2, MOSTLY_Q8_0 7, MOSTLY_BF16 32.
  md.set("general.file_type", uint32_t{o.type == DType::f32    ? 0u
                                       : o.type == DType::f16  ? 1u
                                       : o.type == DType::q4_0 ? 2u
                                       : o.type == DType::q8_0 ? 7u
                                                               : 32u});
  md.set(a + "context_length", uint32_t(o.ctx));
  md.set(a + "embedding_length", uint32_t(o.n_embd));
  md.set(a + "block_count", uint32_t(o.n_layer));
  md.set(a + "feed_forward_length", uint32_t(o.n_ff));
  if (!gemma && !qwen2 && !qwen3) md.set(a + "rope.dimension_count", uint32_t(head_dim));
  md.set(a + "attention.head_count", uint32_t(o.n_head));
  md.set(a + "attention.head_count_kv", uint32_t(o.n_head_kv));
  if (gemma) {  // as convert_hf_to_gguf.py writes Gemma 3
    md.set(a + "attention.layer_norm_rms_epsilon", 1e-6f);
    md.set(a + "attention.key_length", uint32_t(head_dim));
    md.set(a + "attention.value_length", uint32_t(head_dim));
    md.set(a + "rope.freq_base", o.rope_base);
    if (o.sliding_window > 0) md.set(a + "attention.sliding_window", uint32_t(o.sliding_window));
  } else if (qwen2 || qwen3) {  // as convert_hf_to_gguf.py writes Qwen2 and Qwen3
    md.set(a + "rope.freq_base", o.rope_base);
    md.set(a + "attention.layer_norm_rms_epsilon", 1e-6f);
    if (qwen3) {
      md.set(a + "attention.key_length", uint32_t(head_dim));
      md.set(a + "attention.value_length", uint32_t(head_dim));
    }
  } else if (phi3) {  // as convert_hf_to_gguf.py writes Phi-3-mini-4k
    md.set(a + "rope.freq_base", o.rope_base);
    md.set(a + "attention.layer_norm_rms_epsilon", 1e-5f);
    md.set(a + "attention.sliding_window", uint32_t{2047});
  } else {
    md.set(a + "attention.layer_norm_rms_epsilon", 1e-5f);
    md.set(a + "rope.freq_base", o.rope_base);
    md.set(a + "vocab_size", uint32_t(n_vocab));
  }
  if (o.vocab.empty()) {  // the key order of the files in tests/data/gguf
    md.set("tokenizer.ggml.model", "llama");
    md.set("tokenizer.ggml.pre", "default");
    md.set("tokenizer.ggml.tokens", Array::of_strings(vocab.tokens));
    md.set("tokenizer.ggml.scores", Array::of(ValueType::f32, std::span<const float>(vocab.scores)));
    md.set("tokenizer.ggml.token_type", Array::of(ValueType::i32, std::span<const int32_t>(vocab.token_types)));
    md.set("tokenizer.ggml.unknown_token_id", uint32_t{0});
    md.set("tokenizer.ggml.bos_token_id", uint32_t{1});
    md.set("tokenizer.ggml.eos_token_id", uint32_t{2});
    md.set("tokenizer.ggml.add_bos_token", true);
    md.set("tokenizer.ggml.add_eos_token", false);
  } else if (gguf_vocab) {
    for (const Metadata::Entry& e : vocab_keys.entries()) md.set(e.key, e.value);
  } else {
    vocab.write_to(md);
    md.set("tokenizer.ggml.pre", "default");
  }

  WeightMaker wm(o.seed, o.type);
  auto add = [&](const std::string& name, std::vector<int64_t> shape, float mean, float std, DType type) {
    size_t n = 1;
    for (auto d : shape) n *= static_cast<size_t>(d);
    const auto& data = wm.make(n, mean, std, type);
    if (Status s = w.add_tensor(name, type, shape, data); !s.is_ok()) fail(s.message());
  };
  const float w_std = 0.02f;
  // The std of a matrix's values: 0.08 by default; with --init scaled 1/sqrt(fan_in) (2/sqrt for Q
  // and K), so that activations keep unit size and attention and logits are peaked, as in trained
  // models, instead of near-uniform.
  auto sd = [&](int64_t fan_in, bool qk = false) {
    return o.scaled_init ? (qk ? 2.0f : 1.0f) / std::sqrt(static_cast<float>(fan_in)) : w_std * 4;
  };
  // Gemma scales embeddings by sqrt(n_embd) and reuses them as the output, the other families
  // reuse them with --tied: smaller values keep those logits in a realistic range. (Llama files
  // keep the values they always had.)
  const bool small_embd = gemma || (o.tied && o.arch != "llama");
  // --init scaled: unit-size embeddings, or 1/sqrt(n_embd) when they are also the output matrix.
  const float embd_std = o.scaled_init ? (o.tied || gemma ? 1.0f / std::sqrt(static_cast<float>(o.n_embd)) : 1.0f)
                                       : small_embd ? 0.05f : 1.0f;
  add("token_embd.weight", {o.n_embd, n_vocab}, 0.0f, embd_std, o.type);
  for (int l = 0; l < o.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    add(p + "attn_norm.weight", {o.n_embd}, 1.0f, 0.1f, DType::f32);
    if (phi3) {
      add(p + "attn_qkv.weight", {o.n_embd, n_embd_q + 2 * n_embd_kv}, 0.0f, sd(o.n_embd), o.type);
    } else {
      add(p + "attn_q.weight", {o.n_embd, n_embd_q}, 0.0f, sd(o.n_embd, true), o.type);
      add(p + "attn_k.weight", {o.n_embd, n_embd_kv}, 0.0f, sd(o.n_embd, true), o.type);
      add(p + "attn_v.weight", {o.n_embd, n_embd_kv}, 0.0f, sd(o.n_embd), o.type);
    }
    if (qwen2) {  // biases large enough to matter
      add(p + "attn_q.bias", {n_embd_q}, 0.0f, 0.5f, DType::f32);
      add(p + "attn_k.bias", {n_embd_kv}, 0.0f, 0.5f, DType::f32);
      add(p + "attn_v.bias", {n_embd_kv}, 0.0f, 0.5f, DType::f32);
    }
    if (qwen3) {
      add(p + "attn_q_norm.weight", {head_dim}, 1.0f, 0.1f, DType::f32);
      add(p + "attn_k_norm.weight", {head_dim}, 1.0f, 0.1f, DType::f32);
    }
    add(p + "attn_output.weight", {n_embd_q, o.n_embd}, 0.0f, sd(n_embd_q), o.type);
    if (gemma) {
      add(p + "attn_q_norm.weight", {head_dim}, 1.0f, 0.1f, DType::f32);
      add(p + "attn_k_norm.weight", {head_dim}, 1.0f, 0.1f, DType::f32);
      add(p + "post_attention_norm.weight", {o.n_embd}, 1.0f, 0.1f, DType::f32);
      add(p + "post_ffw_norm.weight", {o.n_embd}, 1.0f, 0.1f, DType::f32);
    }
    add(p + "ffn_norm.weight", {o.n_embd}, 1.0f, 0.1f, DType::f32);
    if (phi3) {
      add(p + "ffn_up.weight", {o.n_embd, 2 * o.n_ff}, 0.0f, sd(o.n_embd), o.type);
    } else {
      add(p + "ffn_gate.weight", {o.n_embd, o.n_ff}, 0.0f, sd(o.n_embd), o.type);
      add(p + "ffn_up.weight", {o.n_embd, o.n_ff}, 0.0f, sd(o.n_embd), o.type);
    }
    add(p + "ffn_down.weight", {o.n_ff, o.n_embd}, 0.0f, sd(o.n_ff), o.type);
  }
  add("output_norm.weight", {o.n_embd}, 1.0f, 0.1f, DType::f32);
  if (!o.tied && !gemma) add("output.weight", {o.n_embd, n_vocab}, 0.0f, sd(o.n_embd), o.type);

  if (Status s = w.write(o.out); !s.is_ok()) fail(s.message());
  std::fprintf(stderr, "infer-make-model: wrote %s (%d layers, n_embd %d, vocab %d, %s)\n", o.out.c_str(), o.n_layer,
               o.n_embd, n_vocab, std::string(dtype_name(o.type)).c_str());
  return 0;
}
