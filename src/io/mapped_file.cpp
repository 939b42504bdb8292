#include "io/mapped_file.h"

#include "core/error.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

namespace huddle::io {

namespace {

// Closes a descriptor on every path out of open(); the mapping stays valid after close.
class FdGuard {
 public:
  explicit FdGuard(int fd) : fd_(fd) {}
  FdGuard(const FdGuard&) = delete;
  FdGuard& operator=(const FdGuard&) = delete;
  ~FdGuard() { ::close(fd_); }
  int get() const { return fd_; }

 private:
  int fd_;
};

int to_madvise(Advice advice) {
  switch (advice) {
    case Advice::Normal:
      return MADV_NORMAL;
    case Advice::Sequential:
      return MADV_SEQUENTIAL;
    case Advice::Random:
      return MADV_RANDOM;
    case Advice::WillNeed:
      return MADV_WILLNEED;
    case Advice::DontNeed:
      return MADV_DONTNEED;
  }
  return MADV_NORMAL;
}

// The live mappings, for release_mapped_pages. Never destroyed: a mapping held by a static object
// (a cache of loaded models) is unmapped during exit, possibly after function-local statics of
// this file would have been.
std::mutex& mappings_mutex() {
  static auto* m = new std::mutex;
  return *m;
}
std::vector<const MappedFile*>& live_mappings() {
  static auto* v = new std::vector<const MappedFile*>;
  return *v;
}

}  // namespace

MappedFile::MappedFile(Tag, std::filesystem::path path, const std::byte* data, std::size_t size)
    : path_(std::move(path)), data_(data), size_(size) {
  if (data_ == nullptr) return;
  const std::lock_guard lock(mappings_mutex());
  live_mappings().push_back(this);
}

MappedFile::~MappedFile() {
  if (data_ == nullptr) return;
  {
    const std::lock_guard lock(mappings_mutex());
    std::erase(live_mappings(), this);
  }
  ::munmap(const_cast<std::byte*>(data_), size_);
}

std::shared_ptr<const MappedFile> MappedFile::open(const std::filesystem::path& path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever; it has no
  // effect on regular files, and anything else is refused below.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    throw LoadError(fmt::format("cannot open '{}': {}", path.string(), std::strerror(err)));
  }
  FdGuard guard(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    throw LoadError(fmt::format("cannot stat '{}': {}", path.string(), std::strerror(err)));
  }
  if (S_ISDIR(st.st_mode)) {
    throw LoadError(fmt::format("'{}' is a directory, not a file", path.string()));
  }
  if (!S_ISREG(st.st_mode)) {
    throw LoadError(fmt::format("'{}' is not a regular file", path.string()));
  }
  const auto size = static_cast<std::size_t>(st.st_size);
  if (size == 0) {
    // mmap rejects length 0; an empty file is simply an empty span.
    return std::make_shared<const MappedFile>(Tag{}, path, nullptr, 0);
  }
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, guard.get(), 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    throw LoadError(
        fmt::format("cannot map '{}' ({} bytes): {}", path.string(), size, std::strerror(err)));
  }
  return std::make_shared<const MappedFile>(Tag{}, path, static_cast<const std::byte*>(p), size);
}

bool MappedFile::contains(const void* p) const {
  const auto* b = static_cast<const std::byte*>(p);
  return data_ != nullptr && b >= data_ && b < data_ + size_;
}

void MappedFile::advise(Advice advice, std::size_t offset, std::size_t length) const noexcept {
  if (data_ == nullptr || offset >= size_) return;
  length = std::min(length, size_ - offset);
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t begin = offset / page * page;  // madvise needs a page-aligned start
  ::madvise(const_cast<std::byte*>(data_) + begin, offset + length - begin, to_madvise(advice));
}

void release_mapped_pages(const void* p, std::size_t n) noexcept {
  const std::lock_guard lock(mappings_mutex());
  for (const MappedFile* m : live_mappings()) {
    if (m->contains(p)) {
      // MAP_PRIVATE and never written: MADV_DONTNEED drops our mapping of clean file pages only.
      m->advise(Advice::DontNeed,
                static_cast<std::size_t>(static_cast<const std::byte*>(p) - m->data()), n);
      return;
    }
  }
}

bool in_mapped_file(const void* p) noexcept {
  const std::lock_guard lock(mappings_mutex());
  for (const MappedFile* m : live_mappings()) {
    if (m->contains(p)) return true;
  }
  return false;
}

}  // namespace huddle::io
