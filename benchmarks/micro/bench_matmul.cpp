// Matmul throughput per weight type on a 2048 x 2048 weight, for 1 and 16 x rows, on every ISA
// the CPU supports; weight_GBps is the weight data streamed per second (the figure that bounds
// decoding). BM_MatmulTinyLlama: Q4_0, Q8_0, Q4_1, the K-quants, F16 and BF16 at TinyLlama-1.1B's shapes
// (n_in 2048 x n_out 5632, the FFN gate/up, and 2048 x 2048, the attention) for the batch sizes a
// serving step and a prompt's prefill see, on the file's rows (loaded:0) and as the CPU backend
// prepares the weight at load on that ISA (loaded:1); rows_per_s is x rows through the whole
// weight per second. BM_MatmulLoaded: one x row (decode)
// on every type as the CPU backend prepares weights at load; BM_MatmulStreamed the same from
// memory. Also the row dequantization and the activation conversion on their own.
//   build/benchmarks/infer-bench-matmul --benchmark_format=json
//   build/benchmarks/infer-bench-matmul --benchmark_filter=TinyLlama
//   build/benchmarks/infer-bench-matmul --benchmark_filter=Loaded
//   build/benchmarks/infer-bench-matmul --benchmark_filter=Streamed
//   (INFER_THREADS=N sets the thread pool size; default: one per hardware thread)
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "core/cpu_features.hpp"
#include "core/thread_pool.hpp"
#include "kernels/cpu/dtype_traits.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/qdot.hpp"
#include "quant/quantize_activations.hpp"
#include "quant_test_util.hpp"

