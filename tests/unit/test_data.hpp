// Reads the reference data committed under tests/data/ (unit tests only: INFER_TEST_DATA_DIR).
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

namespace infer::test {

// A reference data file under tests/data/<dir>/ as bytes, or as the float32 values it holds.
inline std::vector<uint8_t> read_data_file(const std::string& dir, const std::string& name) {
  std::ifstream f(std::string(INFER_TEST_DATA_DIR) + "/" + dir + "/" + name, std::ios::binary);
  if (!f.good()) throw std::runtime_error("missing test data " + dir + "/" + name);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

inline std::vector<float> read_data_floats(const std::string& dir, const std::string& name) {
  const auto bytes = read_data_file(dir, name);
  std::vector<float> v(bytes.size() / 4);
  if (!v.empty()) std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

}  // namespace infer::test
