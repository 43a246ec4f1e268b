// libFuzzer target for the GGUF reader. Any input must give either a ModelFile whose tensor views
// lie inside the input, or a failed Status with a message — never a crash, a sanitizer report,
// a hang, or an allocation out of proportion to the input (run with -malloc_limit_mb).
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "format/gguf.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = infer::MappedFile::from_bytes({data, size}, "fuzz.gguf");
  if (!file.ok()) return 0;
  auto mf = infer::gguf::read(std::move(file).value());
  if (!mf.ok()) {
    if (mf.status().message().empty()) std::abort();
    return 0;
  }
  const uint8_t* begin = mf->file().data();
  const uint8_t* end = begin + mf->file().size();
  for (const auto& t : mf->tensors()) {
    const auto* p = static_cast<const uint8_t*>(t.view.data);
    if (t.nbytes > 0 && (p < begin || p + t.nbytes > end)) std::abort();
    volatile uint8_t sink = 0;
    if (t.nbytes > 0) sink = p[t.nbytes - 1];  // the last byte must be readable
    (void)sink;
  }
  // Exercise the metadata accessors and renderers on whatever was parsed.
  for (const auto& e : mf->metadata().entries()) {
    (void)infer::value_to_string(e.value);
    (void)infer::value_to_json(e.value, 16);
  }
  return 0;
}
