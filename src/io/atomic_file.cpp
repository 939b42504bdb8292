#include "io/atomic_file.h"

#include "core/error.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace huddle::io {

namespace {

[[noreturn]] void fail(std::string_view what, const std::filesystem::path& path, int err) {
  throw Error(fmt::format("cannot {} '{}': {}", what, path.string(), std::strerror(err)));
}

}  // namespace

AtomicFile::AtomicFile(std::filesystem::path path)
    : path_(std::move(path)), temp_(path_.string() + ".tmp") {
  fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("create", temp_, errno);
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(temp_.c_str());
  }
}

void AtomicFile::write(std::span<const std::byte> bytes) {
  HUDDLE_CHECK(fd_ >= 0, "write after commit to '{}'", path_.string());
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write", temp_, errno);
    }
    bytes = bytes.subspan(static_cast<std::size_t>(n));
    written_ += static_cast<std::uint64_t>(n);
  }
}

void AtomicFile::commit() {
  HUDDLE_CHECK(fd_ >= 0, "second commit of '{}'", path_.string());
  if (::fsync(fd_) != 0) fail("flush", temp_, errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(temp_.c_str());
    fail("close", temp_, err);
  }
  if (std::rename(temp_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp_.c_str());
    fail("rename into place", path_, err);
  }
}

}  // namespace huddle::io
