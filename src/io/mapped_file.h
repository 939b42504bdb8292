// A whole file mapped read-only into memory.
//
// Contract: `MappedFile::open` maps the entire file with PROT_READ / MAP_PRIVATE and returns a
// shared handle; tensors that borrow bytes from the mapping hold the handle as their keepalive,
// so the mapping lives as long as the last view. The bytes are read-only: writing through a
// pointer into the mapping faults. A zero-length file is valid and maps to an empty span.
// If another process truncates the file while it is mapped, reading the lost pages raises
// SIGBUS; model files are expected to be immutable while Huddle runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>

namespace huddle::io {

enum class Advice {
  Normal,
  Sequential,  // read once front to back (checkpoint conversion, hashing)
  Random,      // touched out of order (a worker reading only its shards)
  WillNeed,    // prefetch now
  DontNeed,    // drop cached pages (after copying weights elsewhere)
};

class MappedFile {
 public:
  // Throws LoadError naming `path` when it is missing, unreadable, not a regular file, or
  // cannot be mapped.
  static std::shared_ptr<const MappedFile> open(const std::filesystem::path& path);

  // Only open() can make the tag, so only open() constructs (through make_shared).
  class Tag {
    friend class MappedFile;
    Tag() = default;
  };
  MappedFile(Tag, std::filesystem::path path, const std::byte* data, std::size_t size);
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const std::filesystem::path& path() const { return path_; }
  std::span<const std::byte> bytes() const { return {data_, size_}; }
  const std::byte* data() const { return data_; }  // null for an empty file
  std::size_t size() const { return size_; }
  bool contains(const void* p) const;

  // Best-effort madvise hint over [offset, offset + length), clamped to the file; errors are
  // ignored because a hint never changes results.
  void advise(Advice advice, std::size_t offset = 0, std::size_t length = SIZE_MAX) const noexcept;

 private:
  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

// Drops this process's resident pages of [p, p + n) where they lie in a live MappedFile: the
// bytes stay readable (a later read maps them again from the page cache), but stop counting in
// the process's resident memory. Memory outside every mapping (owned copies, weights received
// from a peer) is left alone. For weights an executor has copied into a form of its own.
void release_mapped_pages(const void* p, std::size_t n) noexcept;

// Whether `p` lies in a live MappedFile (a view of a file, not memory of the process's own).
bool in_mapped_file(const void* p) noexcept;

}  // namespace huddle::io
