// Malformed GGUF files, each made here byte by byte: the reader must return a clear error naming
// the problem (never crash, hang, or allocate what the file size cannot justify).
#include <catch2/catch.hpp>

#include <random>

#include "format/gguf.hpp"
#include "gguf_bytes.hpp"
#include "test_util.hpp"

using namespace infer;
using test::GgufBytes;

namespace {

Result<ModelFile> parse(const std::vector<uint8_t>& bytes) {
  auto f = MappedFile::from_bytes(bytes, "bad.gguf");
  REQUIRE(f.ok());
  return gguf::read(std::move(f).value());
}

// Expects failure with `code` and a message containing every fragment.
void expect_error(const std::vector<uint8_t>& bytes, std::initializer_list<const char*> fragments,
                  StatusCode code = StatusCode::malformed_file) {
  auto r = parse(bytes);
  REQUIRE_FALSE(r.ok());
  INFO(r.status().message());
  CHECK(r.status().code() == code);
  CHECK(r.status().message().rfind("bad.gguf: ", 0) == 0);
  for (const char* f : fragments) CHECK(r.status().message().find(f) != std::string::npos);
}

// A valid file: two metadata entries, two F32 tensors.
std::vector<uint8_t> valid_file() {
  GgufBytes g;
  g.header(2, 2).str("general.architecture").u32(8).str("llama");
  g.str("general.alignment").u32(4).u32(32);
  g.tensor("a", {4, 2}, 0, 0).tensor("b", {8}, 0, 32).pad(32);
  g.zeros(64);
  return g.b;
}

}  // namespace

TEST_CASE("the hand-made valid file parses (the base of the corruptions below)", "[gguf][malformed]") {
  auto r = parse(valid_file());
  REQUIRE(r.ok());
  CHECK(r->tensors().size() == 2);
}

TEST_CASE("every truncation of a valid file is an error until the tensor data is complete", "[gguf][malformed]") {
  const auto full = valid_file();
  const auto ok = parse(full);
  REQUIRE(ok.ok());
  const uint64_t data_end = ok->data_offset() + 32 + 32;
  for (size_t n = 0; n < full.size(); ++n) {
    std::vector<uint8_t> prefix(full.begin(), full.begin() + static_cast<ptrdiff_t>(n));
    auto r = parse(prefix);
    INFO("prefix of " << n << " bytes");
    if (n < data_end) {
      REQUIRE_FALSE(r.ok());
      CHECK(r.status().code() == StatusCode::malformed_file);
      CHECK_FALSE(r.status().message().empty());
    } else {
      CHECK(r.ok());
    }
  }
}

TEST_CASE("bad magic, versions and byte order are named", "[gguf][malformed]") {
  expect_error({'G', 'G', 'U'}, {"too small"});
  expect_error({'G', 'G', 'M', 'L', 3, 0, 0, 0}, {"not a GGUF file"});
  GgufBytes v1, v0, v4, be;
  expect_error(v1.header(0, 0, 1).b, {"version 1"}, StatusCode::unsupported);
  expect_error(v0.header(0, 0, 0).b, {"version 0"}, StatusCode::unsupported);
  expect_error(v4.header(0, 0, 4).b, {"version 4"}, StatusCode::unsupported);
  expect_error(be.header(0, 0, 0x03000000).b, {"big-endian"}, StatusCode::unsupported);
}

TEST_CASE("absurd counts are refused before anything is allocated", "[gguf][malformed]") {
  GgufBytes a, b, c, d, e;
  expect_error(a.header(0, UINT64_MAX).b, {"metadata entries cannot fit"});
  expect_error(b.header(UINT64_MAX, 0).b, {"tensors cannot fit"});
  expect_error(c.header(1ull << 40, 0).zeros(64).b, {"tensors cannot fit"});
  // Arrays whose element count cannot fit in what is left, for fixed, string and nested elements.
  for (uint32_t elem : {0u, 8u, 9u, 12u}) {
    GgufBytes g;
    g.header(0, 1).str("k").u32(9).u32(elem).u64(UINT64_MAX / 2).zeros(16);
    expect_error(g.b, {"metadata key 'k'", "cannot fit"});
  }
  d.header(0, 1).str("k").u32(9).u32(4).u64(5).u32(1).u32(2);  // 5 u32s announced, 2 present
  expect_error(d.b, {"array of 5 u32 elements cannot fit"});
  (void)e;
}

