// GGUF files written by llama.cpp's own tools, and our writer's output as llama.cpp read it: our
// reader must see exactly what llama.cpp's reader saw (tests/data/gguf/*.dump.txt, made by
// tests/reference/make-gguf-reference.sh).
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <cstdio>

#include "format/gguf.hpp"

using namespace infer;

namespace {

const std::string kDataDir = INFER_TEST_DATA_DIR "/gguf/";

struct DumpTensor {
  std::string name, type;
  uint64_t size = 0, offset = 0;
  int n_dims = 0;
  std::array<int64_t, 4> ne{};
};

struct Dump {
  uint32_t version = 0;
  uint64_t alignment = 0, data_offset = 0;
  std::vector<std::string> keys;
  std::vector<DumpTensor> tensors;
};

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// Parses the second reading (gguf_ex_read_1) of `llama-gguf FILE r n`.
Dump parse_dump(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  Dump d;
  std::string line;
  const std::string p = "gguf_ex_read_1: ";
  while (std::getline(in, line)) {
    if (!starts_with(line, p.c_str())) continue;
    const std::string rest = line.substr(p.size());
    const char* r = rest.c_str();
    unsigned long long a = 0, b = 0, c = 0, e = 0, f = 0;
    unsigned idx = 0;
    int n_dims = 0;
    char type[32] = {};
    if (std::sscanf(r, "version: %llu", &a) == 1) d.version = static_cast<uint32_t>(a);
    else if (std::sscanf(r, "alignment: %llu", &a) == 1) d.alignment = a;
    else if (std::sscanf(r, "data offset: %llu", &a) == 1) d.data_offset = a;
    else if (starts_with(rest, "kv[") && rest.find("]: key = ") != std::string::npos) {
      d.keys.push_back(rest.substr(rest.find("]: key = ") + 9));
    } else if (starts_with(rest, "tensor[") && rest.find(", n_elts") != std::string::npos) {
      // tensor[i]: name = NAME, size = S, offset = O, type = T, n_elts = N
      const size_t name_at = rest.find(": name = ") + 9, size_at = rest.find(", size = ");
      DumpTensor t;
      t.name = rest.substr(name_at, size_at - name_at);
      REQUIRE(std::sscanf(rest.c_str() + size_at, ", size = %llu, offset = %llu, type = %31[^,]", &a, &b, type) == 3);
      t.size = a;
      t.offset = b;
      t.type = type;
      d.tensors.push_back(t);
    } else if (std::sscanf(r, "tensor[%u]: n_dims = %d, ne = (%llu, %llu, %llu, %llu)", &idx, &n_dims, &c, &e, &f, &b) == 6) {
      REQUIRE(idx < d.tensors.size());
      d.tensors[idx].n_dims = n_dims;
      d.tensors[idx].ne = {static_cast<int64_t>(c), static_cast<int64_t>(e), static_cast<int64_t>(f), static_cast<int64_t>(b)};
      REQUIRE(rest.substr(rest.find(", name = ") + 9) == d.tensors[idx].name);
    }
  }
  return d;
}

void check_against_dump(const std::string& name) {
  INFO(name);
  const Dump dump = parse_dump(kDataDir + name + ".dump.txt");
  REQUIRE(!dump.tensors.empty());
  auto mf = gguf::read_file(kDataDir + name + ".gguf");
  REQUIRE(mf.ok());
  CHECK(mf->version() == dump.version);
  CHECK(mf->alignment() == dump.alignment);
  CHECK(mf->data_offset() == dump.data_offset);
  REQUIRE(mf->metadata().size() == dump.keys.size());
  for (size_t i = 0; i < dump.keys.size(); ++i) CHECK(mf->metadata().entries()[i].key == dump.keys[i]);
  REQUIRE(mf->tensors().size() == dump.tensors.size());
  for (size_t i = 0; i < dump.tensors.size(); ++i) {
    const TensorInfo& ours = mf->tensors()[i];
    const DumpTensor& ref = dump.tensors[i];
    INFO(ref.name);
    CHECK(ours.name == ref.name);
    CHECK(ours.nbytes == ref.size);
    CHECK(ours.offset == ref.offset);
    CHECK(dtype_from_name(ref.type) == ours.dtype);
    CHECK(ours.n_dims == ref.n_dims);
    for (int k = 0; k < 4; ++k) CHECK(ours.shape[k] == ref.ne[k]);
  }
}

}  // namespace

TEST_CASE("files written by llama.cpp read exactly as llama.cpp reads them", "[gguf][reference]") {
  check_against_dump("llama-written");
  check_against_dump("llama-quantized-q8_0");
  check_against_dump("llama-quantized-q4_k_m");
}

TEST_CASE("our writer's file reads as llama.cpp read it", "[gguf][reference]") {
  check_against_dump("libinfer-tiny-f32");
}

TEST_CASE("llama.cpp's example file holds the values its source writes", "[gguf][reference]") {
  // Values from llama.cpp examples/gguf/gguf.cpp (gguf_ex_write).
  auto mf = gguf::read_file(kDataDir + "llama-written.gguf");
  REQUIRE(mf.ok());
  const Metadata& md = mf->metadata();
  CHECK(*md.find("some.parameter.uint8")->get_if<uint8_t>() == 0x12);
  CHECK(*md.find("some.parameter.int8")->get_if<int8_t>() == -0x13);
  CHECK(*md.find("some.parameter.uint16")->get_if<uint16_t>() == 0x1234);
  CHECK(*md.find("some.parameter.int16")->get_if<int16_t>() == -0x1235);
  CHECK(*md.find("some.parameter.uint32")->get_if<uint32_t>() == 0x12345678u);
  CHECK(*md.find("some.parameter.int32")->get_if<int32_t>() == -0x12345679);
  CHECK(*md.find("some.parameter.float32")->get_if<float>() == 0.123456789f);
  CHECK(*md.find("some.parameter.uint64")->get_if<uint64_t>() == 0x123456789abcdef0ull);
  CHECK(*md.find("some.parameter.int64")->get_if<int64_t>() == -0x123456789abcdef1ll);
  CHECK(*md.find("some.parameter.float64")->get_if<double>() == 0.1234567890123456789);
  CHECK(*md.find("some.parameter.bool")->get_if<bool>() == true);
  CHECK(*md.get_string("some.parameter.string") == "hello world");
  const Array* i16 = md.get_array("some.parameter.arr.i16");
  REQUIRE(i16);
  REQUIRE(i16->elem_type == ValueType::i16);
  CHECK(std::vector<int16_t>(i16->as<int16_t>().begin(), i16->as<int16_t>().end()) == std::vector<int16_t>{1, 2, 3, 4});
  const Array* f32 = md.get_array("some.parameter.arr.f32");
  REQUIRE(f32);
  CHECK(std::vector<float>(f32->as<float>().begin(), f32->as<float>().end()) == std::vector<float>{3.145f, 2.718f, 1.414f});
  const Array* strs = md.get_array("some.parameter.arr.str");
  REQUIRE(strs);
  CHECK(strs->strings == std::vector<std::string>{"hello", "world", "!"});
  // Tensor i is filled with 100 + i.
  for (size_t i = 0; i < mf->tensors().size(); ++i) {
    const TensorInfo& t = mf->tensors()[i];
    REQUIRE(t.dtype == DType::f32);
    const float* v = static_cast<const float*>(t.view.data);
    for (int64_t j = 0; j < t.numel(); ++j) REQUIRE(v[j] == static_cast<float>(100 + i));
  }
}
