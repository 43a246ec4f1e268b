// Writer -> reader round trips: every metadata value type, nested arrays, several tensor types,
// custom alignment, and both the mapped and the read path.
#include <catch2/catch.hpp>

#include <cstring>

#include "format/gguf.hpp"
#include "gguf_bytes.hpp"
#include "test_util.hpp"

using namespace infer;

namespace {

Metadata every_value_type() {
  Metadata md;
  md.set("general.architecture", "llama");
  md.set("t.u8", uint8_t{0xfe});
  md.set("t.i8", int8_t{-100});
  md.set("t.u16", uint16_t{0xfedc});
  md.set("t.i16", int16_t{-30000});
  md.set("t.u32", uint32_t{0xfedcba98});
  md.set("t.i32", int32_t{-2000000000});
  md.set("t.f32", 3.25f);
  md.set("t.bool_true", true);
  md.set("t.bool_false", false);
  md.set("t.string", std::string("h\xc3\xa9llo \xe4\xb8\x96\xe7\x95\x8c \xf0\x9f\x98\x80\n\t\"q\""));
  md.set("t.empty_string", std::string());
  md.set("t.u64", uint64_t{0xfedcba9876543210ull});
  md.set("t.i64", int64_t{-0x123456789abcdefll});
  md.set("t.f64", 0.1234567890123456789);
  std::vector<float> floats = {1.5f, -2.25f, 1e-30f};
  md.set("t.arr_f32", Array::of(ValueType::f32, std::span<const float>(floats)));
  std::vector<int32_t> ints = {1, -2, 3, 2147483647};
  md.set("t.arr_i32", Array::of(ValueType::i32, std::span<const int32_t>(ints)));
  std::vector<uint8_t> bools = {1, 0, 1};
  md.set("t.arr_bool", Array::of(ValueType::boolean, std::span<const uint8_t>(bools)));
  std::vector<double> doubles = {};
  md.set("t.arr_empty", Array::of(ValueType::f64, std::span<const double>(doubles)));
  md.set("t.arr_str", Array::of_strings({"<unk>", "", "\xe2\x96\x81the", std::string("nul\0byte", 8)}));
  std::vector<uint16_t> a = {1, 2}, b = {3};
  Array inner1 = Array::of(ValueType::u16, std::span<const uint16_t>(a));
  Array inner2 = Array::of(ValueType::u16, std::span<const uint16_t>(b));
  Array strings = Array::of_strings({"x", "y"});
  Array nested = Array::of_arrays({inner1, inner2});
  md.set("t.arr_nested", nested);
  md.set("t.arr_nested2", Array::of_arrays({Array::of_arrays({strings}), Array::of_arrays({})}));
  return md;
}

struct TensorSpec {
  const char* name;
  DType dtype;
  std::vector<int64_t> shape;
};

}  // namespace

TEST_CASE("every metadata value type survives writer -> reader unchanged", "[gguf]") {
  gguf::Writer w;
  w.metadata() = every_value_type();
  auto bytes = w.write_to_memory();
  REQUIRE(bytes.ok());
  for (MapMode mode : {MapMode::mmap_only, MapMode::read}) {
    test::TempDir dir;
    test::write_bytes(dir.file("m.gguf"), *bytes);
    auto mf = gguf::read_file(dir.file("m.gguf"), mode);
    REQUIRE(mf.ok());
    CHECK(mf->version() == 3);
    CHECK(mf->alignment() == 32);
    CHECK(mf->tensors().empty());
    CHECK(mf->metadata() == w.metadata());
    // Typed accessors agree with what was written.
    CHECK(mf->metadata().get_integer("t.u64") == std::nullopt);  // above INT64_MAX
    CHECK(*mf->metadata().find("t.u64")->get_if<uint64_t>() == 0xfedcba9876543210ull);
    CHECK(mf->metadata().get_integer("t.i64") == -0x123456789abcdefll);
    CHECK(mf->metadata().get_number("t.f32") == 3.25);
    CHECK(mf->metadata().get_bool("t.bool_true") == true);
    CHECK(mf->metadata().get_string("t.arr_str") == nullptr);
    const Array* strs = mf->metadata().get_array("t.arr_str");
    REQUIRE(strs);
    CHECK(strs->strings[3] == std::string("nul\0byte", 8));
    CHECK(mf->metadata().get_array("t.arr_i32")->as<int32_t>()[3] == 2147483647);
    CHECK(mf->metadata().get_array("t.arr_nested")->arrays[1].as<uint16_t>()[0] == 3);
    // Entries keep file order.
    CHECK(mf->metadata().entries().front().key == "general.architecture");
    CHECK(mf->metadata().entries().back().key == "t.arr_nested2");
  }
}

