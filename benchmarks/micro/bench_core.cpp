// Micro benchmarks of the core runtime: thread-pool dispatch latency, memory read bandwidth, GGUF
// parsing, F16 conversion.
//   build/benchmarks/infer-bench-micro --benchmark_format=json
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "core/half.hpp"
#include "core/thread_pool.hpp"
#include "format/gguf.hpp"

namespace {

using namespace infer;

// One parallel_for over tiny work: what each kernel call pays to fan out and join.
void BM_ParallelForDispatch(benchmark::State& state) {
  ThreadPool pool(static_cast<int>(state.range(0)));
  std::vector<float> v(1024, 1.0f);
  for (auto _ : state) {
    pool.parallel_for(v.size(), [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) v[i] += 1.0f;
    });
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_ParallelForDispatch)->Arg(1)->Arg(2)->Arg(4);

// Read bandwidth of memory: a decode step streams every weight once, so bandwidth / bytes of
// weights is its ceiling (the roofline docs/benchmarks.md prints beside the decode rates). Each
// thread sums its own half of a 1 GiB buffer (well past the caches), split as a matmul splits
// weight rows.
void BM_ReadBandwidth(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  ThreadPool pool(threads);
  std::vector<uint64_t> buffer(size_t{1} << 27, 1);  // 1 GiB, every page touched
  for (auto _ : state) {
    std::vector<uint64_t> sums(static_cast<size_t>(threads), 0);
    pool.parallel_for(static_cast<size_t>(threads), [&](size_t b, size_t e) {
      for (size_t t = b; t < e; ++t) {
        const size_t chunk = buffer.size() / static_cast<size_t>(threads);
        uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (size_t i = t * chunk; i < (t + 1) * chunk; i += 4) {
          s0 += buffer[i];
          s1 += buffer[i + 1];
          s2 += buffer[i + 2];
          s3 += buffer[i + 3];
        }
        sums[t] = s0 + s1 + s2 + s3;
      }
    }, 1);
    benchmark::DoNotOptimize(sums.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(buffer.size() * sizeof(uint64_t)));
}
BENCHMARK(BM_ReadBandwidth)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

// Parsing the header, metadata and tensor table of a file with a 32k-token vocabulary.
void BM_GgufParse(benchmark::State& state) {
  gguf::Writer w;
  std::vector<std::string> tokens;
  std::vector<float> scores;
  for (int i = 0; i < 32000; ++i) {
    tokens.push_back("tok" + std::to_string(i));
    scores.push_back(-static_cast<float>(i));
  }
  w.metadata().set("general.architecture", "llama");
  w.metadata().set("tokenizer.ggml.tokens", Array::of_strings(tokens));
  w.metadata().set("tokenizer.ggml.scores", Array::of(ValueType::f32, std::span<const float>(scores)));
  std::vector<uint8_t> data(64 * 4);
  const std::vector<int64_t> shape = {64};
  for (int i = 0; i < 200; ++i) (void)w.add_tensor("blk." + std::to_string(i) + ".w", DType::f32, shape, data);
  const auto bytes = w.write_to_memory().value();
  for (auto _ : state) {
    auto mf = gguf::read(MappedFile::from_bytes(bytes).value());
    benchmark::DoNotOptimize(mf.ok());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes.size()));
}
BENCHMARK(BM_GgufParse);

void BM_F16ToF32(benchmark::State& state) {
  std::vector<uint16_t> h(4096);
  std::mt19937 rng(1);
  for (auto& x : h) x = static_cast<uint16_t>(rng() & 0x7bff);
  std::vector<float> out(h.size());
  for (auto _ : state) {
    for (size_t i = 0; i < h.size(); ++i) out[i] = f16_to_f32(h[i]);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * h.size()));
}
BENCHMARK(BM_F16ToF32);

}  // namespace

BENCHMARK_MAIN();
