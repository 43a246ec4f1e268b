// GGUF files written by llama.cpp's own tools, and our writer's output as llama.cpp read it: our
// reader must see exactly what llama.cpp's reader saw (tests/data/gguf/*.dump.txt, made by
// tests/reference/make-gguf-reference.sh).
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <regex>
#include <sstream>

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

// Parses the second reading (gguf_ex_read_1) of `llama-gguf FILE r n`.
Dump parse_dump(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  Dump d;
  std::string line;
  std::smatch m;
  const std::regex version(R"(^gguf_ex_read_1: version:\s+(\d+))"), align(R"(^gguf_ex_read_1: alignment:\s+(\d+))"),
      offset(R"(^gguf_ex_read_1: data offset: (\d+))"), key(R"(^gguf_ex_read_1: kv\[\d+\]: key = (.*)$)"),
      tensor(R"(^gguf_ex_read_1: tensor\[(\d+)\]: name = (.*), size = (\d+), offset = (\d+), type = (\w+), n_elts)"),
      dims(R"(^gguf_ex_read_1: tensor\[(\d+)\]: n_dims = (\d+), ne = \((\d+), (\d+), (\d+), (\d+)\), name = (.*)$)");
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, version)) d.version = static_cast<uint32_t>(std::stoul(m[1]));
    else if (std::regex_search(line, m, align)) d.alignment = std::stoull(m[1]);
    else if (std::regex_search(line, m, offset)) d.data_offset = std::stoull(m[1]);
    else if (std::regex_search(line, m, key)) d.keys.push_back(m[1]);
    else if (std::regex_search(line, m, tensor)) {
      DumpTensor t;
      t.name = m[2];
      t.size = std::stoull(m[3]);
      t.offset = std::stoull(m[4]);
      t.type = m[5];
      d.tensors.push_back(t);
    } else if (std::regex_search(line, m, dims)) {
      const size_t i = std::stoul(m[1]);
      REQUIRE(i < d.tensors.size());
      REQUIRE(d.tensors[i].name == m[7].str());
      d.tensors[i].n_dims = std::stoi(m[2]);
      for (int k = 0; k < 4; ++k) d.tensors[i].ne[k] = std::stoll(m[3 + k]);
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
