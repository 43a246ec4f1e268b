#include "core/weight_type.hpp"

#include <string>

namespace infer {
namespace {

struct Pair {
  WeightType weight;
  DType dtype;
};
constexpr Pair kPairs[] = {{WeightType::q8_0, DType::q8_0}, {WeightType::q4_0, DType::q4_0}, {WeightType::int8, DType::i8_row},
                           {WeightType::fp8, DType::f8_row}, {WeightType::fp8_tensor, DType::f8_tensor},
                           {WeightType::int4, DType::i4_g128},
                           {WeightType::fp8_dynamic, DType::f8_w8a8}, {WeightType::w8a16, DType::i8_w8a16}};

}  // namespace

Result<std::optional<DType>> weight_dtype(WeightType w) {
  if (w == WeightType::keep) return std::optional<DType>{};
  for (const Pair& p : kPairs)
    if (p.weight == w) return std::optional<DType>{p.dtype};
  return invalid_argument("unknown weight_type " + std::to_string(static_cast<int>(w)));
}

std::optional<WeightType> weight_type_of(DType t) noexcept {
  for (const Pair& p : kPairs)
    if (p.dtype == t) return p.weight;
  return std::nullopt;
}

}  // namespace infer
