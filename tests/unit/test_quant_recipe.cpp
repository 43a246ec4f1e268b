// infer-quantize's choice of tensor types (quant/quant_recipe.hpp) on hand-made tensor lists,
// against llama.cpp's rules as src/llama-quant.cpp states them. The whole-file comparison with
// llama-quantize itself is tests/integration/quantize_cli.py.
#include <catch2/catch.hpp>

#include "quant/quant_recipe.hpp"

using namespace infer;
using namespace infer::quant;

namespace {

TensorShape matrix(std::string name, int64_t cols, int64_t rows, DType t = DType::f32) {
  return {std::move(name), t, {cols, rows, 1, 1}};
}

ModelFacts llama(int n_layer) {
  ModelFacts m;
  m.arch = "llama";
  m.n_layer = n_layer;
  m.n_gqa = 2;
  return m;
}

}  // namespace

TEST_CASE("presets carry llama-quantize's names and llama_ftype values, aliases and any case included", "[quant]") {
  REQUIRE(find_preset("Q4_K_M")->ftype == 15);
  REQUIRE(find_preset("q4_k")->ftype == 15);  // llama-quantize's alias for Q4_K_M
  REQUIRE(find_preset("Q3_K")->ftype == 12);
  REQUIRE(find_preset("Q5_K")->ftype == 17);
  REQUIRE(find_preset("Q8_0")->ftype == 7);
  REQUIRE(find_preset("BF16")->ftype == 32);
  REQUIRE(find_preset("F32")->ftype == 0);
  REQUIRE(find_preset("Q3_K_S")->base == DType::q3_k);
  REQUIRE_FALSE(find_preset("IQ2_XXS").has_value());  // needs an importance matrix: not offered
  REQUIRE_FALSE(find_preset("Q4_K_X").has_value());
  REQUIRE(all_presets().size() == 20);
}

TEST_CASE("tensor_order visits tensors outside blk.N first, then layers by number, names sorted within", "[quant]") {
  const std::vector<TensorShape> t = {matrix("blk.10.attn_q.weight", 32, 32), matrix("output.weight", 32, 32),
                                      matrix("blk.2.ffn_up.weight", 32, 32), matrix("blk.2.attn_k.weight", 32, 32),
                                      matrix("token_embd.weight", 32, 32)};
  REQUIRE(tensor_order(t) == std::vector<size_t>{1, 4, 3, 2, 0});
}

TEST_CASE("ggml counts dimensions up to the last one above 1", "[quant]") {
  REQUIRE(significant_dims({64, 1, 1, 1}) == 1);
  REQUIRE(significant_dims({64, 32, 1, 1}) == 2);
  REQUIRE(significant_dims({64, 1, 4, 1}) == 3);
  REQUIRE(significant_dims({1, 1, 1, 1}) == 1);
}

TEST_CASE("only 2-D weight matrices are converted: norms, vectors and single rows are copied", "[quant]") {
  const std::vector<TensorShape> t = {matrix("blk.0.attn_norm.weight", 64, 1), matrix("blk.0.attn_q.bias", 64, 64),
                                      matrix("blk.0.attn_q.weight", 64, 64), matrix("blk.0.ffn_gate_inp.weight", 64, 8),
                                      matrix("blk.0.attn_k.weight", 64, 1)};
  const auto types = choose_types(*find_preset("Q8_0"), llama(1), t, {});
  REQUIRE(types == std::vector<DType>{DType::f32, DType::f32, DType::q8_0, DType::f32, DType::f32});
}

