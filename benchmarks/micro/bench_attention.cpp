// Attention kernel throughput (kernels/cpu/attention.hpp), one thread: one layer of a 512-token
// prompt as the engine computes it (groups of 16 consecutive rows, each over its causal prefix of an
// F16 cache), for TinyLlama's heads (32 query / 4 KV, head_dim 64) and Gemma 3 270M's (4 / 1, 256);
// and one decode step at a 4096-token context. GFLOPs counts the useful products (4 per position,
// head and element: Q·K and P·V).
//   build/benchmarks/infer-bench-attention [--benchmark_format=json]
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "kernels/cpu/attention.hpp"
#include "attention_cache.hpp"
#include "quant_test_util.hpp"

namespace {

using namespace infer;

// rows rows ending at position `end`, all of one sequence, attention over their causal prefixes.
void run_rows(const AttentionShape& shape, const test::AttentionCache& cache, int rows, int32_t end, const std::vector<float>& q,
              std::vector<float>& out, std::vector<float>& scratch) {
  std::vector<int32_t> index(static_cast<size_t>(rows)), n_ctx(index.size()), first(index.size(), 0);
  for (int j = 0; j < rows; ++j) index[static_cast<size_t>(j)] = j, n_ctx[static_cast<size_t>(j)] = end - rows + j + 1;
  AttentionRows a;
  a.q = q.data();
  a.q_stride = static_cast<int64_t>(shape.n_head) * shape.head_dim;
  a.out = out.data();
  a.out_stride = a.q_stride;
  a.rows = index.data();
  a.n_ctx = n_ctx.data();
  a.first = first.data();
  a.n_rows = rows;
  attention_rows(shape, cache.view, 0, cache.blocks, a, scratch.data());
}

void BM_AttentionPrefill512(benchmark::State& state) {
  const AttentionShape shape{static_cast<int>(state.range(0)), static_cast<int>(state.range(1)), static_cast<int>(state.range(2)),
                             0.125f};
  const int prompt = 512, group = 16;
  test::AttentionCache cache(DType::f16, shape.n_kv_heads, shape.head_dim, 16, prompt);
  cache.fill(test::random_floats(cache.k.size() / 2, 1), test::random_floats(cache.v.size() / 2, 4));
  const auto q = test::random_floats(static_cast<size_t>(group * shape.n_head * shape.head_dim), 2);
  std::vector<float> out(q.size()), scratch(static_cast<size_t>(attention_rows_scratch_floats(shape, group)));
  for (auto _ : state) {
    for (int end = group; end <= prompt; end += group) run_rows(shape, cache, group, end, q, out, scratch);
    benchmark::DoNotOptimize(out.data());
  }
  double flops = 0;
  for (int p = 1; p <= prompt; ++p) flops += 4.0 * p * shape.head_dim * shape.n_head;
  state.counters["GFLOPs"] = benchmark::Counter(flops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_AttentionPrefill512)->Args({32, 4, 64})->Args({4, 1, 256})->Unit(benchmark::kMillisecond);

void BM_AttentionDecode4096(benchmark::State& state) {
  const AttentionShape shape{static_cast<int>(state.range(0)), static_cast<int>(state.range(1)), static_cast<int>(state.range(2)),
                             0.125f};
  const int ctx = 4096;
  test::AttentionCache cache(DType::f16, shape.n_kv_heads, shape.head_dim, 16, ctx);
  cache.fill(test::random_floats(cache.k.size() / 2, 1), test::random_floats(cache.v.size() / 2, 4));
  const auto q = test::random_floats(static_cast<size_t>(shape.n_head * shape.head_dim), 3);
  std::vector<float> out(q.size()), scratch(static_cast<size_t>(attention_rows_scratch_floats(shape, 1)));
  for (auto _ : state) {
    run_rows(shape, cache, 1, ctx, q, out, scratch);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["GFLOPs"] = benchmark::Counter(4.0 * ctx * shape.head_dim * shape.n_head / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_AttentionDecode4096)->Args({32, 4, 64})->Args({4, 1, 256})->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
