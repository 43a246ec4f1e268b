#include "format/imatrix_file.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/mapped_file.hpp"
#include "core/status_macros.hpp"
#include "format/gguf.hpp"

namespace infer {
namespace {

constexpr const char* kDatasets = "imatrix.datasets";
constexpr const char* kChunkCount = "imatrix.chunk_count";
constexpr const char* kChunkSize = "imatrix.chunk_size";

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Result<Imatrix> read_gguf(const std::string& path) {
  auto opened = gguf::read_file(path);
  if (!opened.ok()) return opened.status();
  const ModelFile& f = opened.value();
  const Metadata& md = f.metadata();
  const Array* datasets = md.get_array(kDatasets);
  const auto chunk_count = md.get_integer(kChunkCount), chunk_size = md.get_integer(kChunkSize);
  if (!datasets || !chunk_count || !chunk_size)
    return malformed_file(path + ": not an importance matrix (missing " + kDatasets + ", " + kChunkCount + " or " + kChunkSize + ")");
  Imatrix m;
  if (datasets->elem_type == ValueType::string) m.datasets = datasets->strings;
  if (*chunk_count < 0 || *chunk_count > INT32_MAX || *chunk_size < 0 || *chunk_size > INT32_MAX)
    return malformed_file(path + ": imatrix chunk count or size out of range");
  m.chunk_count = static_cast<int32_t>(*chunk_count);
  m.chunk_size = static_cast<int32_t>(*chunk_size);
  struct Pair {
    const TensorInfo* sums = nullptr;
    const TensorInfo* counts = nullptr;
  };
  std::map<std::string, Pair> pairs;
  for (const TensorInfo& t : f.tensors()) {
    if (ends_with(t.name, ".in_sum2")) pairs[t.name.substr(0, t.name.size() - 8)].sums = &t;
    else if (ends_with(t.name, ".counts")) pairs[t.name.substr(0, t.name.size() - 7)].counts = &t;
  }
  if (pairs.empty()) return malformed_file(path + ": an importance matrix without entries");
  for (const auto& [name, p] : pairs) {
    if (!p.sums || !p.counts) return malformed_file(path + ": " + name + ": in_sum2 without counts or counts without in_sum2");
    if (p.sums->dtype != DType::f32 || p.counts->dtype != DType::f32)
      return malformed_file(path + ": " + name + ": in_sum2 and counts must be F32");
    const int64_t nval = p.sums->numel(), nmat = p.counts->numel();
    if (nmat < 1 || nval < 1 || nval % nmat != 0)
      return malformed_file(path + ": " + name + ": " + std::to_string(nval) + " sums do not split into " + std::to_string(nmat) +
                            " matrices");
    ImatrixEntry& e = m.entries[name];
    const auto* sums = static_cast<const float*>(p.sums->view.data);
    const auto* counts = static_cast<const float*>(p.counts->view.data);
    e.sums.assign(sums, sums + nval);
    e.counts.resize(static_cast<size_t>(nmat));
    for (int64_t j = 0; j < nmat; ++j) {
      if (!std::isfinite(counts[j]) || counts[j] < 0 || counts[j] > 9.0e18f)
        return malformed_file(path + ": " + name + ": count " + std::to_string(counts[j]) + " out of range");
      e.counts[static_cast<size_t>(j)] = std::lround(counts[j]);
    }
  }
  return m;
}

// A bounds-checked little-endian reader over the mapped legacy file.
class Cursor {
 public:
  Cursor(const uint8_t* p, uint64_t n, const std::string& path) : p_(p), n_(n), path_(path) {}
  bool at_end() const { return off_ == n_; }
  Status read(void* dst, uint64_t bytes, const char* what) {
    if (bytes > n_ - off_) return malformed_file(path_ + ": truncated at byte " + std::to_string(off_) + " reading " + what);
    std::memcpy(dst, p_ + off_, bytes);
    off_ += bytes;
    return Status::ok();
  }
  Result<int32_t> i32(const char* what) {
    int32_t v = 0;
    INFER_RETURN_IF_ERROR(read(&v, 4, what));
    return v;
  }
  uint64_t offset() const { return off_; }

