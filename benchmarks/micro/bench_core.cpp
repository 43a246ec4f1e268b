// Micro benchmarks of the core runtime: thread-pool dispatch latency, memory read bandwidth, GGUF
// parsing, F16 conversion.
//   build/benchmarks/infer-bench-micro --benchmark_format=json
#include <benchmark/benchmark.h>

#if defined(__x86_64__)
// GCC 12's AVX-512 headers start some intrinsics from _mm256_undefined_*(), which its
// -Wuninitialized flags at every inlined use; the values are never read.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#endif

#include <random>
#include <vector>

#include "core/cpu_features.hpp"
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
// the loop reads with the widest loads the CPU has, prefetching 2 KiB ahead as the decode kernels
// do, so that the figure is the most a kernel could read. Intel Xeon VM (family 6 model 207), 2
// threads, the most of three runs each: a plain loop over 4 KiB pages about 20 GB/s; 8-byte loads
// on huge pages, prefetching (this benchmark until 2026-12-06) 24.4-25.1; 64-byte loads 31.0-32.8.
uint64_t sum_words(const uint8_t* p, size_t bytes) {
  const auto* w = reinterpret_cast<const uint64_t*>(p);
  uint64_t s[8] = {};
  for (size_t i = 0; i < bytes / sizeof(uint64_t); i += 8) {
    __builtin_prefetch(w + i + 2048 / sizeof(uint64_t));
    for (int k = 0; k < 8; ++k) s[k] += w[i + k];
  }
  return s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
}

#if defined(__x86_64__)
// 256 bytes a step, each of their four cache lines prefetched 2 KiB ahead.
__attribute__((target("avx512f"))) uint64_t sum_avx512(const uint8_t* p, size_t bytes) {
  __m512i s[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512()};
  for (size_t i = 0; i < bytes; i += 256)
    for (int k = 0; k < 4; ++k) {
      _mm_prefetch(reinterpret_cast<const char*>(p + i + 2048 + 64 * k), _MM_HINT_T0);
      s[k] = _mm512_add_epi64(s[k], _mm512_load_si512(p + i + 64 * k));
    }
  return static_cast<uint64_t>(_mm512_reduce_add_epi64(_mm512_add_epi64(_mm512_add_epi64(s[0], s[1]),
                                                                        _mm512_add_epi64(s[2], s[3]))));
}
__attribute__((target("avx2"))) uint64_t sum_avx2(const uint8_t* p, size_t bytes) {
  __m256i s[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
  for (size_t i = 0; i < bytes; i += 256)
    for (int k = 0; k < 4; ++k) {
      _mm_prefetch(reinterpret_cast<const char*>(p + i + 2048 + 64 * k), _MM_HINT_T0);
      const auto* v = reinterpret_cast<const __m256i*>(p + i + 64 * k);
      s[k] = _mm256_add_epi64(s[k], _mm256_add_epi64(_mm256_load_si256(v), _mm256_load_si256(v + 1)));
    }
  alignas(32) uint64_t out[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(out),
                     _mm256_add_epi64(_mm256_add_epi64(s[0], s[1]), _mm256_add_epi64(s[2], s[3])));
  return out[0] + out[1] + out[2] + out[3];
}
#endif

using SumFn = uint64_t (*)(const uint8_t*, size_t);
SumFn widest_sum() {
#if defined(__x86_64__)
  if (detected_isa() >= CpuIsa::avx512) return sum_avx512;
  if (detected_isa() >= CpuIsa::avx2) return sum_avx2;
#endif
  return sum_words;
}

void BM_ReadBandwidth(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  ThreadPool pool(threads);
  constexpr size_t kBytes = size_t{1} << 30;
  WeightArena arena;
  auto* buffer = static_cast<uint8_t*>(*arena.allocate(kBytes));
  const size_t n = kBytes / sizeof(uint64_t);
  pool.parallel_for(n / 8, [&](size_t b, size_t e) {
    auto* w = reinterpret_cast<uint64_t*>(buffer);
    for (size_t i = b * 8; i < e * 8; ++i) w[i] = i;  // every page touched, by its reader
  }, n / 8 / static_cast<size_t>(threads));
  const SumFn sum = widest_sum();
  const size_t chunk = kBytes / static_cast<size_t>(threads) / 256 * 256;
  for (auto _ : state) {
    std::vector<uint64_t> sums(static_cast<size_t>(threads), 0);
    pool.parallel_for(static_cast<size_t>(threads), [&](size_t b, size_t e) {
      for (size_t t = b; t < e; ++t) sums[t] = sum(buffer + t * chunk, chunk);
    }, 1);
    benchmark::DoNotOptimize(sums.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(chunk) * threads);
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
