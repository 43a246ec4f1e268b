// The safetensors reader and the Hugging Face directory reader: malformed files made here byte by
// byte (each rule rejected with a message naming it), and directories whose translation is checked
// against the rules of llama.cpp's convert_hf_to_gguf.py written out independently here (names,
// Llama's Q/K row order, Gemma's +1 on norms, config keys, tokenizer keys).
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "core/half.hpp"
#include "format/model_file.hpp"
#include "format/safetensors.hpp"
#include "test_util.hpp"

using namespace infer;

namespace {

// A safetensors file from its header text (padded to 8 with spaces) and data bytes.
std::vector<uint8_t> st_bytes(const std::string& header, const std::vector<uint8_t>& data) {
  std::string h = header;
  while (h.size() % 8) h += ' ';
  std::vector<uint8_t> out(8 + h.size() + data.size());
  const uint64_t n = h.size();
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, h.data(), h.size());
  if (!data.empty()) std::memcpy(out.data() + 8 + h.size(), data.data(), data.size());
  return out;
}

Result<safetensors::File> parse(const std::vector<uint8_t>& bytes) {
  auto f = MappedFile::from_bytes(bytes, "bad.safetensors");
  REQUIRE(f.ok());
  return safetensors::read(std::move(f).value());
}

void expect_error(const std::vector<uint8_t>& bytes, std::initializer_list<const char*> fragments,
                  StatusCode code = StatusCode::malformed_file) {
  auto r = parse(bytes);
  REQUIRE_FALSE(r.ok());
  INFO(r.status().message());
  CHECK(r.status().code() == code);
  CHECK(r.status().message().rfind("bad.safetensors", 0) == 0);
  for (const char* f : fragments) CHECK(r.status().message().find(f) != std::string::npos);
}

const std::string kValidHeader =
    R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
    R"("b":{"dtype":"BF16","shape":[3],"data_offsets":[16,22]}})";

}  // namespace

TEST_CASE("a valid safetensors file parses: metadata, dtypes, shapes, offsets sorted", "[safetensors]") {
  auto r = parse(st_bytes(kValidHeader, std::vector<uint8_t>(22, 7)));
  REQUIRE(r.ok());
  REQUIRE(r->tensors.size() == 2);
  CHECK(r->tensors[0].name == "a");
  CHECK(r->tensors[0].shape == std::vector<int64_t>{2, 2});
  CHECK(r->tensors[1].dtype == safetensors::Dtype::bf16);
  CHECK(r->tensors[1].nbytes() == 6);
  REQUIRE(r->metadata.size() == 1);
  CHECK(r->metadata[0].second == "pt");
  // F64 (llm-compressor's transform matrices): 8 bytes an element, read as float.
  std::vector<uint8_t> f64(16);
  const double values[2] = {1.0, -0.125};
  std::memcpy(f64.data(), values, 16);
  auto d = parse(st_bytes(R"({"h":{"dtype":"F64","shape":[2],"data_offsets":[0,16]}})", f64));
  REQUIRE(d.ok());
  CHECK(d->tensors[0].dtype == safetensors::Dtype::f64);
  CHECK(safetensors::element_as_f32(DType::f64, d->tensors[0].data, 1) == -0.125f);
}

