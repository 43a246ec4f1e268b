#include <cerrno>
#include <cstdio>
#include <cstring>
#include <unordered_set>

#include "core/checked_math.hpp"
#include "core/status_macros.hpp"
#include "format/gguf.hpp"

namespace infer::gguf {
namespace {

class FileSink {
 public:
  explicit FileSink(std::FILE* f) : f_(f) {}
  void put(const void* p, size_t n) {
    if (ok_ && n && std::fwrite(p, 1, n, f_) != n) ok_ = false;
    written_ += n;
  }
  bool ok() const { return ok_; }
  uint64_t written() const { return written_; }

 private:
  std::FILE* f_;
  bool ok_ = true;
  uint64_t written_ = 0;
};

class MemorySink {
 public:
  explicit MemorySink(std::vector<uint8_t>& out) : out_(out) {}
  void put(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out_.insert(out_.end(), b, b + n);
  }
  bool ok() const { return true; }
  uint64_t written() const { return out_.size(); }

 private:
  std::vector<uint8_t>& out_;
};

template <class Sink, class T>
void put(Sink& s, T v) {
  s.put(&v, sizeof v);
}

template <class Sink>
void put_string(Sink& s, const std::string& str) {
  put<Sink, uint64_t>(s, str.size());
  s.put(str.data(), str.size());
}

template <class Sink>
void pad_to(Sink& s, uint64_t alignment) {
  static const uint8_t zeros[256] = {};
  uint64_t pad = (alignment - s.written() % alignment) % alignment;
  while (pad > 0) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(pad, sizeof zeros));
    s.put(zeros, n);
    pad -= n;
  }
}

// An array's stores must agree with its element type and count before it is written.
Status check_array(const Array& a, const std::string& key, int depth) {
  if (depth >= kMaxArrayDepth) return invalid_argument(key + ": arrays nested too deeply");
  const uint32_t size = value_type_size(a.elem_type);
  bool consistent;
  if (a.elem_type == ValueType::string) {
    consistent = a.strings.size() == a.count && a.packed.empty() && a.arrays.empty();
  } else if (a.elem_type == ValueType::array) {
    consistent = a.arrays.size() == a.count && a.packed.empty() && a.strings.empty();
  } else {
    consistent = static_cast<uint32_t>(a.elem_type) < kValueTypeCount && a.packed.size() == a.count * size &&
                 a.strings.empty() && a.arrays.empty();
  }
  if (!consistent) return invalid_argument(key + ": array contents do not match its element type and count");
  for (const auto& sub : a.arrays) INFER_RETURN_IF_ERROR(check_array(sub, key, depth + 1));
  return Status::ok();
}

template <class Sink>
void put_array(Sink& s, const Array& a) {
  put<Sink, uint32_t>(s, static_cast<uint32_t>(a.elem_type));
  put<Sink, uint64_t>(s, a.count);
  if (a.elem_type == ValueType::string) {
    for (const auto& str : a.strings) put_string(s, str);
  } else if (a.elem_type == ValueType::array) {
    for (const auto& sub : a.arrays) put_array(s, sub);
  } else {
    s.put(a.packed.data(), a.packed.size());
  }
}

template <class Sink>
void put_value(Sink& s, const Value& v) {
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>) put_string(s, x);
        else if constexpr (std::is_same_v<T, Array>) put_array(s, x);
        else if constexpr (std::is_same_v<T, bool>) put<Sink, uint8_t>(s, x ? 1 : 0);
        else put<Sink, T>(s, x);
      },
      v.storage());
}

}  // namespace

Result<Writer::PendingTensor> Writer::check_tensor(std::string name, DType dtype, std::span<const int64_t> shape) const {
  if (name.empty()) return invalid_argument("tensor name is empty");
  if (name.size() > kMaxTensorNameLength)
    return invalid_argument("tensor '" + name + "': name longer than " + std::to_string(kMaxTensorNameLength) + " bytes");
  for (const auto& t : tensors_)
    if (t.name == name) return invalid_argument("tensor '" + name + "' added twice");
  const DTypeTraits* traits = dtype_traits(dtype);
  if (!traits) return invalid_argument("tensor '" + name + "': unknown type");
  if (traits->internal) return invalid_argument("tensor '" + name + "': " + traits->name + " is not a GGUF tensor type");
  if (shape.empty() || shape.size() > static_cast<size_t>(kMaxDims))
    return invalid_argument("tensor '" + name + "': needs 1 to 4 dimensions");
  PendingTensor t{std::move(name), dtype, static_cast<int>(shape.size()), {1, 1, 1, 1}, 0, {}, {}};
  uint64_t numel = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 0) return invalid_argument("tensor '" + t.name + "': negative dimension");
    t.shape[d] = shape[d];
    auto p = checked_mul(numel, static_cast<uint64_t>(shape[d]));
    if (!p || *p > static_cast<uint64_t>(INT64_MAX)) return invalid_argument("tensor '" + t.name + "': too many elements");
    numel = *p;
  }
  if (t.shape[0] % traits->block_size != 0)
    return invalid_argument("tensor '" + t.name + "': row length " + std::to_string(t.shape[0]) +
                            " is not a multiple of " + traits->name + "'s block size " +
                            std::to_string(traits->block_size));
  auto nbytes = checked_mul(numel / traits->block_size, traits->block_bytes);
  if (!nbytes) return invalid_argument("tensor '" + t.name + "': byte size overflows");
  t.nbytes = *nbytes;
  return t;
}

