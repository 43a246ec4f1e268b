// A model file's type as llama.cpp names it (format/file_type.hpp).
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "format/file_type.hpp"
#include "format/gguf.hpp"
#include "test_util.hpp"

using namespace infer;

namespace {

// A file of `n_q8` Q8_0 rows and `n_f32` F32 vectors, with general.file_type when `ftype` >= 0.
std::string file_type_of(int64_t ftype, int n_q8, int n_f32) {
  test::TempDir dir;
  gguf::Writer w;
  if (ftype >= 0) w.metadata().set("general.file_type", static_cast<uint32_t>(ftype));
  const std::vector<uint8_t> q8(34, 0);  // one Q8_0 block: 32 values
  const std::vector<uint8_t> f32(16, 0);
  const std::vector<int64_t> row32 = {32}, four = {4};
  for (int i = 0; i < n_q8; ++i) REQUIRE(w.add_tensor(std::string(1, 'q').append(std::to_string(i)), DType::q8_0, row32, q8).is_ok());
  for (int i = 0; i < n_f32; ++i) REQUIRE(w.add_tensor(std::string(1, 'f').append(std::to_string(i)), DType::f32, four, f32).is_ok());
  REQUIRE(w.write(dir.file("m.gguf")).is_ok());
  auto file = ModelFile::open(dir.file("m.gguf"));
  REQUIRE(file.ok());
  return file_type_name(*file);
}

}  // namespace

TEST_CASE("the file type is general.file_type in llama.cpp's words, else guessed from the most common tensor type",
          "[format][file_type]") {
  CHECK(file_type_of(2, 1, 2) == "Q4_0");  // the key wins over the tensors
  CHECK(file_type_of(15, 1, 0) == "Q4_K - Medium");
  CHECK(file_type_of(0, 1, 0) == "all F32");
  CHECK(file_type_of(1000, 1, 0) == "unknown file type 1000");
  CHECK(file_type_of(-1, 3, 2) == "(guessed) Q8_0");
  CHECK(file_type_of(-1, 1, 2) == "(guessed) all F32");
  CHECK(file_type_of(-1, 0, 0).empty());
}