TEST_CASE("every safetensors rule is enforced with a message naming it", "[safetensors][malformed]") {
  const std::vector<uint8_t> data(22, 7);
  SECTION("too small for the length") { expect_error({1, 2, 3}, {"too small"}); }
  SECTION("header length over 100 MB") {
    std::vector<uint8_t> b(16, 0);
    const uint64_t n = (100ull << 20) + 1;
    std::memcpy(b.data(), &n, 8);
    expect_error(b, {"exceeds the limit"});
  }
  SECTION("header length past the end") {
    auto b = st_bytes(kValidHeader, {});
    b.resize(40);
    expect_error(b, {"runs past the end of the file"});
  }
  SECTION("not JSON") { expect_error(st_bytes("{\"a\":", data), {"not valid JSON"}); }
  SECTION("duplicate key") {
    expect_error(st_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                          std::vector<uint8_t>(4)),
                 {"duplicate key"});
  }
  SECTION("deep nesting") { expect_error(st_bytes("{\"x\":" + std::string(200, '[') + std::string(200, ']') + "}", {}), {"nested deeper"}); }
  SECTION("metadata values must be strings") {
    expect_error(st_bytes(R"({"__metadata__":{"n":1}})", {}), {"__metadata__", "must be a string"});
  }
  SECTION("unknown dtype") {
    expect_error(st_bytes(R"({"a":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}})", data), {"unknown dtype"});
  }
  SECTION("valid-but-unsupported dtype") {
    expect_error(st_bytes(R"({"a":{"dtype":"U64","shape":[1],"data_offsets":[0,8]}})", std::vector<uint8_t>(8)), {"U64", "not supported"},
                 StatusCode::unsupported);
  }
  SECTION("negative dimension") {
    expect_error(st_bytes(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", data), {"non-negative"});
  }
  SECTION("dimension product overflows") {
    expect_error(st_bytes(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", data),
                 {"overflows"});
  }
  SECTION("byte size overflows") {
    expect_error(st_bytes(R"({"a":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,4]}})", data),
                 {"byte size overflows"});
  }
  SECTION("offsets end before they begin") {
    expect_error(st_bytes(R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[8,4]}})", data), {"end before they begin"});
  }
  SECTION("offsets outside the file") {
    expect_error(st_bytes(R"({"a":{"dtype":"F32","shape":[8],"data_offsets":[0,32]}})", data), {"run past the end"});
  }
  SECTION("size disagrees with shape and dtype") {
    expect_error(st_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,22]}})", data), {"hold 22 bytes", "take 8"});
  }
  SECTION("overlapping tensors") {
    expect_error(st_bytes(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}})",
                          std::vector<uint8_t>(20)),
                 {"overlap"});
  }
  SECTION("a gap between tensors") {
    expect_error(st_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                          std::vector<uint8_t>(12)),
                 {"gap"});
  }
  SECTION("bytes after the last tensor") {
    expect_error(st_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", std::vector<uint8_t>(12)),
                 {"after the last tensor"});
  }
  SECTION("unknown field") {
    expect_error(st_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}})", std::vector<uint8_t>(4)),
                 {"unknown field"});
  }
  SECTION("missing data_offsets") {
    expect_error(st_bytes(R"({"a":{"dtype":"F32","shape":[1]}})", std::vector<uint8_t>(4)), {"data_offsets"});
  }
}

TEST_CASE("every truncation of a valid safetensors file is an error", "[safetensors][malformed]") {
  const auto full = st_bytes(kValidHeader, std::vector<uint8_t>(22, 7));
  for (size_t n = 0; n < full.size(); ++n) {
    INFO("prefix of " << n << " bytes");
    CHECK_FALSE(parse(std::vector<uint8_t>(full.begin(), full.begin() + static_cast<ptrdiff_t>(n))).ok());
  }
}

TEST_CASE("a shard index lists plain file names only", "[safetensors]") {
  auto ok = safetensors::parse_shard_index(R"({"weight_map":{"a":"s1.safetensors","b":"s2.safetensors","c":"s1.safetensors"}})", "i.json");
  REQUIRE(ok.ok());
  CHECK(ok->shards == std::vector<std::string>{"s1.safetensors", "s2.safetensors"});
  for (const char* bad : {R"({"weight_map":{"a":"../x.safetensors"}})", R"({"weight_map":{"a":".."}})", R"({"weight_map":{}})",
                          R"({"weight_map":{"a":1}})", R"({"x":1})"}) {
    INFO(bad);
    auto r = safetensors::parse_shard_index(bad, "i.json");
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().rfind("i.json: ", 0) == 0);
  }
}

namespace {

// A tiny Hugging Face directory of one family, tensors filled with their element index (F32),
// so that every row can be traced through the translation.
struct HfDir {
  test::TempDir dir;
  std::string config;
  std::string tensors_header;
  std::vector<uint8_t> data;