TEST_CASE("tensors of several types round-trip with aligned zero-copy views", "[gguf]") {
  const std::vector<TensorSpec> specs = {
      {"token_embd.weight", DType::f32, {16, 5}},  {"blk.0.attn_q.weight", DType::f16, {32, 3}},
      {"blk.0.ffn.weight", DType::bf16, {7}},      {"blk.0.q8", DType::q8_0, {64, 3}},
      {"blk.0.q4k", DType::q4_k, {256, 2, 2}},     {"blk.0.q6k", DType::q6_k, {512, 1, 1, 2}},
      {"blk.0.q5_1", DType::q5_1, {32}},           {"blk.0.iq2xxs", DType::iq2_xxs, {256}},
      {"blk.0.i32", DType::i32, {3, 3}},           {"zero", DType::f32, {0, 4}},
  };
  for (uint32_t alignment : {32u, 64u, 1u, 4096u}) {
    gguf::Writer w;
    if (alignment != 32) w.metadata().set("general.alignment", alignment);
    std::vector<std::vector<uint8_t>> datas;
    for (size_t i = 0; i < specs.size(); ++i) {
      const auto& s = specs[i];
      uint64_t numel = 1;
      for (auto d : s.shape) numel *= static_cast<uint64_t>(d);
      const auto* tr = dtype_traits(s.dtype);
      datas.push_back(test::random_bytes(numel / tr->block_size * tr->block_bytes, i + 100));
      REQUIRE(w.add_tensor(s.name, s.dtype, s.shape, datas.back()).is_ok());
    }
    auto bytes = w.write_to_memory();
    REQUIRE(bytes.ok());
    auto file = MappedFile::from_bytes(*bytes, "mem.gguf");
    REQUIRE(file.ok());
    auto mf = gguf::read(std::move(file).value());
    REQUIRE(mf.ok());
    CHECK(mf->alignment() == alignment);
    REQUIRE(mf->tensors().size() == specs.size());
    for (size_t i = 0; i < specs.size(); ++i) {
      const TensorInfo* t = mf->find_tensor(specs[i].name);
      REQUIRE(t);
      INFO(t->name);
      CHECK(t->dtype == specs[i].dtype);
      CHECK(t->n_dims == static_cast<int>(specs[i].shape.size()));
      for (size_t d = 0; d < specs[i].shape.size(); ++d) CHECK(t->shape[d] == specs[i].shape[d]);
      CHECK(t->nbytes == datas[i].size());
      CHECK(t->offset % alignment == 0);
      CHECK(reinterpret_cast<uintptr_t>(t->view.data) % std::min<uint32_t>(alignment, 64) == 0);
      if (!datas[i].empty()) CHECK(std::memcmp(t->view.data, datas[i].data(), datas[i].size()) == 0);
      CHECK(t->view.nbytes() == t->nbytes);
    }
  }
}

TEST_CASE("write() creates the file atomically and the reader reads it back", "[gguf]") {
  test::TempDir dir;
  gguf::Writer w;
  w.metadata().set("general.name", "tiny");
  std::vector<float> data = {1, 2, 3, 4};
  const std::vector<int64_t> shape = {4};
  REQUIRE(w.add_tensor("w", DType::f32, shape, std::span<const uint8_t>(reinterpret_cast<uint8_t*>(data.data()), 16)).is_ok());
  REQUIRE(w.write(dir.file("t.gguf")).is_ok());
  CHECK_FALSE(std::filesystem::exists(dir.file("t.gguf.tmp")));
  auto mf = ModelFile::open(dir.file("t.gguf"));
  REQUIRE(mf.ok());
  CHECK(mf->tensors()[0].view.row<float>(0)[3] == 4.0f);
  auto again = w.write(dir.file("missing-dir/t.gguf"));
  CHECK(again.code() == StatusCode::io_error);
}

