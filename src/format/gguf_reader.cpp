// The GGUF reader. Hardened: the file is untrusted input (the 2024 GGUF heap-overflow CVEs came
// from counts and sizes used before they were checked). The rules kept here:
//   - every read goes through Cursor, which checks the remaining bytes first;
//   - a count is checked against the bytes its elements need at minimum *before* any allocation,
//     so memory stays within a small constant factor of the file size;
//   - products and sums of sizes use checked_math;
//   - errors name the problem, the item, and the byte offset.
#include <algorithm>
#include <cstring>
#include <unordered_set>

#include "core/checked_math.hpp"
#include "core/status_macros.hpp"
#include "format/gguf.hpp"

namespace infer::gguf {
namespace {

std::string quoted(std::string_view s) {
  // Names in messages: printable, bounded.
  std::string out = "'";
  for (char c : s.substr(0, 96)) out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  if (s.size() > 96) out += "...";
  return out + "'";
}

class Parser {
 public:
  explicit Parser(const MappedFile& f) : base_(f.data()), size_(f.size()), path_(f.path()) {}

  Result<ModelFile::Parts> parse(std::shared_ptr<const MappedFile> file);

 private:
  Status fail(std::string what) const {
    return malformed_file(path_ + ": at byte " + std::to_string(pos_) + ": " + what);
  }
  Status fail_at(uint64_t pos, std::string what) const {
    return malformed_file(path_ + ": at byte " + std::to_string(pos) + ": " + what);
  }
  uint64_t remaining() const { return size_ - pos_; }

