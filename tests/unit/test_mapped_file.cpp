#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>

#include "core/mapped_file.hpp"
#include "test_util.hpp"

using namespace infer;

TEST_CASE("a mapped file and the read fallback give the same bytes", "[core][file]") {
  test::TempDir dir;
  const auto bytes = test::random_bytes(1 << 20 | 123, 7);
  test::write_bytes(dir.file("data.bin"), bytes);

  auto mapped = MappedFile::open(dir.file("data.bin"), MapMode::mmap_only);
  REQUIRE(mapped.ok());
  CHECK(mapped->is_mapped());
  auto read = MappedFile::open(dir.file("data.bin"), MapMode::read);
  REQUIRE(read.ok());
  CHECK_FALSE(read->is_mapped());
  REQUIRE(mapped->size() == bytes.size());
  REQUIRE(read->size() == bytes.size());
  CHECK(std::memcmp(mapped->data(), bytes.data(), bytes.size()) == 0);
  CHECK(std::memcmp(read->data(), bytes.data(), bytes.size()) == 0);
  CHECK(reinterpret_cast<uintptr_t>(read->data()) % 64 == 0);

  // Moving keeps the bytes where they are.
  const uint8_t* p = read->data();
  MappedFile moved = std::move(read).value();
  CHECK(moved.data() == p);
}

TEST_CASE("INFER_NO_MMAP=1 forces the read path in automatic mode", "[core][file]") {
  test::TempDir dir;
  test::write_bytes(dir.file("x"), test::random_bytes(1000, 1));
  ::setenv("INFER_NO_MMAP", "1", 1);
  auto f = MappedFile::open(dir.file("x"));
  ::unsetenv("INFER_NO_MMAP");
  REQUIRE(f.ok());
  CHECK_FALSE(f->is_mapped());
  auto g = MappedFile::open(dir.file("x"));
  REQUIRE(g.ok());
  CHECK(g->is_mapped());
}

TEST_CASE("opening a missing file, a directory or an empty file is reported, not fatal", "[core][file]") {
  test::TempDir dir;
  auto missing = MappedFile::open(dir.file("nope"));
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == StatusCode::not_found);
  CHECK(missing.status().message().find("nope") != std::string::npos);

  auto directory = MappedFile::open(dir.path().string());
  REQUIRE_FALSE(directory.ok());
  CHECK(directory.status().code() == StatusCode::invalid_argument);

  test::write_bytes(dir.file("empty"), {});
  auto empty = MappedFile::open(dir.file("empty"));
  REQUIRE(empty.ok());
  CHECK(empty->size() == 0);
}

TEST_CASE("from_bytes holds an aligned private copy", "[core][file]") {
  std::vector<uint8_t> src = {1, 2, 3, 4, 5};
  auto f = MappedFile::from_bytes(src, "mem");
  REQUIRE(f.ok());
  src[0] = 9;
  CHECK(f->data()[0] == 1);
  CHECK(f->path() == "mem");
}
