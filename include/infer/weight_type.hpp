// How weight matrices are stored for compute: EngineConfig::weight_type (infer_weight_type in the C
// API has the same values).
#pragma once

namespace infer {

// Weight matrices as the file stores them, or quantized at load (float matrices only; what
// llama-quantize --pure writes for the type).
enum class WeightType : int { keep = 0, q8_0, q4_0 };

}  // namespace infer
