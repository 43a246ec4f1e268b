// Micro benchmarks of the core runtime: thread-pool dispatch latency, memory read bandwidth, GGUF
// parsing, F16 conversion.
//   build/benchmarks/infer-bench-micro --benchmark_format=json
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "core/half.hpp"
#include "core/thread_pool.hpp"
#include "core/weight_arena.hpp"
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
// weight rows. The buffer lies where the CPU backend puts weights (a WeightArena: huge pages), and
// the loop prefetches as the decode kernels do (2 KiB ahead), so that the figure is the most a
// kernel could read, not what a plain loop over 4 KiB pages gets (about 20% less on an Intel
// Xeon VM).
void BM_ReadBandwidth(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  ThreadPool pool(threads);
  constexpr size_t kBytes = size_t{1} << 30;
  WeightArena arena;
  auto* buffer = reinterpret_cast<uint64_t*>(*arena.allocate(kBytes));
  const size_t n = kBytes / sizeof(uint64_t);
  pool.parallel_for(n / 8, [&](size_t b, size_t e) {
    for (size_t i = b * 8; i < e * 8; ++i) buffer[i] = i;  // every page touched, by its reader
  }, n / 8 / static_cast<size_t>(threads));
  for (auto _ : state) {
    std::vector<uint64_t> sums(static_cast<size_t>(threads), 0);
    pool.parallel_for(static_cast<size_t>(threads), [&](size_t b, size_t e) {
      for (size_t t = b; t < e; ++t) {
        const size_t chunk = n / static_cast<size_t>(threads);
        uint64_t s[8] = {};
        for (size_t i = t * chunk; i < (t + 1) * chunk; i += 8) {
          __builtin_prefetch(buffer + i + 2048 / sizeof(uint64_t));
          for (int k = 0; k < 8; ++k) s[k] += buffer[i + k];
        }
        sums[t] = s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
      }
    }, 1);
    benchmark::DoNotOptimize(sums.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(kBytes));
}
// Threads: 1, 2, 4, ... 64 (benchmarks/peer/compare.py runs the one its -t names).
BENCHMARK(BM_ReadBandwidth)->RangeMultiplier(2)->Range(1, 64)->UseRealTime()->Unit(benchmark::kMillisecond);

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
