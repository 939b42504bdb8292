#include "model/weight_spill.h"

#include "core/dtype.h"
#include "io/mapped_file.h"

#include <cerrno>
#include <cstdlib>
#include <system_error>

#include <fcntl.h>
#include <unistd.h>

namespace huddle {
namespace {

constexpr std::uint64_t kAlign = 64;  // every tensor starts on a cache line, as the packers read

std::filesystem::path default_dir() {
  if (const char* tmp = std::getenv("TMPDIR"); tmp != nullptr && *tmp != '\0') return tmp;
  std::error_code ec;
  if (std::filesystem::is_directory("/var/tmp", ec)) return "/var/tmp";
  return std::filesystem::temp_directory_path(ec);
}

bool write_all(int fd, const std::byte* p, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

}  // namespace

WeightSpill::WeightSpill() : WeightSpill(default_dir()) {}

WeightSpill::WeightSpill(const std::filesystem::path& dir) : dir_(dir) {}

WeightSpill::~WeightSpill() {
  if (fd_ >= 0) ::close(fd_);
}

bool WeightSpill::open_file() {
  if (fd_ >= 0) return true;
  if (failed_) return false;
  std::string pattern = (dir_ / "huddle-weights-XXXXXX").string();
  fd_ = ::mkostemp(pattern.data(), O_CLOEXEC);
  if (fd_ < 0) {
    failed_ = true;
    return false;
  }
  // The name goes at once, so nothing is left behind however the process ends: the descriptor,
  // and then the mapping made through /proc/self/fd, keep the file.
  ::unlink(pattern.c_str());
  return true;
}

bool WeightSpill::add(const std::string& name, const Tensor& t) {
  if (!t.contiguous() || !open_file()) return false;
  const std::uint64_t offset = (size_ + kAlign - 1) / kAlign * kAlign;
  const std::vector<std::byte> pad(static_cast<std::size_t>(offset - size_));
  const auto* data = static_cast<const std::byte*>(t.raw());
  if (!write_all(fd_, pad.data(), pad.size()) || !write_all(fd_, data, t.nbytes())) {
    // The disk is full: what was written stays usable, nothing more is taken.
    failed_ = true;
    size_ = offset;  // the entries so far lie below this
    return false;
  }
  entries_.push_back({name, t.dtype(), t.shape(), offset});
  size_ = offset + t.nbytes();
  return true;
}

std::unordered_map<std::string, Tensor> WeightSpill::finish() {
  std::unordered_map<std::string, Tensor> out;
  if (entries_.empty()) return out;
  const std::shared_ptr<const io::MappedFile> mapping =
      io::MappedFile::open("/proc/self/fd/" + std::to_string(fd_));
  ::close(fd_);  // the mapping keeps the file
  fd_ = -1;
  for (const Entry& e : entries_) {
    auto* p = const_cast<std::byte*>(mapping->data() + e.offset);  // PROT_READ: writes fault
    out.emplace(e.name, Tensor::borrow(e.dtype, e.shape, p, mapping));
  }
  entries_.clear();
  return out;
}

}  // namespace huddle