  template <class T>
  bool read(T& out) {
    if (remaining() < sizeof(T)) return false;
    std::memcpy(&out, base_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  // Messages are built only on failure: arrays of 262k strings must not pay for them.
  static std::string name_of(const std::string& what, int64_t index) {
    return index < 0 ? what : what + "[" + std::to_string(index) + "]";
  }
  template <class T>
  Status read_or_fail(T& out, const char* field, const std::string& what, int64_t index = -1) {
    if (!read(out))
      return fail(std::string("file ends inside ") + field + (what.empty() ? "" : " of ") + name_of(what, index) +
                  " (needs " + std::to_string(sizeof(T)) + " bytes, " + std::to_string(remaining()) + " left)");
    return Status::ok();
  }
  Status read_string(std::string& out, const std::string& what, int64_t index = -1, uint64_t max_length = UINT64_MAX);
  Status read_value(ValueType type, Value& out, const std::string& what, int depth);
  Status read_array(Array& out, const std::string& what, int depth);

  const uint8_t* base_;
  uint64_t size_;
  uint64_t pos_ = 0;
  const std::string& path_;
};

Status Parser::read_string(std::string& out, const std::string& what, int64_t index, uint64_t max_length) {
  uint64_t length = 0;
  INFER_RETURN_IF_ERROR(read_or_fail(length, "the length", what, index));
  if (length > remaining())
    return fail(name_of(what, index) + ": string length " + std::to_string(length) +
                " runs past the end of the file (" + std::to_string(remaining()) + " bytes left)");
  if (length > max_length)
    return fail(name_of(what, index) + ": length " + std::to_string(length) + " exceeds the limit of " +
                std::to_string(max_length));
  out.assign(reinterpret_cast<const char*>(base_ + pos_), static_cast<size_t>(length));
  pos_ += length;
  return Status::ok();
}

Status Parser::read_array(Array& out, const std::string& what, int depth) {
  if (depth >= kMaxArrayDepth)
    return fail(what + ": arrays nested deeper than " + std::to_string(kMaxArrayDepth) + " levels");
  uint32_t raw_type = 0;
  INFER_RETURN_IF_ERROR(read_or_fail(raw_type, "the element type", what));
  if (raw_type >= kValueTypeCount)
    return fail_at(pos_ - 4, what + ": unknown array element type " + std::to_string(raw_type));
  const auto elem = static_cast<ValueType>(raw_type);
  uint64_t count = 0;
  INFER_RETURN_IF_ERROR(read_or_fail(count, "the element count", what));
  // Smallest encoding of one element: fixed size, a string's length, or a nested array's header.
  const uint64_t min_elem = elem == ValueType::string ? 8 : elem == ValueType::array ? 12 : value_type_size(elem);
  if (count > remaining() / min_elem)
    return fail_at(pos_ - 8, what + ": array of " + std::to_string(count) + " " + value_type_name(elem) +
                                 " elements cannot fit in the " + std::to_string(remaining()) +
                                 " bytes left in the file");
  out.elem_type = elem;
  out.count = count;
  if (elem == ValueType::string) {
    out.strings.resize(static_cast<size_t>(count));
    for (uint64_t i = 0; i < count; ++i)
      INFER_RETURN_IF_ERROR(read_string(out.strings[i], what, static_cast<int64_t>(i)));
  } else if (elem == ValueType::array) {
    out.arrays.resize(static_cast<size_t>(count));
    for (uint64_t i = 0; i < count; ++i)
      INFER_RETURN_IF_ERROR(read_array(out.arrays[i], what + "[" + std::to_string(i) + "]", depth + 1));
  } else {
    const uint64_t bytes = count * min_elem;  // cannot overflow: count <= remaining / min_elem
    out.packed.assign(base_ + pos_, base_ + pos_ + bytes);
    pos_ += bytes;
  }
  return Status::ok();
}

Status Parser::read_value(ValueType type, Value& out, const std::string& what, int depth) {
  switch (type) {
#define INFER_GGUF_SCALAR(TAG, T)                        \
  case ValueType::TAG: {                                 \
    T v{};                                               \
    INFER_RETURN_IF_ERROR(read_or_fail(v, "the value", what));   \
    out = Value(v);                                      \
    return Status::ok();                                 \
  }
    INFER_GGUF_SCALAR(u8, uint8_t)
    INFER_GGUF_SCALAR(i8, int8_t)
    INFER_GGUF_SCALAR(u16, uint16_t)
    INFER_GGUF_SCALAR(i16, int16_t)
    INFER_GGUF_SCALAR(u32, uint32_t)
    INFER_GGUF_SCALAR(i32, int32_t)
    INFER_GGUF_SCALAR(f32, float)
    INFER_GGUF_SCALAR(u64, uint64_t)
    INFER_GGUF_SCALAR(i64, int64_t)
    INFER_GGUF_SCALAR(f64, double)
#undef INFER_GGUF_SCALAR
    case ValueType::boolean: {
      uint8_t v = 0;
      INFER_RETURN_IF_ERROR(read_or_fail(v, "the value", what));
      out = Value(v != 0);
      return Status::ok();
    }
    case ValueType::string: {
      std::string s;
      INFER_RETURN_IF_ERROR(read_string(s, what + " value"));
      out = Value(std::move(s));
      return Status::ok();
    }
    case ValueType::array: {
      Array a;
      INFER_RETURN_IF_ERROR(read_array(a, what, depth));
      out = Value(std::move(a));
      return Status::ok();
    }
  }
  return fail(what + ": unknown value type");
}

Result<ModelFile::Parts> Parser::parse(std::shared_ptr<const MappedFile> file) {
  ModelFile::Parts parts;
  if (size_ < 4) return malformed_file(path_ + ": file is too small to be GGUF (" + std::to_string(size_) + " bytes)");
  uint32_t magic = 0;
  read(magic);
  if (magic != kMagic) {
    if (std::memcmp(base_, "FUGG", 4) == 0) return unsupported(path_ + ": big-endian GGUF files are not supported");
    return malformed_file(path_ + ": not a GGUF file (the first four bytes are not \"GGUF\")");
  }
  uint32_t version = 0;
  INFER_RETURN_IF_ERROR(read_or_fail(version, "the header (version)", ""));
  if (version == 1) return unsupported(path_ + ": GGUF version 1 is not supported (versions 2 and 3 are)");
  if (version == 0x02000000u || version == 0x03000000u)
    return unsupported(path_ + ": big-endian GGUF files are not supported");
  if (version != 2 && version != 3)
    return unsupported(path_ + ": unsupported GGUF version " + std::to_string(version) + " (versions 2 and 3 are)");
  parts.version = version;

  uint64_t n_tensors = 0, n_kv = 0;
  INFER_RETURN_IF_ERROR(read_or_fail(n_tensors, "the header (tensor count)", ""));
  INFER_RETURN_IF_ERROR(read_or_fail(n_kv, "the header (metadata count)", ""));
  // Minimum encodings: key/value = 8 (key length) + 4 (type) + 1 (u8 value);
  // tensor info = 8 (name length) + 4 (n_dims) + 4 (type) + 8 (offset).
  if (n_kv > remaining() / 13)
    return fail_at(16, std::to_string(n_kv) + " metadata entries cannot fit in a file of " + std::to_string(size_) + " bytes");
  if (n_tensors > remaining() / 24)
    return fail_at(8, std::to_string(n_tensors) + " tensors cannot fit in a file of " + std::to_string(size_) + " bytes");

  // Metadata.
  for (uint64_t i = 0; i < n_kv; ++i) {
    const uint64_t entry_pos = pos_;
    std::string key;
    INFER_RETURN_IF_ERROR(read_string(key, "metadata key #" + std::to_string(i), -1, kMaxKeyLength));
    if (key.empty()) return fail_at(entry_pos, "metadata key #" + std::to_string(i) + " is empty");
    const std::string what = "metadata key " + quoted(key);
    uint32_t raw_type = 0;
    INFER_RETURN_IF_ERROR(read_or_fail(raw_type, "the value type", what));
    if (raw_type >= kValueTypeCount)
      return fail_at(pos_ - 4, what + ": unknown value type " + std::to_string(raw_type));
    Value value;
    INFER_RETURN_IF_ERROR(read_value(static_cast<ValueType>(raw_type), value, what, 0));
    if (parts.metadata.contains(key)) return fail_at(entry_pos, "duplicate metadata key " + quoted(key));
    parts.metadata.insert(std::move(key), std::move(value));
  }

  // Alignment.
  parts.alignment = kDefaultAlignment;
  if (const Value* a = parts.metadata.find(kAlignmentKey)) {
    const uint32_t* v = a->get_if<uint32_t>();
    if (!v) return malformed_file(path_ + ": general.alignment must be a u32, found " + value_type_name(a->type()));
    if (!is_power_of_two(*v))
      return malformed_file(path_ + ": general.alignment " + std::to_string(*v) + " is not a power of two");
    parts.alignment = *v;
  }

  // Tensor infos.
  parts.tensors.resize(static_cast<size_t>(n_tensors));
  std::unordered_set<std::string_view> names;
  names.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    TensorInfo& t = parts.tensors[i];
    const uint64_t info_pos = pos_;
    const std::string idx = "tensor #" + std::to_string(i);
    INFER_RETURN_IF_ERROR(read_string(t.name, "the name of " + idx));
    if (t.name.empty()) return fail_at(info_pos, idx + " has an empty name");
    if (t.name.size() > kMaxTensorNameLength)
      return fail_at(info_pos, idx + ": name " + quoted(t.name) + " is longer than " +
                                   std::to_string(kMaxTensorNameLength) + " bytes");
    const std::string what = "tensor " + quoted(t.name);
    uint32_t n_dims = 0;
    INFER_RETURN_IF_ERROR(read_or_fail(n_dims, "the dimension count", what));
    if (n_dims > static_cast<uint32_t>(kMaxDims))
      return fail_at(pos_ - 4, what + ": " + std::to_string(n_dims) + " dimensions (at most " +
                                   std::to_string(kMaxDims) + ")");
    t.n_dims = static_cast<int>(n_dims);
    uint64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t dim = 0;
      INFER_RETURN_IF_ERROR(read_or_fail(dim, "the dimensions", what));
      if (dim > static_cast<uint64_t>(INT64_MAX))
        return fail_at(pos_ - 8, what + ": dimension " + std::to_string(d) + " is negative or too large (" +
                                     std::to_string(dim) + ")");
      // Zero dimensions are skipped in the check so that no partial product (rows, strides)
      // can overflow even when the element count is zero.
      auto product = checked_mul(numel, std::max<uint64_t>(dim, 1));
      if (!product || *product > static_cast<uint64_t>(INT64_MAX))
        return fail_at(pos_ - 8, what + ": the product of its dimensions overflows");
      numel = *product;
      t.shape[d] = static_cast<int64_t>(dim);
    }
    uint32_t raw_dtype = 0;
    INFER_RETURN_IF_ERROR(read_or_fail(raw_dtype, "the type", what));
    const DTypeTraits* traits = dtype_traits(raw_dtype);
    if (!traits || traits->internal) return fail_at(pos_ - 4, what + ": unknown tensor type " + std::to_string(raw_dtype));
    t.dtype = traits->type;
    if (t.shape[0] % traits->block_size != 0)
      return fail_at(info_pos, what + ": row length " + std::to_string(t.shape[0]) + " is not a multiple of " +
                                   traits->name + "'s block size " + std::to_string(traits->block_size));
    uint64_t elements = 1;
    for (int d = 0; d < t.n_dims; ++d) elements *= static_cast<uint64_t>(t.shape[d]);  // <= numel
    auto nbytes = checked_mul(elements / traits->block_size, traits->block_bytes);
    if (!nbytes) return fail_at(info_pos, what + ": byte size overflows");
    t.nbytes = *nbytes;
    INFER_RETURN_IF_ERROR(read_or_fail(t.offset, "the data offset", what));
    if (t.offset % parts.alignment != 0)
      return fail_at(pos_ - 8, what + ": data offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
                                   std::to_string(parts.alignment));
    if (!names.insert(t.name).second) return fail_at(info_pos, "duplicate tensor name " + quoted(t.name));
  }