  void add(const std::string& name, std::vector<int64_t> shape, const std::string& dtype = "F32") {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    const size_t begin = data.size();
    for (int64_t i = 0; i < n; ++i) {
      if (dtype == "F32") {
        const float v = static_cast<float>(i);
        data.insert(data.end(), reinterpret_cast<const uint8_t*>(&v), reinterpret_cast<const uint8_t*>(&v) + 4);
      } else {  // BF16
        const uint16_t v = f32_to_bf16(static_cast<float>(i) / 64.0f);
        data.insert(data.end(), reinterpret_cast<const uint8_t*>(&v), reinterpret_cast<const uint8_t*>(&v) + 2);
      }
    }
    std::string dims;
    for (auto dim : shape) {
      if (!dims.empty()) dims += ',';
      dims += std::to_string(dim);
    }
    if (!tensors_header.empty()) tensors_header += ',';
    tensors_header += '"';
    tensors_header += name;
    tensors_header += "\":{\"dtype\":\"";
    tensors_header += dtype;
    tensors_header += "\",\"shape\":[";
    tensors_header += dims;
    tensors_header += "],\"data_offsets\":[";
    tensors_header += std::to_string(begin);
    tensors_header += ',';
    tensors_header += std::to_string(data.size());
    tensors_header += "]}";
  }
  void write_text(const std::string& name, const std::string& text) {
    test::write_bytes(dir.file(name), std::vector<uint8_t>(text.begin(), text.end()));
  }
  Result<ModelFile> open() {
    write_text("config.json", config);
    test::write_bytes(dir.file("model.safetensors"), st_bytes("{" + tensors_header + "}", data));
    return ModelFile::open(dir.path().string());
  }
};

// A byte-level BPE tokenizer.json of 30 tokens (a..z, "Ġ", "ab", "Ġa", <|endoftext|>).
std::string tiny_tokenizer_json() {
  std::string vocab;
  for (int c = 0; c < 26; ++c) {
    vocab += '"';
    vocab.push_back(static_cast<char>('a' + c));
    vocab += "\":";
    vocab += std::to_string(c);
    vocab += ',';
  }
  vocab += "\"\xC4\xA0\":26,\"ab\":27,\"\xC4\xA0" "a\":28,\"<|endoftext|>\":29";
  return R"({"added_tokens":[{"id":29,"content":"<|endoftext|>","special":true}],)"
         R"("pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,"use_regex":true},)"
         R"("model":{"type":"BPE","vocab":{)" + vocab + R"(},"merges":["a b",["Ġ","a"]]}})";
}

const char* kLlamaConfig = R"({"architectures":["LlamaForCausalLM"],"hidden_size":8,"num_hidden_layers":1,
  "num_attention_heads":2,"num_key_value_heads":1,"intermediate_size":16,"vocab_size":30,"rms_norm_eps":1e-5,
  "rope_theta":500000.0,"max_position_embeddings":64,"tie_word_embeddings":false})";

void add_llama_layer(HfDir& d) {
  d.add("model.embed_tokens.weight", {30, 8});
  d.add("model.norm.weight", {8});
  d.add("lm_head.weight", {30, 8});
  const std::string p = "model.layers.0.";
  d.add(p + "input_layernorm.weight", {8});
  d.add(p + "post_attention_layernorm.weight", {8});
  d.add(p + "self_attn.q_proj.weight", {8, 8});
  d.add(p + "self_attn.k_proj.weight", {4, 8});
  d.add(p + "self_attn.v_proj.weight", {4, 8});
  d.add(p + "self_attn.o_proj.weight", {8, 8});
  d.add(p + "mlp.gate_proj.weight", {16, 8});
  d.add(p + "mlp.up_proj.weight", {16, 8});
  d.add(p + "mlp.down_proj.weight", {8, 16});
}

float at(const TensorInfo& t, int64_t i) {
  float v;
  std::memcpy(&v, static_cast<const uint8_t*>(t.view.data) + 4 * i, 4);
  return v;
}

}  // namespace