TEST_CASE("huge string lengths are refused", "[gguf][malformed]") {
  GgufBytes key, value, name, arr;
  expect_error(key.header(0, 1).u64(1ull << 63).zeros(8).b, {"metadata key #0", "runs past the end"});
  expect_error(value.header(0, 1).str("k").u32(8).u64(UINT64_MAX).b, {"'k' value", "runs past the end"});
  expect_error(name.header(1, 0).u64(UINT64_MAX - 5).zeros(40).b, {"tensor #0", "runs past the end"});
  expect_error(arr.header(0, 1).str("k").u32(9).u32(8).u64(2).str("ok").u64(1000).b, {"'k'[1]", "runs past the end"});
  GgufBytes longkey;
  expect_error(longkey.header(0, 1).str(std::string(70000, 'k')).u32(0).u8(1).b, {"exceeds the limit"});
}

TEST_CASE("unknown value and tensor types are named", "[gguf][malformed]") {
  GgufBytes v, av, t4, t43, tbig;
  expect_error(v.header(0, 1).str("k").u32(13).u8(0).b, {"'k'", "unknown value type 13"});
  expect_error(av.header(0, 1).str("k").u32(9).u32(0xffffffff).u64(0).b, {"unknown array element type 4294967295"});
  expect_error(t4.header(1, 0).tensor("w", {32}, 4, 0).pad(32).zeros(64).b, {"'w'", "unknown tensor type 4"});
  expect_error(t43.header(1, 0).tensor("w", {32}, 43, 0).pad(32).zeros(64).b, {"unknown tensor type 43"});
  expect_error(tbig.header(1, 0).tensor("w", {32}, 1u << 31, 0).pad(32).zeros(64).b, {"unknown tensor type"});
}

TEST_CASE("dimension products that overflow are refused", "[gguf][malformed]") {
  struct Case {
    std::vector<uint64_t> dims;
  };
  for (const auto& dims : std::vector<std::vector<uint64_t>>{
           {1ull << 32, 1ull << 32},          // 2^64 elements
           {1ull << 62, 4},                   // 2^64 elements
           {1ull << 31, 1ull << 31, 4},       // 2^64
           {UINT64_MAX},                      // negative as int64
           {1ull << 63},                      // negative as int64
           {0, 1ull << 40, 1ull << 40},       // zero elements, but rows * cols overflows
       }) {
    GgufBytes g;
    g.header(1, 0).tensor("w", dims, 0, 0).pad(32).zeros(64);
    expect_error(g.b, {"tensor 'w'"});
  }
  // 2^61 F32 elements: the byte size (2^63) fits in 64 bits but not in the file.
  GgufBytes big;
  expect_error(big.header(1, 0).tensor("w", {1ull << 31, 1ull << 30}, 0, 0).pad(32).zeros(64).b,
               {"tensor 'w'", "runs past the end of the data section"});
}

TEST_CASE("tensor shapes and names that break the rules are refused", "[gguf][malformed]") {
  GgufBytes dims5, block, empty, longname, dup, dupkey, emptykey;
  expect_error(dims5.header(1, 0).tensor("w", {1, 1, 1, 1, 1}, 0, 0).pad(32).zeros(32).b, {"5 dimensions"});
  expect_error(block.header(1, 0).tensor("w", {33}, 2, 0).pad(32).zeros(64).b, {"row length 33", "Q4_0", "32"});
  expect_error(empty.header(1, 0).tensor("", {1}, 0, 0).pad(32).zeros(32).b, {"empty name"});
  expect_error(longname.header(1, 0).tensor(std::string(64, 'n'), {1}, 0, 0).pad(32).zeros(32).b, {"longer than 63"});
  expect_error(dup.header(2, 0).tensor("w", {8}, 0, 0).tensor("w", {8}, 0, 32).pad(32).zeros(64).b,
               {"duplicate tensor name 'w'"});
  expect_error(dupkey.header(0, 2).str("k").u32(0).u8(1).str("k").u32(0).u8(2).b, {"duplicate metadata key 'k'"});
  expect_error(emptykey.header(0, 1).str("").u32(0).u8(1).b, {"is empty"});
}