 private:
  const uint8_t* p_;
  uint64_t n_;
  uint64_t off_ = 0;
  const std::string& path_;
};

Result<Imatrix> read_legacy(const std::string& path, const MappedFile& file) {
  Cursor c(file.data(), file.size(), path);
  INFER_ASSIGN_OR_RETURN(const int32_t n_entries, c.i32("the entry count"));
  if (n_entries < 1) return malformed_file(path + ": neither GGUF nor a legacy importance matrix (entry count " + std::to_string(n_entries) + ")");
  Imatrix m;
  m.legacy = true;
  for (int32_t i = 0; i < n_entries; ++i) {
    INFER_ASSIGN_OR_RETURN(const int32_t len, c.i32("an entry name length"));
    if (len < 1 || len > 4096) return malformed_file(path + ": entry " + std::to_string(i) + ": name length " + std::to_string(len));
    std::string name(static_cast<size_t>(len), '\0');
    INFER_RETURN_IF_ERROR(c.read(name.data(), static_cast<uint64_t>(len), "an entry name"));
    INFER_ASSIGN_OR_RETURN(const int32_t ncall, c.i32("ncall"));
    INFER_ASSIGN_OR_RETURN(const int32_t nval, c.i32("nval"));
    if (nval < 1 || static_cast<uint64_t>(nval) * 4 > file.size() - c.offset())
      return malformed_file(path + ": " + name + ": " + std::to_string(nval) + " values do not fit in the file");
    ImatrixEntry& e = m.entries[name];
    e.sums.resize(static_cast<size_t>(nval));
    INFER_RETURN_IF_ERROR(c.read(e.sums.data(), static_cast<uint64_t>(nval) * 4, "values"));
    e.counts.assign(1, ncall);
  }
  if (!c.at_end()) {
    INFER_ASSIGN_OR_RETURN(const int32_t chunks, c.i32("the chunk count"));
    m.chunk_count = chunks;
    if (!c.at_end()) {
      INFER_ASSIGN_OR_RETURN(const int32_t len, c.i32("the dataset name length"));
      if (len > 0) {
        if (static_cast<uint64_t>(len) > file.size() - c.offset()) return malformed_file(path + ": dataset name past the end");
        std::string dataset(static_cast<size_t>(len), '\0');
        INFER_RETURN_IF_ERROR(c.read(dataset.data(), static_cast<uint64_t>(len), "the dataset name"));
        m.datasets.push_back(dataset.c_str());  // up to a NUL, as llama.cpp reads it
      }
    }
  }
  return m;
}

}  // namespace

Result<Imatrix> read_imatrix(const std::string& path) {
  auto mapped = MappedFile::open(path);
  if (!mapped.ok()) return mapped.status();
  uint32_t magic = 0;
  if (mapped->size() >= 4) std::memcpy(&magic, mapped->data(), 4);
  if (magic == gguf::kMagic) return read_gguf(path);
  return read_legacy(path, *mapped);
}

Status write_imatrix_gguf(const Imatrix& m, const std::string& path) {
  if (m.legacy) return invalid_argument(path + ": an importance matrix read from a legacy file cannot be written as GGUF");
  gguf::Writer w;
  w.metadata().set("general.type", std::string("imatrix"));
  Array datasets;
  datasets.elem_type = ValueType::string;
  datasets.count = m.datasets.size();
  datasets.strings = m.datasets;
  w.metadata().set(kDatasets, std::move(datasets));
  w.metadata().set(kChunkCount, static_cast<uint32_t>(m.chunk_count));
  w.metadata().set(kChunkSize, static_cast<uint32_t>(m.chunk_size));
  std::vector<std::vector<float>> counts;  // the counts as F32, alive until the write
  counts.reserve(m.entries.size());
  for (const auto& [name, e] : m.entries) {
    if (e.sums.empty() || e.counts.empty() || e.sums.size() % e.counts.size() != 0)
      return invalid_argument(name + ": sums do not split into the matrices counted");
    const auto nmat = static_cast<int64_t>(e.counts.size());
    const auto cols = static_cast<int64_t>(e.sums.size()) / nmat;
    auto& c = counts.emplace_back();
    for (int64_t n : e.counts) c.push_back(static_cast<float>(n));
    // ggml writes the dimensions up to the last one above 1.
    const int64_t sums_shape[2] = {cols, nmat}, counts_shape[2] = {1, nmat};
    const size_t dims = nmat > 1 ? 2 : 1;
    INFER_RETURN_IF_ERROR(w.add_tensor(name + ".in_sum2", DType::f32, std::span(sums_shape, dims),
                                             std::span(reinterpret_cast<const uint8_t*>(e.sums.data()), e.sums.size() * 4)));
    INFER_RETURN_IF_ERROR(w.add_tensor(name + ".counts", DType::f32, std::span(counts_shape, dims),
                                             std::span(reinterpret_cast<const uint8_t*>(c.data()), c.size() * 4)));
  }
  return w.write(path);
}

Status write_imatrix_dat(const Imatrix& m, const std::string& path) {
  if (m.legacy) return invalid_argument(path + ": an importance matrix read from a legacy file cannot be written again");
  if (m.chunk_size <= 0) return invalid_argument(path + ": the legacy format needs the chunk size");
  std::vector<uint8_t> out;
  const auto put = [&out](const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out.insert(out.end(), b, b + n);
  };
  const auto put_i32 = [&put](int32_t v) { put(&v, 4); };
  std::vector<const std::string*> names;
  for (const auto& [name, e] : m.entries) {
    if (e.sums.empty() || e.counts.empty() || e.sums.size() % e.counts.size() != 0)
      return invalid_argument(name + ": sums do not split into the matrices counted");
    if (std::any_of(e.counts.begin(), e.counts.end(), [](int64_t c) { return c != 0; })) names.push_back(&name);
  }
  put_i32(static_cast<int32_t>(names.size()));
  for (const std::string* name : names) {
    const ImatrixEntry& e = m.entries.at(*name);
    put_i32(static_cast<int32_t>(name->size()));
    put(name->data(), name->size());
    const int64_t max_count = *std::max_element(e.counts.begin(), e.counts.end());
    const auto ncall = static_cast<int32_t>((max_count + (m.chunk_size - 1)) / m.chunk_size);
    put_i32(ncall);
    const auto nval = static_cast<int32_t>(e.sums.size());
    const auto nmat = static_cast<int32_t>(e.counts.size());
    put_i32(nval);
    for (int32_t i = 0; i < nval; ++i) {
      float count = static_cast<float>(e.counts[static_cast<size_t>(i / (nval / nmat))]);
      float value = e.sums[static_cast<size_t>(i)];
      if (count == 0.0f) value = count = 1.0f;  // a matrix that saw nothing: weight 1
      const float v = (value / count) * static_cast<float>(ncall);
      put(&v, 4);
    }
  }
  put_i32(m.chunk_count);
  const std::string dataset = m.datasets.empty() ? std::string() : m.datasets.back();
  put_i32(static_cast<int32_t>(dataset.size()));
  put(dataset.data(), dataset.size());

  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return io_error(tmp + ": " + std::strerror(errno));
  const bool ok = std::fwrite(out.data(), 1, out.size(), f) == out.size();
  if (std::fclose(f) != 0 || !ok) return io_error(tmp + ": write failed: " + std::strerror(errno));
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return io_error(path + ": cannot rename from " + tmp + ": " + std::strerror(errno));
  return Status::ok();
}

}  // namespace infer
