#include "format/safetensors.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/checked_math.hpp"
#include "core/half.hpp"
#include "format/json.hpp"

namespace infer::safetensors {
namespace {

struct DtypeInfo {
  Dtype type;
  const char* name;
  uint32_t size;
};
constexpr DtypeInfo kDtypes[] = {
    {Dtype::f32, "F32", 4}, {Dtype::f16, "F16", 2}, {Dtype::bf16, "BF16", 2},   {Dtype::i8, "I8", 1},
    {Dtype::u8, "U8", 1},   {Dtype::i32, "I32", 4}, {Dtype::i64, "I64", 8}, {Dtype::f8_e4m3, "F8_E4M3", 1},
    {Dtype::f64, "F64", 8},
};
// Valid in the format, not read here (yet): named in the error so the user knows why.
constexpr const char* kKnownUnsupported[] = {"U64", "I16", "U16", "U32", "BOOL", "F8_E5M2", "F8_E8M0", "F6_E2M3",
                                             "F6_E3M2", "F4", "C64"};

std::string shown(std::string_view s) {
  std::string out = "'";
  for (char c : s.substr(0, 96)) out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  if (s.size() > 96) out += "...";
  return out + "'";
}

}  // namespace

const char* dtype_name(Dtype t) noexcept {
  for (const auto& d : kDtypes)
    if (d.type == t) return d.name;
  return "?";
}

uint32_t dtype_size(Dtype t) noexcept {
  for (const auto& d : kDtypes)
    if (d.type == t) return d.size;
  return 0;
}

Result<File> read(MappedFile mapped) {
  File out;
  out.file = std::make_shared<const MappedFile>(std::move(mapped));
  const MappedFile& f = *out.file;
  const std::string& path = f.path();
  auto bad = [&](const std::string& what) { return malformed_file(path + ": " + what); };
  if (f.size() < 8) return bad("file is too small to be safetensors (" + std::to_string(f.size()) + " bytes, the header length alone takes 8)");
  uint64_t n = 0;
  std::memcpy(&n, f.data(), 8);  // little-endian hosts only (as the GGUF reader)
  if (n > kMaxHeaderBytes)
    return bad("header length " + std::to_string(n) + " exceeds the limit of " + std::to_string(kMaxHeaderBytes) + " bytes");
  if (n > f.size() - 8)
    return bad("header length " + std::to_string(n) + " runs past the end of the file (" + std::to_string(f.size() - 8) +
               " bytes after the length)");
  if (n < 2) return bad("header of " + std::to_string(n) + " bytes cannot hold a JSON object");
  out.header_bytes = 8 + n;
  const std::string_view header(reinterpret_cast<const char*>(f.data() + 8), static_cast<size_t>(n));
  // The reference writer pads the header with spaces; it must start with '{'.
  if (header.front() != '{') return bad("the header does not start with '{' (not a safetensors file)");
  auto parsed = json::parse(header, path + ": header");
  if (!parsed.ok()) return parsed.status();
  const json::Json& doc = *parsed;
  if (!doc.is_object()) return bad("the header is not a JSON object");
  const uint64_t data_size = f.size() - out.header_bytes;
  const uint8_t* data = f.data() + out.header_bytes;

  out.tensors.reserve(doc.size());
  for (const auto& [name, entry] : doc.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) return bad("__metadata__ must be an object of strings, found " + std::string(json::type_name(entry)));
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string()) return bad("__metadata__ " + shown(k) + " must be a string, found " + json::type_name(v));
        out.metadata.emplace_back(k, v.get<std::string>());
      }
      continue;
    }
    const std::string what = "tensor " + shown(name);
    if (name.empty()) return bad("a tensor has an empty name");
    if (!entry.is_object()) return bad(what + ": its entry must be an object, found " + json::type_name(entry));
    for (const auto& [k, v] : entry.items()) {
      (void)v;
      if (k != "dtype" && k != "shape" && k != "data_offsets") return bad(what + ": unknown field " + shown(k));
    }
    Tensor t;
    t.name = name;
    const std::string* dtype = json::get_string(entry, "dtype");
    if (!dtype) return bad(what + ": dtype missing or not a string");
    const DtypeInfo* info = nullptr;
    for (const auto& d : kDtypes)
      if (*dtype == d.name) info = &d;
    if (!info) {
      for (const char* u : kKnownUnsupported)
        if (*dtype == u)
          return unsupported(path + ": " + what + ": dtype " + *dtype +
                             " is not supported (F32, F16, BF16, F64, I8, U8, I32, I64 and F8_E4M3 are)");
      return bad(what + ": unknown dtype " + shown(*dtype));
    }
    t.dtype = info->type;
    const json::Json* shape = json::member(entry, "shape");
    if (!shape || !shape->is_array()) return bad(what + ": shape missing or not an array");
    if (shape->size() > static_cast<size_t>(kMaxDims))
      return bad(what + ": " + std::to_string(shape->size()) + " dimensions (at most " + std::to_string(kMaxDims) + ")");
    uint64_t numel = 1;
    for (const auto& d : *shape) {
      if (!d.is_number_unsigned() && !(d.is_number_integer() && d.get<int64_t>() >= 0))
        return bad(what + ": shape entries must be non-negative integers");
      const uint64_t dim = d.get<uint64_t>();
      if (dim > static_cast<uint64_t>(INT64_MAX)) return bad(what + ": dimension " + std::to_string(dim) + " is too large");
      auto product = checked_mul(numel, dim);
      if (!product || *product > static_cast<uint64_t>(INT64_MAX)) return bad(what + ": the product of its dimensions overflows");
      numel = *product;
      t.shape.push_back(static_cast<int64_t>(dim));
    }
    const json::Json* offsets = json::member(entry, "data_offsets");
    if (!offsets || !offsets->is_array() || offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
        !(*offsets)[1].is_number_unsigned())
      return bad(what + ": data_offsets must be two non-negative integers [begin, end]");
    t.begin = (*offsets)[0].get<uint64_t>();
    t.end = (*offsets)[1].get<uint64_t>();
    if (t.begin > t.end)
      return bad(what + ": data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) + "] end before they begin");
    if (t.end > data_size)
      return bad(what + ": data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) +
                 "] run past the end of the data section (" + std::to_string(data_size) +
                 " bytes; the file is truncated or the offsets are wrong)");
    auto nbytes = checked_mul(numel, info->size);
    if (!nbytes) return bad(what + ": byte size overflows");
    if (t.end - t.begin != *nbytes)
      return bad(what + ": data_offsets hold " + std::to_string(t.end - t.begin) + " bytes, but " + std::to_string(numel) +
                 " " + info->name + " elements take " + std::to_string(*nbytes));
    t.data = data + t.begin;
    out.tensors.push_back(std::move(t));
  }
  std::sort(out.tensors.begin(), out.tensors.end(), [](const Tensor& a, const Tensor& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expected = 0;
  const Tensor* previous = nullptr;
  for (const Tensor& t : out.tensors) {
    if (t.begin < expected)
      return bad("tensors " + shown(previous->name) + " and " + shown(t.name) + " overlap in the data section (bytes [" +
                 std::to_string(previous->begin) + ", " + std::to_string(previous->end) + ") and [" +
                 std::to_string(t.begin) + ", " + std::to_string(t.end) + "))");
    if (t.begin > expected)
      return bad("the data section has a gap: bytes [" + std::to_string(expected) + ", " + std::to_string(t.begin) +
                 ") belong to no tensor (before " + shown(t.name) + ")");
    expected = t.end;
    previous = &t;
  }
  if (expected != data_size)
    return bad("the data section has " + std::to_string(data_size - expected) + " bytes after the last tensor (at " +
               std::to_string(expected) + " of " + std::to_string(data_size) + ")");
  return out;
}

Result<File> read_file(const std::string& path, MapMode mode) {
  auto file = MappedFile::open(path, mode);
  if (!file.ok()) return file.status();
  return read(std::move(file).value());
}

Result<ShardIndex> parse_shard_index(std::string_view text, const std::string& path) {
  auto parsed = json::parse(text, path);
  if (!parsed.ok()) return parsed.status();
  const json::Json* map = json::member(*parsed, "weight_map");
  if (!map || !map->is_object()) return malformed_file(path + ": weight_map missing or not an object");
  ShardIndex index;
  for (const auto& [tensor, shard] : map->items()) {
    if (!shard.is_string()) return malformed_file(path + ": weight_map " + shown(tensor) + " is not a file name");
    const std::string& s = shard.get_ref<const std::string&>();
    if (s.empty() || s == "." || s == ".." || s.find('/') != std::string::npos || s.find('\0') != std::string::npos)
      return malformed_file(path + ": weight_map " + shown(tensor) + ": shard " + shown(s) +
                            " is not a plain file name in the model directory");
    if (std::find(index.shards.begin(), index.shards.end(), s) == index.shards.end()) index.shards.push_back(s);
    index.weight_map.emplace_back(tensor, s);
  }
  if (index.shards.empty()) return malformed_file(path + ": weight_map names no tensor");
  return index;
}

Status Writer::add_tensor(std::string name, Dtype dtype, std::vector<int64_t> shape, Fill fill) {
  if (name.empty()) return invalid_argument("safetensors: a tensor needs a name");
  for (const Pending& t : tensors_)
    if (t.name == name) return invalid_argument("safetensors: tensor '" + name + "' added twice");
  if (shape.size() > static_cast<size_t>(kMaxDims))
    return invalid_argument("safetensors: tensor '" + name + "' has more than " + std::to_string(kMaxDims) + " dimensions");
  std::optional<uint64_t> bytes = dtype_size(dtype);
  for (int64_t d : shape) {
    if (d < 0) return invalid_argument("safetensors: tensor '" + name + "' has a negative dimension");
    if (bytes) bytes = checked_mul(*bytes, static_cast<uint64_t>(d));
  }
  const auto end = bytes ? checked_add(data_bytes_, *bytes) : std::nullopt;
  if (!end || *end > (1ull << 48)) return invalid_argument("safetensors: tensor '" + name + "' is too large");
  data_bytes_ = *end;
  tensors_.push_back({std::move(name), dtype, std::move(shape), *bytes, std::move(fill)});
  return Status::ok();
}

Status Writer::write(const std::string& path) const {
  json::Json header = json::Json::object();
  if (!metadata_.empty()) {
    json::Json md = json::Json::object();
    for (const auto& [k, v] : metadata_) md[k] = v;
    header["__metadata__"] = md;
  }
  uint64_t offset = 0;
  for (const Pending& t : tensors_) {
    header[t.name] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.nbytes}}};
    offset += t.nbytes;
  }
  // nlohmann sorts object keys; the offsets, not the key order, place the data.
  std::string text = header.dump(-1, ' ', false, json::Json::error_handler_t::replace);
  text.append((8 - text.size() % 8) % 8, ' ');
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return io_error(tmp + ": cannot create: " + std::strerror(errno));
  Status s;
  uint8_t length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));
  bool ok = std::fwrite(length, 1, 8, f) == 8 && std::fwrite(text.data(), 1, text.size(), f) == text.size();
  std::vector<uint8_t> buf;
  for (const Pending& t : tensors_) {
    if (!ok || !s.is_ok()) break;
    buf.assign(static_cast<size_t>(t.nbytes), 0);
    s = t.fill(buf);
    if (s.is_ok()) ok = std::fwrite(buf.data(), 1, buf.size(), f) == buf.size();
  }
  const bool closed = std::fclose(f) == 0;
  if (s.is_ok() && !(ok && closed)) s = io_error(tmp + ": write failed: " + std::strerror(errno));
  if (s.is_ok() && std::rename(tmp.c_str(), path.c_str()) != 0)
    s = io_error(path + ": cannot rename from " + tmp + ": " + std::strerror(errno));
  if (!s.is_ok()) std::remove(tmp.c_str());
  return s;
}

float element_as_f32(DType t, const uint8_t* p, int64_t i) noexcept {
  if (t == DType::f64) {
    double v;
    std::memcpy(&v, p + 8 * i, 8);
    return static_cast<float>(v);
  }
  if (t == DType::f32) {
    float v;
    std::memcpy(&v, p + 4 * i, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, p + 2 * i, 2);
  return t == DType::f16 ? f16_to_f32(h) : bf16_to_f32(h);
}

}  // namespace infer::safetensors