TEST_CASE("offsets past the end, misaligned or overlapping are refused", "[gguf][malformed]") {
  GgufBytes past, wrap, mis, overlap, nodata;
  expect_error(past.header(1, 0).tensor("w", {8}, 0, 64).pad(32).zeros(64).b,
               {"'w'", "offset 64 + 32 bytes runs past the end"});
  expect_error(wrap.header(1, 0).tensor("w", {8}, 0, UINT64_MAX - 31).pad(32).zeros(64).b, {"runs past the end"});
  expect_error(mis.header(1, 0).tensor("w", {8}, 0, 1).pad(32).zeros(64).b, {"offset 1 is not a multiple of the alignment 32"});
  expect_error(overlap.header(2, 0).tensor("a", {16}, 0, 0).tensor("b", {8}, 0, 32).pad(32).zeros(96).b,
               {"'a' and 'b' overlap"});
  expect_error(nodata.header(1, 0).tensor("w", {8}, 0, 0).b, {"before its data section starts"});
}

TEST_CASE("bad alignments are refused", "[gguf][malformed]") {
  for (uint32_t a : {0u, 3u, 48u, 0x80000001u}) {
    GgufBytes g;
    g.header(0, 1).str("general.alignment").u32(4).u32(a);
    expect_error(g.b, {"general.alignment", "not a power of two"});
  }
  GgufBytes wrong_type;
  expect_error(wrong_type.header(0, 1).str("general.alignment").u32(10).u64(32).b, {"must be a u32"});
}

TEST_CASE("arrays nested too deeply are refused without exhausting the stack", "[gguf][malformed]") {
  GgufBytes g;
  g.header(0, 1).str("k").u32(9);
  for (int i = 0; i < 10000; ++i) g.u32(9).u64(1);
  g.u32(0).u64(0);
  expect_error(g.b, {"nested deeper than 16"});
}

TEST_CASE("hundreds of randomly corrupted files never crash the reader", "[gguf][malformed]") {
  // Base: a file with every kind of field, written by our writer.
  gguf::Writer w;
  w.metadata().set("general.architecture", "llama");
  w.metadata().set("llama.context_length", uint32_t{4096});
  w.metadata().set("tokenizer.ggml.tokens", Array::of_strings({"a", "bb", "ccc"}));
  std::vector<float> scores = {0.f, -1.f, -2.f};
  w.metadata().set("tokenizer.ggml.scores", Array::of(ValueType::f32, std::span<const float>(scores)));
  auto q = test::random_bytes(2 * 34, 3);
  auto f = test::random_bytes(4 * 8, 4);
  const std::vector<int64_t> qshape = {64}, fshape = {4, 2};
  REQUIRE(w.add_tensor("q", DType::q8_0, qshape, q).is_ok());
  REQUIRE(w.add_tensor("f", DType::f32, fshape, f).is_ok());
  const auto base = w.write_to_memory().value();

  std::mt19937_64 rng(12345);
  int parsed = 0, rejected = 0;
  for (int variant = 0; variant < 2000; ++variant) {
    auto bytes = base;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % bytes.size();
      switch (rng() % 4) {
        case 0: bytes[at] ^= static_cast<uint8_t>(1u << (rng() % 8)); break;  // bit flip
        case 1: bytes[at] = static_cast<uint8_t>(rng()); break;               // random byte
        case 2: {  // a random 64-bit value over a field-sized window
          uint64_t v = rng() % 3 == 0 ? UINT64_MAX - rng() % 64 : rng();
          for (size_t k = 0; k < 8 && at + k < bytes.size(); ++k) bytes[at + k] = static_cast<uint8_t>(v >> (8 * k));
          break;
        }
        default: bytes.resize(at); break;  // truncate
      }
      if (bytes.empty()) break;
    }
    auto r = parse(bytes);
    if (r.ok()) {
      ++parsed;
      // Whatever parsed must be internally consistent: every view lies inside the file.
      for (const auto& t : r->tensors()) {
        const auto* begin = static_cast<const uint8_t*>(t.view.data);
        CHECK(begin >= r->file().data());
        CHECK(begin + t.nbytes <= r->file().data() + r->file().size());
      }
    } else {
      ++rejected;
      CHECK_FALSE(r.status().message().empty());
    }
  }
  CHECK(rejected > 1000);  // most corruptions are caught
  INFO("parsed " << parsed << ", rejected " << rejected);
}