TEST_CASE("a tensor filled while writing gives the file its bytes give, and a fill error writes no file", "[gguf]") {
  test::TempDir dir;
  std::vector<uint8_t> a(34 * 2), b(16);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint8_t>(i * 7 + 1);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(200 - i);
  const std::vector<int64_t> shape_a = {32, 2}, shape_b = {4};
  gguf::Writer given, filled;
  given.metadata().set("general.name", "fill");
  filled.metadata() = given.metadata();
  REQUIRE(given.add_tensor("a", DType::q8_0, shape_a, a).is_ok());
  REQUIRE(given.add_tensor("b", DType::f32, shape_b, b).is_ok());
  std::vector<std::string> calls;
  const auto fill_from = [&calls](const char* name, const std::vector<uint8_t>& src) {
    return [&calls, name, &src](std::span<uint8_t> dst) {
      calls.emplace_back(name);
      REQUIRE(dst.size() == src.size());
      std::copy(src.begin(), src.end(), dst.begin());
      return Status::ok();
    };
  };
  REQUIRE(filled.add_tensor("a", DType::q8_0, shape_a, fill_from("a", a)).is_ok());
  REQUIRE(filled.add_tensor("b", DType::f32, shape_b, fill_from("b", b)).is_ok());
  REQUIRE(filled.write_to_memory().value() == given.write_to_memory().value());
  REQUIRE(calls == std::vector<std::string>{"a", "b"});  // once per write, in order

  gguf::Writer failing;
  REQUIRE(failing.add_tensor("a", DType::f32, shape_b, [](std::span<uint8_t>) {
    return invalid_argument("no data for a");
  }).is_ok());
  const Status s = failing.write(dir.file("f.gguf"));
  CHECK(s.code() == StatusCode::invalid_argument);
  CHECK(s.message() == "no data for a");
  CHECK_FALSE(std::filesystem::exists(dir.file("f.gguf")));
  CHECK_FALSE(std::filesystem::exists(dir.file("f.gguf.tmp")));
  // The size and shape checks are those of the other add_tensor.
  CHECK(failing.add_tensor("c", DType::q8_0, shape_b, fill_from("c", b)).code() == StatusCode::invalid_argument);
  CHECK(failing.add_tensor("d", DType::f32, shape_b, gguf::Writer::Fill{}).code() == StatusCode::invalid_argument);
}

TEST_CASE("the writer refuses what a reader would reject", "[gguf]") {
  gguf::Writer w;
  std::vector<uint8_t> q(34);
  const std::vector<int64_t> row32 = {32}, row33 = {33}, neg = {-1}, five = {1, 1, 1, 1, 1};
  CHECK(w.add_tensor("", DType::q8_0, row32, q).code() == StatusCode::invalid_argument);
  CHECK(w.add_tensor(std::string(64, 'n'), DType::q8_0, row32, q).code() == StatusCode::invalid_argument);
  CHECK(w.add_tensor("a", DType::q8_0, row33, q).code() == StatusCode::invalid_argument);
  CHECK(w.add_tensor("a", DType::f32, neg, q).code() == StatusCode::invalid_argument);
  CHECK(w.add_tensor("a", DType::f32, five, q).code() == StatusCode::invalid_argument);
  CHECK(w.add_tensor("a", DType::q8_0, row32, std::span<const uint8_t>(q).first(33)).code() == StatusCode::invalid_argument);
  REQUIRE(w.add_tensor("a", DType::q8_0, row32, q).is_ok());
  CHECK(w.add_tensor("a", DType::q8_0, row32, q).code() == StatusCode::invalid_argument);
  w.metadata().set("general.alignment", uint32_t{48});
  CHECK_FALSE(w.write_to_memory().ok());
  w.metadata().set("general.alignment", uint64_t{64});
  CHECK_FALSE(w.write_to_memory().ok());
  w.metadata().set("general.alignment", uint32_t{64});
  Array broken;
  broken.elem_type = ValueType::u32;
  broken.count = 3;  // but no packed bytes
  w.metadata().set("bad", broken);
  CHECK_FALSE(w.write_to_memory().ok());
}

TEST_CASE("version 2 files are read like version 3", "[gguf]") {
  test::GgufBytes g;
  g.header(1, 1, 2).str("general.architecture").u32(8).str("llama");
  g.tensor("w", {2, 2}, 0, 0).pad(32);
  for (float v : {1.f, 2.f, 3.f, 4.f}) g.put(v);
  auto mf = gguf::read(MappedFile::from_bytes(g.b, "v2.gguf").value());
  REQUIRE(mf.ok());
  CHECK(mf->version() == 2);
  CHECK(*mf->metadata().get_string("general.architecture") == "llama");
  CHECK(mf->tensors()[0].view.row<float>(1)[1] == 4.0f);
}
