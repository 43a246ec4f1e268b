#include "model/families.hpp"

namespace infer {

std::span<const Family> families() noexcept {
  static constexpr Family kFamilies[] = {
      {"llama", describe_llama}, {"gemma3", describe_gemma3}, {"qwen2", describe_qwen2},
      {"qwen3", describe_qwen3}, {"phi3", describe_phi3},
  };
  return kFamilies;
}

}  // namespace infer