TEST_CASE("K-quant rows that 256 does not divide fall back as in llama.cpp, to F16 when 32 does not either", "[quant]") {
  const std::vector<TensorShape> t = {matrix("blk.0.attn_q.weight", 96, 96), matrix("blk.0.ffn_down.weight", 144, 96),
                                      matrix("blk.0.attn_k.weight", 512, 96)};
  RecipeOptions pure;
  pure.pure = true;
  const auto expect = [&](const char* preset, std::vector<DType> want) {
    INFO(preset);
    REQUIRE(choose_types(*find_preset(preset), llama(1), t, pure) == want);
  };
  expect("Q2_K", {DType::q4_0, DType::f16, DType::q2_k});
  expect("Q3_K_S", {DType::q4_0, DType::f16, DType::q3_k});
  expect("Q4_K_S", {DType::q5_0, DType::f16, DType::q4_k});
  expect("Q5_K_S", {DType::q5_1, DType::f16, DType::q5_k});
  expect("Q6_K", {DType::q8_0, DType::f16, DType::q6_k});
  expect("Q4_0", {DType::q4_0, DType::f16, DType::q4_0});
  expect("BF16", {DType::bf16, DType::bf16, DType::bf16});  // plain types need no fallback
}

TEST_CASE("mixtures: output to Q6_K (Q8_0 where 256 does not divide it), a tied embedding takes its rule", "[quant]") {
  const std::vector<TensorShape> untied = {matrix("output.weight", 256, 300), matrix("token_embd.weight", 256, 300),
                                           matrix("blk.0.attn_q.weight", 256, 256)};
  REQUIRE(choose_types(*find_preset("Q4_0"), llama(1), untied, {}) ==
          std::vector<DType>{DType::q6_k, DType::q4_0, DType::q4_0});
  REQUIRE(choose_types(*find_preset("Q8_0"), llama(1), untied, {}) ==
          std::vector<DType>{DType::q8_0, DType::q8_0, DType::q8_0});
  const std::vector<TensorShape> tied = {matrix("token_embd.weight", 96, 300)};
  REQUIRE(choose_types(*find_preset("Q4_K_M"), llama(1), tied, {}) == std::vector<DType>{DType::q8_0});
  RecipeOptions pure;
  pure.pure = true;
  REQUIRE(choose_types(*find_preset("Q4_0"), llama(1), untied, pure) ==
          std::vector<DType>{DType::q4_0, DType::q4_0, DType::q4_0});
}

TEST_CASE("Q4_K_M gives attn_v and ffn_down Q6_K in the first and last eighth and every third layer between", "[quant]") {
  std::vector<TensorShape> t;
  for (int i = 0; i < 8; ++i) {
    t.push_back(matrix("blk." + std::to_string(i) + ".attn_v.weight", 256, 256));
    t.push_back(matrix("blk." + std::to_string(i) + ".ffn_down.weight", 256, 256));
  }
  const auto types = choose_types(*find_preset("Q4_K_M"), llama(8), t, {});
  // use_more_bits(i, 8): i < 1, i >= 7, or (i - 1) % 3 == 2.
  for (int i = 0; i < 8; ++i) {
    INFO("layer " << i);
    const DType want = (i == 0 || i == 7 || i == 3 || i == 6) ? DType::q6_k : DType::q4_k;
    REQUIRE(types[static_cast<size_t>(2 * i)] == want);
    REQUIRE(types[static_cast<size_t>(2 * i + 1)] == want);
  }
}

TEST_CASE("kept tensors stay in their input type and do not advance the layer counters", "[quant]") {
  const std::vector<TensorShape> t = {matrix("blk.0.attn_v.weight", 256, 256), matrix("blk.1.attn_v.weight", 256, 256),
                                      matrix("blk.2.attn_v.weight", 256, 256)};
  RecipeOptions keep;
  keep.keep = {true, false, false};
  // Q3_K_M: the first two attn_v visited get Q5_K, later ones Q4_K.
  REQUIRE(choose_types(*find_preset("Q3_K_M"), llama(3), t, {}) ==
          std::vector<DType>{DType::q5_k, DType::q5_k, DType::q4_k});
  REQUIRE(choose_types(*find_preset("Q3_K_M"), llama(3), t, keep) ==
          std::vector<DType>{DType::f32, DType::q5_k, DType::q5_k});
}
