// libFuzzer target for the GGUF reader. Any input must give either a ModelFile whose tensor views
// lie inside the input, or a failed Status with a message — never a crash, a sanitizer report,
// a hang, or an allocation out of proportion to the input (run with -malloc_limit_mb). Whatever
// parses also goes through the tokenizer loader (SentencePiece or byte-level BPE vocabularies,
// merges, pre-tokenizer names) and the chat-template detection, which must succeed or fail
// cleanly; a tokenizer that loads encodes and decodes text.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "format/gguf.hpp"
#include "tokenizer/chat_template.hpp"
#include "tokenizer/tokenizer.hpp"

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
  auto tok = infer::load_tokenizer(*mf);
  if (!tok.ok() && tok.status().message().empty()) std::abort();
  if (tok.ok()) {
    const std::string_view text = "Hello <|im_start|>user\n  world 123 \xC3\xA9\xE4\xB8\xAD\xFF!";
    for (bool special : {false, true}) {
      auto ids = (*tok)->encode(text, special, special);
      if (!ids.ok() && ids.status().message().empty()) std::abort();
      if (ids.ok()) (void)(*tok)->decode(*ids);
    }
  }
  auto tmpl = infer::ChatTemplate::for_model(mf->metadata());
  if (!tmpl.ok() && tmpl.status().message().empty()) std::abort();
  return 0;
}
