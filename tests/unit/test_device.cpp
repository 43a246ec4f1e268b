// EngineConfig::device: the names parse_device accepts, and what Engine::create answers for a
// device the build or the machine lacks (a CPU-only build, or a CUDA build on a machine without a
// GPU: a clear unsupported error before anything loads, never a crash). On a machine with GPUs
// the first device must create; an ordinal past the last one must not.
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <string>

#include <unistd.h>

#include "infer/engine.hpp"
#include "tiny_llama.hpp"

using namespace infer;

namespace {

struct TinyModelFile {
  std::string path;
  TinyModelFile() {
    test::TinyLlama spec;
    spec.n_vocab = 64;
    spec.n_ctx = 128;
    spec.seed = 5;
    const auto bytes = spec.write();
    path = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + "/infer-device-test-" + std::to_string(::getpid()) + ".gguf";
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  ~TinyModelFile() { std::remove(path.c_str()); }
};

EngineConfig small_config(const std::string& device) {
  EngineConfig c;
  c.threads = 1;
  c.kv_cache_tokens = 256;
  c.device = device;
  return c;
}

}  // namespace

TEST_CASE("parse_device accepts cpu, cuda and cuda:N and refuses anything else", "[device]") {
  auto cpu = parse_device("cpu");
  REQUIRE(cpu.ok());
  CHECK(cpu->kind == DeviceSpec::Kind::cpu);
  auto cuda = parse_device("cuda");
  REQUIRE(cuda.ok());
  CHECK(cuda->kind == DeviceSpec::Kind::cuda);
  CHECK(cuda->index == 0);
  auto three = parse_device("cuda:3");
  REQUIRE(three.ok());
  CHECK(three->kind == DeviceSpec::Kind::cuda);
  CHECK(three->index == 3);
  CHECK(parse_device("cuda:1023").ok());
  for (const char* bad : {"", "CPU", "gpu", "cuda:", "cuda:-1", "cuda:1024", "cuda:0x1", "cuda:1 ", " cuda", "cuda:+1",
                          "cuda:99999999999", "cuda0", "cpu:0", "metal"}) {
    INFO(bad);
    auto d = parse_device(bad);
    REQUIRE_FALSE(d.ok());
    CHECK(d.status().code() == StatusCode::invalid_argument);
    CHECK(d.status().message().find("cpu, cuda or cuda:N") != std::string::npos);
  }
}

TEST_CASE("Engine::create refuses a malformed device name before it opens the model", "[device]") {
  // The model path does not exist: the device's error comes first.
  auto e = Engine::create("/nonexistent/model.gguf", small_config("gpu:0"));
  REQUIRE_FALSE(e.ok());
  CHECK(e.status().code() == StatusCode::invalid_argument);
  CHECK(e.status().message().find("EngineConfig.device") != std::string::npos);
}

TEST_CASE("a CUDA device the build or the machine lacks is an unsupported error naming the device", "[device]") {
  TinyModelFile model;
  const int n = cuda_device_count();
  CHECK(n >= 0);
  // Past the last device on any machine; every device when there is none.
  for (const std::string& device : {std::string("cuda:") + std::to_string(n), std::string("cuda:1023")}) {
    INFO(device);
    auto e = Engine::create(model.path, small_config(device));
    REQUIRE_FALSE(e.ok());
    CHECK(e.status().code() == StatusCode::unsupported);
    CHECK(e.status().message().find("EngineConfig.device " + device) != std::string::npos);
    CHECK(e.status().message().find('\n') == std::string::npos);
  }
  if (n == 0) {
    auto e = Engine::create(model.path, small_config("cuda"));
    REQUIRE_FALSE(e.ok());
    CHECK(e.status().code() == StatusCode::unsupported);
    // Either reason is named: no CUDA in this build, or no device on this machine.
    const std::string m = e.status().message();
    CHECK((m.find("-DINFER_CUDA=ON") != std::string::npos || m.find("no CUDA device") != std::string::npos));
  }
}

TEST_CASE("device cpu serves as the default does", "[device]") {
  TinyModelFile model;
  auto a = Engine::create(model.path, small_config("cpu"));
  REQUIRE(a.ok());
  EngineConfig d = small_config("cpu");
  d.device = EngineConfig{}.device;
  CHECK(d.device == "cpu");
  auto b = Engine::create(model.path, d);
  REQUIRE(b.ok());
  Request r;
  r.prompt_ids = {1, 5, 9, 13};
  r.params.temperature = 0;
  r.params.max_tokens = 8;
  r.params.ignore_eos = true;
  auto ra = (*a)->generate(Request(r));
  auto rb = (*b)->generate(Request(r));
  REQUIRE(ra.ok());
  REQUIRE(rb.ok());
  CHECK(ra->ids.size() == 8);
  CHECK(ra->ids == rb->ids);
}
