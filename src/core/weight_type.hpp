// The public WeightType and the DType a load-time conversion writes: the one place the two map to
// each other (the engine, the model loader and the tests all go through it).
#pragma once

#include <optional>

#include "core/dtype.hpp"
#include "infer/status.hpp"
#include "infer/weight_type.hpp"

namespace infer {

// keep -> nullopt (weights stay as stored); q8_0 -> Q8_0; q4_0 -> Q4_0; int8 -> I8_ROW; fp8 -> F8E4M3_ROW;
// fp8_tensor -> F8E4M3_TENSOR; int4 -> I4_G128; fp8_dynamic -> F8E4M3_W8A8; w8a16 -> I8_W8A16;
// a value outside the enum
// (a cast integer) -> invalid_argument naming it.
Result<std::optional<DType>> weight_dtype(WeightType w);

// The reverse: the WeightType that converts weights to `t` (Q8_0, Q4_0, I8_ROW, F8E4M3_*, I4_G128, I8_W8A16), nullopt for any other type.
std::optional<WeightType> weight_type_of(DType t) noexcept;

}  // namespace infer
