#include "io/mapped_file.h"

#include "io/io_test_util.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

namespace huddle::io {
namespace {

using testing::expect_error;
using testing::TempDir;
using testing::write_file;

TEST(MappedFile, MapsTheWholeFile) {
  TempDir dir;
  const std::string content = "hello, mapped world";
  write_file(dir / "a.bin", content);
  const auto f = MappedFile::open(dir / "a.bin");
  ASSERT_EQ(f->size(), content.size());
  EXPECT_EQ(std::memcmp(f->data(), content.data(), content.size()), 0);
  EXPECT_TRUE(f->contains(f->data() + 3));
  EXPECT_FALSE(f->contains(f->data() + f->size()));
  EXPECT_EQ(f->path(), dir / "a.bin");
  f->advise(Advice::WillNeed);  // a hint: must not change the bytes
  f->advise(Advice::Sequential, 5, 1000);
  EXPECT_EQ(std::memcmp(f->data(), content.data(), content.size()), 0);
}

TEST(MappedFile, OutlivesItsDirectoryEntry) {
  TempDir dir;
  write_file(dir / "gone.bin", "abc");
  const auto f = MappedFile::open(dir / "gone.bin");
  std::filesystem::remove(dir / "gone.bin");
  ASSERT_EQ(f->size(), 3u);
  EXPECT_EQ(static_cast<char>(f->data()[2]), 'c');
}

TEST(MappedFile, EmptyFileIsAnEmptySpan) {
  TempDir dir;
  write_file(dir / "empty", "");
  const auto f = MappedFile::open(dir / "empty");
  EXPECT_EQ(f->size(), 0u);
  EXPECT_TRUE(f->bytes().empty());
  EXPECT_FALSE(f->contains(f->data()));
  f->advise(Advice::DontNeed);
}

TEST(MappedFile, MissingFileNamesThePath) {
  TempDir dir;
  const auto path = dir / "no-such-file.safetensors";
  expect_error([&] { MappedFile::open(path); }, {path.string(), "No such file"});
}

TEST(MappedFile, DirectoryIsRefused) {
  TempDir dir;
  expect_error([&] { MappedFile::open(dir.path()); }, {dir.path().string(), "is a directory"});
}

TEST(MappedFile, FifoIsRefusedWithoutBlocking) {
  TempDir dir;
  const auto path = dir / "pipe";
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  expect_error([&] { MappedFile::open(path); }, {path.string(), "not a regular file"});
}

TEST(MappedFile, UnreadableFileNamesThePath) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads files regardless of permissions";
  TempDir dir;
  const auto path = dir / "secret.bin";
  write_file(path, "x");
  ASSERT_EQ(::chmod(path.c_str(), 0), 0);
  expect_error([&] { MappedFile::open(path); }, {path.string(), "Permission denied"});
}

}  // namespace
}  // namespace huddle::io
