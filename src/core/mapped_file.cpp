#include "core/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "core/log.hpp"

namespace infer {
namespace {

std::string errno_text(int err) { return std::strerror(err); }

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

bool no_mmap_requested() {
  const char* v = std::getenv("INFER_NO_MMAP");
  return v && *v && std::strcmp(v, "0") != 0;
}

Status read_all(int fd, uint8_t* dst, uint64_t size, const std::string& path) {
  uint64_t done = 0;
  while (done < size) {
    size_t chunk = static_cast<size_t>(std::min<uint64_t>(size - done, 1u << 30));
    ssize_t n = ::pread(fd, dst + done, chunk, static_cast<off_t>(done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error(path + ": read failed: " + errno_text(errno));
    }
    if (n == 0) return io_error(path + ": file shrank while being read");
    done += static_cast<uint64_t>(n);
  }
  return Status::ok();
}

}  // namespace

Result<MappedFile> MappedFile::open(const std::string& path, MapMode mode) {
  int raw = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (raw < 0) {
    int err = errno;
    if (err == ENOENT) return not_found(path + ": no such file");
    return io_error(path + ": cannot open: " + errno_text(err));
  }
  Fd fd(raw);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return io_error(path + ": cannot stat: " + errno_text(errno));
  if (!S_ISREG(st.st_mode)) return invalid_argument(path + ": not a regular file");

  MappedFile f;
  f.path_ = path;
  f.size_ = static_cast<uint64_t>(st.st_size);
  if (f.size_ == 0) return f;  // nothing to map; readers report the file as empty
  if (f.size_ > SIZE_MAX) return out_of_range(path + ": file too large for this address space");

  if (mode == MapMode::automatic && no_mmap_requested()) mode = MapMode::read;
  if (mode != MapMode::read) {
    void* p = ::mmap(nullptr, static_cast<size_t>(f.size_), PROT_READ, MAP_PRIVATE, fd.get(), 0);
    if (p != MAP_FAILED) {
      f.data_ = static_cast<const uint8_t*>(p);
      f.mapped_ = true;
      return f;
    }
    int err = errno;
    if (mode == MapMode::mmap_only) return io_error(path + ": mmap failed: " + errno_text(err));
    INFER_LOG_INFO("%s: mmap failed (%s), reading the file into memory", path.c_str(), errno_text(err).c_str());
  }
  auto buf = AlignedBuffer::allocate(static_cast<size_t>(f.size_));
  if (!buf.ok()) return buf.status().with_context(path);
  f.buffer_ = std::move(buf).value();
  Status s = read_all(fd.get(), f.buffer_.data(), f.size_, path);
  if (!s.is_ok()) return s;
  f.data_ = f.buffer_.data();
  return f;
}

Result<MappedFile> MappedFile::from_bytes(std::span<const uint8_t> bytes, std::string name) {
  MappedFile f;
  f.path_ = std::move(name);
  f.size_ = bytes.size();
  if (bytes.empty()) return f;
  auto buf = AlignedBuffer::allocate(bytes.size());
  if (!buf.ok()) return buf.status();
  f.buffer_ = std::move(buf).value();
  std::memcpy(f.buffer_.data(), bytes.data(), bytes.size());
  f.data_ = f.buffer_.data();
  return f;
}

MappedFile::MappedFile(MappedFile&& other) noexcept { *this = std::move(other); }

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapped_ = std::exchange(other.mapped_, false);
    buffer_ = std::move(other.buffer_);
    path_ = std::move(other.path_);
  }
  return *this;
}

MappedFile::~MappedFile() { release(); }

bool MappedFile::can_release(const void* p, uint64_t bytes) const noexcept {
  const auto* b = static_cast<const uint8_t*>(p);
  return mapped_ && b >= data_ && bytes <= size_ && static_cast<uint64_t>(b - data_) <= size_ - bytes;
}

void MappedFile::advise_unused(const void* p, uint64_t bytes) const noexcept {
  if (!can_release(p, bytes)) return;
  const auto* b = static_cast<const uint8_t*>(p);
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(b) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(b) + bytes) / page * page;
  // A private read-only file mapping: dropped pages are read back from the file, never lost.
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

void MappedFile::release() noexcept {
  if (mapped_ && data_) ::munmap(const_cast<uint8_t*>(data_), static_cast<size_t>(size_));
  data_ = nullptr;
  size_ = 0;
  mapped_ = false;
  buffer_ = AlignedBuffer();
}

}  // namespace infer