TEST_CASE("a Llama directory translates to the keys, names and rotary row order convert_hf_to_gguf.py writes", "[safetensors][hf]") {
  HfDir d;
  d.config = kLlamaConfig;
  d.write_text("tokenizer.json", tiny_tokenizer_json());
  d.write_text("tokenizer_config.json", R"({"eos_token":"<|endoftext|>","add_bos_token":false,"chat_template":"{{ x }}"})");
  d.write_text("generation_config.json", R"({"temperature":0.6,"top_p":0.9,"top_k":20})");
  add_llama_layer(d);
  auto mf = d.open();
  REQUIRE(mf.ok());
  CHECK(std::string(mf->format()) == "safetensors");
  const Metadata& md = mf->metadata();
  CHECK(*md.get_string("general.architecture") == "llama");
  CHECK(md.get_integer("llama.embedding_length") == 8);
  CHECK(md.get_integer("llama.attention.head_count_kv") == 1);
  CHECK(md.get_integer("llama.rope.dimension_count") == 4);
  CHECK(md.get_number("llama.rope.freq_base") == 500000.0);
  CHECK(md.get_number("llama.attention.layer_norm_rms_epsilon") == Approx(1e-5));
  CHECK(*md.get_string("tokenizer.ggml.model") == "gpt2");
  CHECK(*md.get_string("tokenizer.ggml.pre") == "gpt-2");
  CHECK(md.get_integer("tokenizer.ggml.eos_token_id") == 29);
  CHECK(md.get_bool("tokenizer.ggml.add_bos_token") == false);
  CHECK(*md.get_string("tokenizer.chat_template") == "{{ x }}");
  CHECK(md.get_number("general.sampling.temp") == Approx(0.6));
  CHECK(md.get_integer("general.sampling.top_k") == 20);
  REQUIRE(md.get_array("tokenizer.ggml.merges"));
  CHECK(md.get_array("tokenizer.ggml.merges")->strings == std::vector<std::string>{"a b", "\xC4\xA0 a"});
  const Array* types = md.get_array("tokenizer.ggml.token_type");
  REQUIRE(types);
  CHECK(types->as<int32_t>()[29] == 3);  // special added token: control
  CHECK(types->as<int32_t>()[0] == 1);

  const TensorInfo* q = mf->find_tensor("blk.0.attn_q.weight");
  const TensorInfo* k = mf->find_tensor("blk.0.attn_k.weight");
  REQUIRE(q);
  REQUIRE(k);
  CHECK(q->shape[0] == 8);
  CHECK(q->shape[1] == 8);
  // convert's permute: GGUF row h*d + 2i + s holds HF row h*d + s*d/2 + i (d = 4 here). HF row r
  // starts with the value 8r (the tensor holds its element index).
  const int hf_rows_of_q[8] = {0, 2, 1, 3, 4, 6, 5, 7};
  for (int r = 0; r < 8; ++r) CHECK(at(*q, r * 8) == static_cast<float>(8 * hf_rows_of_q[r]));
  const int hf_rows_of_k[4] = {0, 2, 1, 3};  // one KV head
  for (int r = 0; r < 4; ++r) CHECK(at(*k, r * 8) == static_cast<float>(8 * hf_rows_of_k[r]));
  // V is not permuted and stays a view into the file.
  const TensorInfo* v = mf->find_tensor("blk.0.attn_v.weight");
  REQUIRE(v);
  CHECK(at(*v, 8) == 8.0f);
  for (const char* name : {"token_embd.weight", "output.weight", "output_norm.weight", "blk.0.attn_norm.weight",
                           "blk.0.ffn_norm.weight", "blk.0.attn_output.weight", "blk.0.ffn_gate.weight", "blk.0.ffn_up.weight",
                           "blk.0.ffn_down.weight"})
    CHECK(mf->find_tensor(name));
  CHECK(mf->find_tensor("blk.0.ffn_down.weight")->shape[0] == 16);
}

