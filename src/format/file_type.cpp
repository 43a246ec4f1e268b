#include "format/file_type.hpp"

#include <map>
#include <optional>

namespace infer {
namespace {

// llama_ftype values and llama.cpp's names for them (llama-model-loader.cpp, llama_ftype_name).
std::optional<std::string> ftype_name(int64_t ftype) {
  switch (ftype) {
    case 0: return "all F32";
    case 1: return "F16";
    case 2: return "Q4_0";
    case 3: return "Q4_1";
    case 7: return "Q8_0";
    case 8: return "Q5_0";
    case 9: return "Q5_1";
    case 10: return "Q2_K - Medium";
    case 11: return "Q3_K - Small";
    case 12: return "Q3_K - Medium";
    case 13: return "Q3_K - Large";
    case 14: return "Q4_K - Small";
    case 15: return "Q4_K - Medium";
    case 16: return "Q5_K - Small";
    case 17: return "Q5_K - Medium";
    case 18: return "Q6_K";
    case 19: return "IQ2_XXS - 2.0625 bpw";
    case 20: return "IQ2_XS - 2.3125 bpw";
    case 21: return "Q2_K - Small";
    case 22: return "IQ3_XS - 3.3 bpw";
    case 23: return "IQ3_XXS - 3.0625 bpw";
    case 24: return "IQ1_S - 1.5625 bpw";
    case 25: return "IQ4_NL - 4.5 bpw";
    case 26: return "IQ3_S - 3.4375 bpw";
    case 27: return "IQ3_S mix - 3.66 bpw";
    case 28: return "IQ2_S - 2.5 bpw";
    case 29: return "IQ2_M - 2.7 bpw";
    case 30: return "IQ4_XS - 4.25 bpw";
    case 31: return "IQ1_M - 1.75 bpw";
    case 32: return "BF16";
    case 36: return "TQ1_0 - 1.69 bpw ternary";
    case 37: return "TQ2_0 - 2.06 bpw ternary";
    case 38: return "MXFP4 MoE";
    case 39: return "NVFP4";
    case 40: return "Q1_0";
    case 41: return "Q2_0";
    default: return std::nullopt;
  }
}

// llama.cpp's guess: the llama_ftype of the tensor type most tensors have.
std::optional<int64_t> guessed_ftype(DType t) {
  switch (t) {
    case DType::f32: return 0;
    case DType::f16: return 1;
    case DType::bf16: return 32;
    case DType::q4_0: return 2;
    case DType::q4_1: return 3;
    case DType::q5_0: return 8;
    case DType::q5_1: return 9;
    case DType::q8_0: return 7;
    case DType::q2_k: return 10;
    case DType::q3_k: return 12;
    case DType::q4_k: return 15;
    case DType::q5_k: return 17;
    case DType::q6_k: return 18;
    default: return std::nullopt;
  }
}

}  // namespace

std::string file_type_name(const ModelFile& file) {
  if (const auto v = file.metadata().get_integer("general.file_type")) {
    if (auto name = ftype_name(*v)) return *name;
    return "unknown file type " + std::to_string(*v);
  }
  if (file.tensors().empty()) return "";
  // The first type to reach the highest count wins, as in llama.cpp's loader.
  std::map<DType, size_t> counts;
  DType most = DType::f32;
  size_t most_count = 0;
  for (const TensorInfo& t : file.tensors())
    if (++counts[t.dtype] > most_count) {
      most_count = counts[t.dtype];
      most = t.dtype;
    }
  const auto ftype = guessed_ftype(most);
  return "(guessed) " + (ftype ? *ftype_name(*ftype) : std::string(dtype_name(most)));
}

}  // namespace infer
