// The model families libinfer loads: each is a DecoderSpec read from the file by its family
// file (model/<arch>.cpp). Adding a family = one such file + one line in families.cpp.
#pragma once

#include <span>

#include "model/decoder_spec.hpp"

namespace infer {

struct Family {
  const char* arch;  // general.architecture
  Result<DecoderSpec> (*describe)(const ModelFile& f);
};

// Every registered family, in the order listed in families.cpp.
std::span<const Family> families() noexcept;

Result<DecoderSpec> describe_llama(const ModelFile& f);
Result<DecoderSpec> describe_gemma3(const ModelFile& f);
Result<DecoderSpec> describe_qwen2(const ModelFile& f);
Result<DecoderSpec> describe_qwen3(const ModelFile& f);
Result<DecoderSpec> describe_phi3(const ModelFile& f);

}  // namespace infer