TEST_CASE("a Gemma 3 directory gets its norms +1, its post norms and its sliding window as convert writes them", "[safetensors][hf]") {
  HfDir d;
  d.config = R"({"architectures":["Gemma3ForCausalLM"],"hidden_size":8,"num_hidden_layers":2,"num_attention_heads":2,
    "num_key_value_heads":1,"head_dim":4,"intermediate_size":16,"vocab_size":30,"rms_norm_eps":1e-6,"rope_theta":1000000.0,
    "rope_local_base_freq":10000.0,"sliding_window":512,"layer_types":["sliding_attention","full_attention"],
    "query_pre_attn_scalar":4,"tie_word_embeddings":true})";
  d.write_text("tokenizer.json", tiny_tokenizer_json());
  d.add("model.embed_tokens.weight", {32, 8});  // two padding rows beyond the 30 tokens
  d.add("model.norm.weight", {8}, "BF16");
  for (int l = 0; l < 2; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    d.add(p + "input_layernorm.weight", {8});
    d.add(p + "post_attention_layernorm.weight", {8});
    d.add(p + "pre_feedforward_layernorm.weight", {8});
    d.add(p + "post_feedforward_layernorm.weight", {8});
    d.add(p + "self_attn.q_norm.weight", {4});
    d.add(p + "self_attn.k_norm.weight", {4});
    d.add(p + "self_attn.q_proj.weight", {8, 8});
  }
  auto mf = d.open();
  REQUIRE(mf.ok());
  const Metadata& md = mf->metadata();
  CHECK(*md.get_string("general.architecture") == "gemma3");
  CHECK(md.get_integer("gemma3.attention.sliding_window") == 512);
  CHECK(md.get_integer("gemma3.attention.key_length") == 4);
  CHECK(md.get_number("gemma3.rope.freq_base_swa") == 10000.0);
  const Array* pattern = md.get_array("gemma3.attention.sliding_window_pattern");
  REQUIRE(pattern);
  CHECK(pattern->integer_at(0) == 1);
  CHECK(pattern->integer_at(1) == 0);
  // Norms: value i + 1, stored F32; BF16 norms too (i/64 + 1).
  for (const char* name : {"blk.1.attn_norm.weight", "blk.1.post_attention_norm.weight", "blk.1.ffn_norm.weight",
                           "blk.1.post_ffw_norm.weight", "blk.1.attn_q_norm.weight", "blk.1.attn_k_norm.weight"}) {
    const TensorInfo* t = mf->find_tensor(name);
    REQUIRE(t);
    CHECK(t->dtype == DType::f32);
    CHECK(at(*t, 3) == 4.0f);
  }
  const TensorInfo* norm = mf->find_tensor("output_norm.weight");
  REQUIRE(norm);
  CHECK(norm->dtype == DType::f32);
  CHECK(at(*norm, 2) == 1.0f + 2.0f / 64.0f);
  // Q is not permuted for Gemma (NeoX RoPE), and the embeddings lose their padding rows.
  CHECK(at(*mf->find_tensor("blk.0.attn_q.weight"), 8) == 8.0f);
  CHECK(mf->find_tensor("token_embd.weight")->shape[1] == 30);
  CHECK(mf->find_tensor("token_embd.weight")->nbytes == 30 * 8 * 4);
  CHECK_FALSE(mf->find_tensor("output.weight"));
}