  // Data section.
  auto data_offset = checked_align_up(pos_, parts.alignment);
  if (!data_offset) return fail("data section offset overflows");
  parts.data_offset = *data_offset;
  const uint64_t data_size = parts.data_offset <= size_ ? size_ - parts.data_offset : 0;
  if (n_tensors > 0 && parts.data_offset > size_)
    return malformed_file(path_ + ": the file ends at byte " + std::to_string(size_) +
                          " before its data section starts at byte " + std::to_string(parts.data_offset));

  std::vector<size_t> order(parts.tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return parts.tensors[a].offset < parts.tensors[b].offset; });
  const TensorInfo* previous = nullptr;
  for (size_t i : order) {
    TensorInfo& t = parts.tensors[i];
    auto end = checked_add(t.offset, t.nbytes);
    if (!end || *end > data_size)
      return malformed_file(path_ + ": tensor " + quoted(t.name) + ": data at offset " + std::to_string(t.offset) +
                            " + " + std::to_string(t.nbytes) + " bytes runs past the end of the data section (" +
                            std::to_string(data_size) + " bytes; the file is truncated or the offset is wrong)");
    if (previous && t.nbytes > 0 && previous->offset + previous->nbytes > t.offset)
      return malformed_file(path_ + ": tensors " + quoted(previous->name) + " and " + quoted(t.name) +
                            " overlap in the data section (offsets " + std::to_string(previous->offset) + " + " +
                            std::to_string(previous->nbytes) + " bytes and " + std::to_string(t.offset) + ")");
    if (t.nbytes > 0) previous = &t;
    t.view = TensorView::contiguous(t.dtype, t.n_dims, t.shape,
                                    const_cast<uint8_t*>(base_ + parts.data_offset + t.offset));
  }
  parts.file = std::move(file);
  return parts;
}

}  // namespace

Result<ModelFile> read(MappedFile file) {
  auto shared = std::make_shared<const MappedFile>(std::move(file));
  Parser parser(*shared);
  auto parts = parser.parse(shared);
  if (!parts.ok()) return parts.status();
  return ModelFile(std::move(parts).value());
}

Result<ModelFile> read_file(const std::string& path, MapMode mode) {
  auto file = MappedFile::open(path, mode);
  if (!file.ok()) return file.status();
  return read(std::move(file).value());
}

}  // namespace infer::gguf
