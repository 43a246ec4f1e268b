#include <infer/status.hpp>

#include <cstdio>

int main() {
  const infer::Status s(infer::StatusCode::not_found, "x");
  std::printf("%s\n", s.to_string().c_str());
  return s.to_string() == "not_found: x" ? 0 : 1;
}