TEST_CASE("a Hugging Face directory with a problem fails with a message naming the file and the problem", "[safetensors][hf]") {
  SECTION("no config.json") {
    test::TempDir empty;
    auto r = ModelFile::open(empty.path().string());
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find("config.json") != std::string::npos);
  }
  HfDir d;
  d.config = kLlamaConfig;
  d.write_text("tokenizer.json", tiny_tokenizer_json());
  auto expect = [&](std::initializer_list<const char*> fragments) {
    auto r = d.open();
    REQUIRE_FALSE(r.ok());
    INFO(r.status().message());
    for (const char* f : fragments) CHECK(r.status().message().find(f) != std::string::npos);
  };
  SECTION("an unsupported architecture") {
    d.config = R"({"architectures":["GPT2LMHeadModel"]})";
    expect({"config.json", "GPT2LMHeadModel", "not supported"});
  }
  SECTION("a missing hyper-parameter") {
    d.config = R"({"architectures":["LlamaForCausalLM"],"hidden_size":8})";
    expect({"config.json", "num_hidden_layers"});
  }
  SECTION("a tensor with no GGUF name") {
    add_llama_layer(d);
    d.add("model.layers.0.mystery.weight", {2});
    expect({"model.safetensors", "mystery", "no GGUF counterpart"});
  }
  SECTION("a compressed-tensors scale that is not a float") {
    add_llama_layer(d);
    d.tensors_header += R"(,"model.layers.0.self_attn.q_proj.weight_scale":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[)" +
                        std::to_string(d.data.size()) + "," + std::to_string(d.data.size() + 2) + "]}";
    d.data.resize(d.data.size() + 2);
    expect({"F8_E4M3"});
  }
  SECTION("Q rows that do not split into heads") {
    d.add("model.layers.0.self_attn.q_proj.weight", {6, 8});
    expect({"q_proj", "heads"});
  }
  SECTION("an unsupported RoPE scaling") {
    d.config = std::string(kLlamaConfig).replace(std::string(kLlamaConfig).rfind('}'), 1, R"(,"rope_scaling":{"rope_type":"yarn","factor":4}})");
    expect({"rope_scaling", "yarn"});
  }
  SECTION("a BPE tokenizer.json neither byte-level nor with byte fallback") {
    add_llama_layer(d);
    d.write_text("tokenizer.json", R"({"model":{"type":"BPE","vocab":{"a":0},"merges":[]},"pre_tokenizer":{"type":"Whitespace"}})");
    expect({"tokenizer.json", "neither byte-level nor SentencePiece-style"});
  }
  SECTION("a shard index naming a tensor its shard lacks") {
    add_llama_layer(d);
    d.write_text("model.safetensors.index.json", R"({"weight_map":{"model.norm.weight":"model.safetensors","x.weight":"model.safetensors"}})");
    expect({"model.safetensors.index.json", "x.weight"});
  }
}

TEST_CASE("Llama 3 RoPE scaling in config.json becomes rope_freqs.weight with convert's factors", "[safetensors][hf]") {
  HfDir d;
  d.config = std::string(kLlamaConfig).replace(std::string(kLlamaConfig).rfind('}'), 1,
                                               R"(,"rope_scaling":{"rope_type":"llama3","factor":8.0,"low_freq_factor":1.0,)"
                                               R"("high_freq_factor":4.0,"original_max_position_embeddings":8192}})");
  d.write_text("tokenizer.json", tiny_tokenizer_json());
  add_llama_layer(d);
  auto mf = d.open();
  REQUIRE(mf.ok());
  const TensorInfo* f = mf->find_tensor("rope_freqs.weight");
  REQUIRE(f);
  REQUIRE(f->shape[0] == 2);  // head size 4: two pairs
  // Pair 0: frequency 1 (wavelength 2 pi < 2048): factor 1. Pair 1: frequency 500000^-0.5
  // (wavelength 4443, between 2048 and 8192): smooth = (8192/4443 - 1) / 3, factor
  // 1 / ((1 - smooth) / 8 + smooth) (numbers from convert_hf_to_gguf.py's formula, in double here).
  CHECK(at(*f, 0) == 1.0f);
  const double wavelen = 2 * 3.141592653589793 * std::sqrt(500000.0);
  const double smooth = (8192.0 / wavelen - 1.0) / 3.0;
  CHECK(at(*f, 1) == Approx(1.0 / ((1.0 - smooth) / 8.0 + smooth)).epsilon(1e-5));
}