Status Writer::add_tensor(std::string name, DType dtype, std::span<const int64_t> shape,
                          std::span<const uint8_t> data) {
  INFER_ASSIGN_OR_RETURN(PendingTensor t, check_tensor(std::move(name), dtype, shape));
  if (t.nbytes != data.size())
    return invalid_argument("tensor '" + t.name + "': " + std::to_string(data.size()) + " bytes of data, expected " +
                            std::to_string(t.nbytes));
  t.data = data;
  tensors_.push_back(std::move(t));
  return Status::ok();
}

Status Writer::add_tensor(std::string name, DType dtype, std::span<const int64_t> shape, Fill fill) {
  if (!fill) return invalid_argument("tensor '" + name + "': no fill function");
  INFER_ASSIGN_OR_RETURN(PendingTensor t, check_tensor(std::move(name), dtype, shape));
  t.fill = std::move(fill);
  tensors_.push_back(std::move(t));
  return Status::ok();
}

Result<uint64_t> Writer::alignment() const {
  const Value* a = metadata_.find(kAlignmentKey);
  if (!a) return uint64_t{kDefaultAlignment};
  const uint32_t* v = a->get_if<uint32_t>();
  if (!v || !is_power_of_two(*v)) return invalid_argument("general.alignment must be a u32 power of two");
  return uint64_t{*v};
}

template <class Sink>
Status Writer::emit(Sink& sink) const {
  INFER_ASSIGN_OR_RETURN(const uint64_t align, alignment());
  for (const auto& e : metadata_.entries()) {
    if (e.key.empty() || e.key.size() > kMaxKeyLength) return invalid_argument("metadata key '" + e.key + "': bad length");
    if (const Array* a = e.value.as_array()) INFER_RETURN_IF_ERROR(check_array(*a, e.key, 0));
  }
  put<Sink, uint32_t>(sink, kMagic);
  put<Sink, uint32_t>(sink, 3);
  put<Sink, uint64_t>(sink, tensors_.size());
  put<Sink, uint64_t>(sink, metadata_.size());
  for (const auto& e : metadata_.entries()) {
    put_string(sink, e.key);
    put<Sink, uint32_t>(sink, static_cast<uint32_t>(e.value.type()));
    put_value(sink, e.value);
  }
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    put_string(sink, t.name);
    put<Sink, uint32_t>(sink, static_cast<uint32_t>(t.n_dims));
    for (int d = 0; d < t.n_dims; ++d) put<Sink, uint64_t>(sink, static_cast<uint64_t>(t.shape[d]));
    put<Sink, uint32_t>(sink, static_cast<uint32_t>(t.dtype));
    put<Sink, uint64_t>(sink, offset);
    auto next = checked_align_up(offset + t.nbytes, align);
    if (!next) return invalid_argument("tensor data too large");
    offset = *next;
  }
  pad_to(sink, align);
  std::vector<uint8_t> filled;  // one produced tensor at a time, reused
  for (const auto& t : tensors_) {
    if (t.fill) {
      filled.resize(static_cast<size_t>(t.nbytes));
      INFER_RETURN_IF_ERROR(t.fill(filled));
      sink.put(filled.data(), filled.size());
    } else {
      sink.put(t.data.data(), t.data.size());
    }
    pad_to(sink, align);
  }
  return Status::ok();
}

Status Writer::write(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return io_error(tmp + ": cannot create: " + std::strerror(errno));
  std::setvbuf(f, nullptr, _IOFBF, 1 << 20);
  FileSink sink(f);
  Status s = emit(sink);
  const bool write_ok = sink.ok();
  const bool close_ok = std::fclose(f) == 0;
  if (s.is_ok() && !(write_ok && close_ok)) s = io_error(tmp + ": write failed: " + std::strerror(errno));
  if (s.is_ok() && std::rename(tmp.c_str(), path.c_str()) != 0)
    s = io_error(path + ": cannot rename from " + tmp + ": " + std::strerror(errno));
  if (!s.is_ok()) std::remove(tmp.c_str());
  return s;
}

Result<std::vector<uint8_t>> Writer::write_to_memory() const {
  std::vector<uint8_t> out;
  MemorySink sink(out);
  INFER_RETURN_IF_ERROR(emit(sink));
  return out;
}

}  // namespace infer::gguf
