// Writes a file under a temporary name and renames it into place on commit(), so a crash or an
// exception never leaves a partial file under the real name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>

namespace huddle::io {

class AtomicFile {
 public:
  // Creates (truncates) `path` + ".tmp". Throws huddle::Error naming the path on failure.
  explicit AtomicFile(std::filesystem::path path);
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  // Without commit(): closes and removes the temporary file.
  ~AtomicFile();

  // Appends all of `bytes` (retrying short writes). Throws huddle::Error on failure.
  void write(std::span<const std::byte> bytes);
  std::uint64_t written() const { return written_; }
  // Flushes to disk, closes, and renames over `path`. Throws huddle::Error on failure.
  void commit();

  const std::filesystem::path& path() const { return path_; }
  const std::filesystem::path& temp_path() const { return temp_; }

 private:
  std::filesystem::path path_;
  std::filesystem::path temp_;
  int fd_ = -1;
  std::uint64_t written_ = 0;
};

}  // namespace huddle::io