TEST_CASE("a SentencePiece-style tokenizer.json becomes a llama vocabulary whose scores keep the merge order", "[safetensors][hf]") {
  HfDir d;
  d.config = kLlamaConfig;
  // <unk> <s> </s>, two byte tokens, pieces; merges make "▁a" first, then "bc", then "▁abc".
  d.write_text("tokenizer.json", R"({"added_tokens":[{"id":1,"content":"<s>","special":true},{"id":2,"content":"</s>","special":true}],)"
                                 R"("normalizer":{"type":"Sequence","normalizers":[{"type":"Prepend","prepend":"▁"},{"type":"Replace"}]},)"
                                 R"("pre_tokenizer":null,"model":{"type":"BPE","byte_fallback":true,"unk_token":"<unk>","vocab":)"
                                 R"({"<unk>":0,"<s>":1,"</s>":2,"<0x00>":3,"<0x01>":4,"▁":5,"a":6,"b":7,"c":8,"▁a":9,"bc":10,"▁abc":11,"xyz":12},)"
                                 R"("merges":["▁ a","b c",["▁a","bc"]]}})");
  add_llama_layer(d);
  auto mf = d.open();
  REQUIRE(mf.ok());
  const Metadata& md = mf->metadata();
  CHECK(*md.get_string("tokenizer.ggml.model") == "llama");
  CHECK_FALSE(md.contains("tokenizer.ggml.add_space_prefix"));  // the default: a dummy prefix
  const auto scores = md.get_array("tokenizer.ggml.scores")->as<float>();
  const auto types = md.get_array("tokenizer.ggml.token_type")->as<int32_t>();
  CHECK(scores[9] == 0.0f);
  CHECK(scores[10] == -1.0f);
  CHECK(scores[11] == -2.0f);
  CHECK(scores[12] < scores[11]);  // never made by a merge: ranked last
  CHECK(types[0] == 2);            // unknown
  CHECK(types[1] == 3);            // control (special added token)
  CHECK(types[3] == 6);            // byte
  CHECK(types[6] == 1);
  CHECK(md.get_integer("tokenizer.ggml.unknown_token_id") == 0);
  CHECK_FALSE(md.contains("tokenizer.ggml.merges"));
}

TEST_CASE("a tokenizer.model gets config.json's vocabulary size and the added tokens as convert adds them", "[safetensors][hf]") {
  HfDir d;
  d.config = std::string(kLlamaConfig).replace(std::string(kLlamaConfig).find("\"vocab_size\":30"), 15, "\"vocab_size\":4003");
  auto model = MappedFile::open(std::string(INFER_TEST_DATA_DIR) + "/tokenizer/spm-bpe.model");
  REQUIRE(model.ok());
  test::write_bytes(d.dir.file("tokenizer.model"), std::vector<uint8_t>(model->bytes().begin(), model->bytes().end()));
  d.write_text("tokenizer_config.json", R"({"added_tokens_decoder":{"4000":{"content":"<|im_start|>","special":false},)"
                                        R"("4001":{"content":"▁x▁y","special":false},"9999":{"content":"far","special":true}}})");
  d.write_text("added_tokens.json", R"({"<extra>":3999})");
  add_llama_layer(d);
  auto mf = d.open();
  REQUIRE(mf.ok());
  const Metadata& md = mf->metadata();
  const Array* tokens = md.get_array("tokenizer.ggml.tokens");
  REQUIRE(tokens);
  REQUIRE(tokens->count == 4003);
  const auto types = md.get_array("tokenizer.ggml.token_type")->as<int32_t>();
  const auto scores = md.get_array("tokenizer.ggml.scores")->as<float>();
  CHECK(tokens->strings[3999] == "<extra>");
  CHECK(types[3999] == 4);
  CHECK(tokens->strings[4000] == "<|im_start|>");
  CHECK(types[4000] == 3);  // looks special: control
  CHECK(tokens->strings[4001] == " x y");
  CHECK(types[4001] == 4);
  CHECK(scores[4001] == -1000.0f);
  CHECK(tokens->strings[4002] == "[PAD4002]");
  CHECK(types[4002] == 5);
  CHECK(scores[4002] == -10000.0f);
}
