// EngineConfig::device: the names of the devices an engine computes on.
#include <charconv>
#include <string>

#include "backend/backend.hpp"
#include "core/cpu_features.hpp"
#include "infer/engine.hpp"

namespace infer {

Result<DeviceSpec> parse_device(std::string_view text) {
  DeviceSpec d;
  if (text == "cpu") return d;
  d.kind = DeviceSpec::Kind::cuda;
  if (text == "cuda") return d;
  constexpr std::string_view prefix = "cuda:";
  if (text.size() > prefix.size() && text.substr(0, prefix.size()) == prefix) {
    const std::string_view digits = text.substr(prefix.size());
    int index = -1;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (ec == std::errc() && end == digits.data() + digits.size() && digits.size() <= 4 && index >= 0 && index < 1024) {
      d.index = index;
      return d;
    }
  }
  return invalid_argument("device \"" + std::string(text) + "\" is not cpu, cuda or cuda:N");
}

int cuda_device_count() noexcept { return cuda_devices(); }

const char* cpu_isa() noexcept { return isa_name(active_isa()); }

}  // namespace infer
