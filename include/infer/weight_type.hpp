// How weight matrices are stored for compute: EngineConfig::weight_type (infer_weight_type in the C
// API has the same values).
#pragma once

namespace infer {

// Weight matrices as the file stores them, or quantized at load (float matrices only):
//   q8_0, q4_0  what llama-quantize --pure writes for the type
//   int8        INT8 W8A8: symmetric int8 weights with one f32 scale per output channel, activations
//               quantized to int8 per token at each matmul, integer dot products
//               (docs/quantization.md, "INT8, FP8 and INT4 weights")
//   fp8         FP8 E4M3 weights with one f32 scale per output channel, weight-only (F32 activations)
//   fp8_tensor  FP8 E4M3 weights with one f32 scale per matrix, weight-only
//   int4        INT4 W4A16: symmetric 4-bit weights with one f32 scale per group of 128 input columns,
//               weight-only (matrices whose rows are not whole groups stay as stored)
//   fp8_dynamic W8A8-FP8: fp8's weights, activations quantized to FP8 E4M3 per token at each matmul
//               (compressed-tensors' FP8_DYNAMIC as FP8 hardware computes it)
//   w8a16       INT8 W8A16: int8's weights, weight-only (F32 activations)
enum class WeightType : int { keep = 0, q8_0, q4_0, int8, fp8, fp8_tensor, int4, fp8_dynamic, w8a16 };

}  // namespace infer