namespace {

using namespace infer;

constexpr int64_t kN = 2048;

ThreadPool& pool() {
  static ThreadPool p(std::getenv("INFER_THREADS") ? std::atoi(std::getenv("INFER_THREADS")) : 0);
  return p;
}

// Times matmul of an n_out x n_in weight of type t with n_rows x rows on `isa`; false (the
// benchmark skipped) when the CPU lacks the ISA. The weight's size in bytes goes to *weight_bytes.
// With `packed`, the weight as the CPU backend prepares it at load on that ISA (repacked for the
// types it repacks there) rather than in the file's rows.
bool time_matmul(benchmark::State& state, DType t, int64_t n_in, int64_t n_out, int64_t n_rows, CpuIsa isa,
                 size_t* weight_bytes, bool packed = false) {
  if (!isa_supported(isa)) {
    state.SkipWithError("ISA not supported by this CPU");
    return false;
  }
  test::IsaScope scope(isa);
  auto bytes = test::random_weights(t, n_out, n_in, 1);
  CpuBackend backend(pool());
  TensorView w = TensorView::contiguous(t, 2, {n_in, n_out, 1, 1}, bytes.data());
  if (packed) w = *backend.prepare_weight(w, Backend::WeightSource::kept);
  const auto x = test::random_floats(static_cast<size_t>(n_rows * n_in), 2);
  std::vector<float> y(static_cast<size_t>(n_rows * n_out));
  for (auto _ : state) {
    matmul(w, x.data(), n_rows, n_in, y.data(), n_out, pool());
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GFLOPs"] = benchmark::Counter(2.0 * static_cast<double>(n_rows * n_in * n_out) / 1e9,
                                                benchmark::Counter::kIsIterationInvariantRate);
  *weight_bytes = bytes.size();
  return true;
}

void BM_Matmul(benchmark::State& state, DType t) {
  const int64_t n_rows = state.range(0);
  const auto isa = static_cast<CpuIsa>(state.range(1));
  size_t bytes = 0;
  if (!time_matmul(state, t, kN, kN, n_rows, isa, &bytes)) return;
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
  state.counters["weight_GBps"] =
      benchmark::Counter(static_cast<double>(bytes) / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(dtype_name(t)) + " rows=" + std::to_string(n_rows) + " " + isa_name(isa) +
                 " threads=" + std::to_string(pool().size()));
}

void BM_MatmulTinyLlama(benchmark::State& state, DType t) {
  const int64_t n_in = 2048, n_out = state.range(0), n_rows = state.range(1);
  const auto isa = static_cast<CpuIsa>(state.range(2));
  const bool packed = state.range(3) != 0;
  size_t bytes = 0;
  if (!time_matmul(state, t, n_in, n_out, n_rows, isa, &bytes, packed)) return;
  state.counters["rows_per_s"] = benchmark::Counter(static_cast<double>(n_rows), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(dtype_name(t)) + " " + std::to_string(n_in) + "x" + std::to_string(n_out) +
                 " rows=" + std::to_string(n_rows) + " " + isa_name(isa) + (packed ? " as loaded" : " file rows") +
                 " threads=" + std::to_string(pool().size()));
}

// Times one x row through `weights` (n_out x n_in, all alike) used in turn; weight_GBps counts
// `bytes` a call.
void time_decode(benchmark::State& state, DType t, const std::vector<TensorView>& weights, size_t bytes,
                 const std::string& label) {
  const int64_t n_in = weights[0].shape[0], n_out = weights[0].shape[1];
  const auto x = test::random_floats(static_cast<size_t>(n_in), 2);
  std::vector<float> y(static_cast<size_t>(n_out));
  size_t next = 0;
  for (auto _ : state) {
    matmul(weights[next], x.data(), 1, n_in, y.data(), n_out, pool());
    next = (next + 1) % weights.size();
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["weight_GBps"] =
      benchmark::Counter(static_cast<double>(bytes) / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(dtype_name(t)) + " " + std::to_string(n_in) + "x" + std::to_string(n_out) + label +
                 (weights[0].layout == Layout::cpu_packed ? " packed" : " copied") + " threads=" + std::to_string(pool().size()));
}

// Decode (one x row) on weights as the CPU backend holds them at load: repacked for its tiles,
// or copied, on huge pages. n_out 5632 x n_in 2048 (6.5 MB of Q4_0 and more) runs past L2, but a
// large L3 may still hold it (480 MB on the Intel Xeon VM of docs/benchmarks.md): generation
// against memory is infer-bench's tg; n_out 512 and 128 stay in L2, which shows a kernel's own
// speed (with INFER_THREADS=1, 512 with less of the per-call cost).
void BM_MatmulLoaded(benchmark::State& state, DType t) {
  const int64_t n_in = 2048, n_out = state.range(0);
  // Copies of the large weight used in turn, so that none is still in L2 from the last call.
  const int copies = n_out > 1024 ? 4 : 1;
  CpuBackend backend(pool());
  std::vector<std::vector<uint8_t>> files;
  std::vector<TensorView> weights;
  for (int c = 0; c < copies; ++c) {
    files.push_back(test::random_weights(t, n_out, n_in, 1 + static_cast<uint64_t>(c)));
    const TensorView w = TensorView::contiguous(t, 2, {n_in, n_out, 1, 1}, files.back().data());
    weights.push_back(*backend.prepare_weight(w, Backend::WeightSource::released));
  }
  time_decode(state, t, weights, files[0].size(), "");
}

// The same decode from memory: enough copies of the weight (n_out 5632, 2048 or 256: TinyLlama's
// FFN, attention and K/V shapes), as the CPU backend holds them, that together they pass 1 GiB
// (past any L3), used in turn; weight_GBps is then the stream a decode step gets, to set against
// BM_ReadBandwidth (infer-bench-micro).
void BM_MatmulStreamed(benchmark::State& state, DType t) {
  const int64_t n_in = 2048, n_out = state.range(0);
  CpuBackend backend(pool());
  const auto file = test::random_weights(t, n_out, n_in, 1);
  const size_t copies = ((size_t{1} << 30) + file.size() - 1) / file.size();
  std::vector<std::vector<uint8_t>> files(copies, file);
  std::vector<TensorView> weights;
  for (auto& f : files) {
    const TensorView w = TensorView::contiguous(t, 2, {n_in, n_out, 1, 1}, f.data());
    weights.push_back(*backend.prepare_weight(w, Backend::WeightSource::released));
  }
  time_decode(state, t, weights, file.size(), " x" + std::to_string(copies));
}

void BM_Dequantize(benchmark::State& state, DType t) {
  const auto isa = static_cast<CpuIsa>(state.range(0));
  if (!isa_supported(isa)) {
    state.SkipWithError("ISA not supported by this CPU");
    return;
  }
  test::IsaScope scope(isa);
  const int64_t rows = 64;
  const auto bytes = test::random_weights(t, rows, kN, 3);
  const uint64_t row_bytes = bytes.size() / rows;
  std::vector<float> out(static_cast<size_t>(kN));
  for (auto _ : state) {
    for (int64_t r = 0; r < rows; ++r) {
      dequantize_row(t, bytes.data() + r * row_bytes, out.data(), kN);
      benchmark::DoNotOptimize(out.data());
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes.size()));
  state.SetLabel(std::string(dtype_name(t)) + " " + isa_name(isa));
}

void BM_PrepareActivations(benchmark::State& state, DType t) {
  const DType at = activation_type(t);
  const auto x = test::random_floats(static_cast<size_t>(kN), 4);
  std::vector<uint8_t> a(*dtype_row_bytes(at, static_cast<uint64_t>(kN)));
  for (auto _ : state) {
    prepare_activations(at, x.data(), a.data(), kN);
    benchmark::DoNotOptimize(a.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * kN * static_cast<int64_t>(sizeof(float)));
  state.SetLabel(std::string(dtype_name(t)) + " -> " + std::string(dtype_name(at)));
}

const int kRegistered = [] {
  for (DType t : test::computable_types()) {
    const std::string name(dtype_name(t));
    benchmark::RegisterBenchmark(("BM_Matmul/" + name).c_str(), BM_Matmul, t)
        ->ArgsProduct({{1, 16},
                       {static_cast<int>(CpuIsa::scalar), static_cast<int>(CpuIsa::avx2), static_cast<int>(CpuIsa::avxvnni),
                        static_cast<int>(CpuIsa::avx512)}})
        ->ArgNames({"rows", "isa"})
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("BM_Dequantize/" + name).c_str(), BM_Dequantize, t)
        ->Arg(static_cast<int>(CpuIsa::scalar))
        ->Arg(static_cast<int>(CpuIsa::avx2))
        ->ArgNames({"isa"});
    if (t != DType::f32) benchmark::RegisterBenchmark(("BM_PrepareActivations/" + name).c_str(), BM_PrepareActivations, t);
  }
  for (DType t : test::computable_types())
    benchmark::RegisterBenchmark(("BM_MatmulLoaded/" + std::string(dtype_name(t))).c_str(), BM_MatmulLoaded, t)
        ->ArgNames({"n_out"})
        ->Arg(5632)
        ->Arg(512)
        ->Arg(128)
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
  for (DType t : test::computable_types())
    benchmark::RegisterBenchmark(("BM_MatmulStreamed/" + std::string(dtype_name(t))).c_str(), BM_MatmulStreamed, t)
        ->ArgNames({"n_out"})
        ->Arg(5632)
        ->Arg(2048)
        ->Arg(256)
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
  for (DType t : {DType::q4_0, DType::q8_0, DType::q4_1, DType::q5_0, DType::q5_1, DType::q2_k, DType::q3_k, DType::q4_k,
                  DType::q5_k, DType::q6_k, DType::f16, DType::bf16}) {
    const std::vector<int64_t> rows{1, 2, 4, 8, 16, 32, 128};
    benchmark::RegisterBenchmark(("BM_MatmulTinyLlama/" + std::string(dtype_name(t))).c_str(), BM_MatmulTinyLlama, t)
        ->ArgsProduct({{5632, 2048},
                       rows,
                       {static_cast<int>(CpuIsa::avx2), static_cast<int>(CpuIsa::avxvnni), static_cast<int>(CpuIsa::avx512)},
                       {0, 1}})
        ->ArgNames({"n_out", "rows", "isa", "loaded"})
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  return 0;
}();

}  // namespace

BENCHMARK_MAIN();
