// Builds GGUF bytes by hand, field by field, so that tests can make exactly the malformed files
// they need without going through the writer under test.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace infer::test {

struct GgufBytes {
  std::vector<uint8_t> b;

  template <class T>
  GgufBytes& put(T v) {
    // resize + memcpy rather than insert: GCC 12 warns falsely (-Wstringop-overflow) on the latter.
    const size_t at = b.size();
    b.resize(at + sizeof v);
    std::memcpy(b.data() + at, &v, sizeof v);
    return *this;
  }
  GgufBytes& u8(uint8_t v) { return put(v); }
  GgufBytes& u32(uint32_t v) { return put(v); }
  GgufBytes& u64(uint64_t v) { return put(v); }
  GgufBytes& str(const std::string& s) {
    u64(s.size());
    const size_t at = b.size();
    b.resize(at + s.size());
    if (!s.empty()) std::memcpy(b.data() + at, s.data(), s.size());
    return *this;
  }
  GgufBytes& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    return u32(0x46554747u).u32(version).u64(n_tensors).u64(n_kv);
  }
  // A tensor info: name, dims, type, offset.
  GgufBytes& tensor(const std::string& name, std::vector<uint64_t> dims, uint32_t type, uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(dims.size()));
    for (auto d : dims) u64(d);
    return u32(type).u64(offset);
  }
  GgufBytes& pad(size_t alignment) {
    while (b.size() % alignment) b.push_back(0);
    return *this;
  }
  GgufBytes& zeros(size_t n) {
    b.insert(b.end(), n, 0);
    return *this;
  }
};

}  // namespace infer::test
