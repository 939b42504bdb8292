#include "net/key.h"

#include "core/error.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

namespace huddle::net {
namespace {

namespace fs = std::filesystem;

class KeyFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("huddle_key_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path write(const std::string& name, const std::string& text, mode_t mode = 0600) {
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << text;
    ::chmod(p.c_str(), mode);
    return p;
  }

  fs::path dir_;
};

constexpr const char* kHex = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

TEST(PresharedKey, HexRoundTrip) {
  const PresharedKey k = PresharedKey::from_hex(kHex, "test");
  EXPECT_EQ(k.bytes()[0], 0x00);
  EXPECT_EQ(k.bytes()[31], 0x1f);
  EXPECT_EQ(k.to_hex(), kHex);
  EXPECT_EQ(PresharedKey::from_hex(std::string(kHex) + "\n", "test").to_hex(), kHex);
  EXPECT_EQ(PresharedKey::from_hex(std::string(kHex) + "\r\n", "test").to_hex(), kHex);
}

TEST(PresharedKey, RejectsMalformedHex) {
  EXPECT_THROW(PresharedKey::from_hex(std::string(kHex).substr(1), "k"), LoadError);
  EXPECT_THROW(PresharedKey::from_hex(std::string(kHex) + "0", "k"), LoadError);
  EXPECT_THROW(PresharedKey::from_hex(std::string(kHex) + "\n\n", "k"), LoadError);
  std::string bad = kHex;
  bad[10] = 'g';
  try {
    PresharedKey::from_hex(bad, "file /x/y");
    FAIL() << "accepted a non-hex key";
  } catch (const LoadError& e) {
    EXPECT_NE(std::string(e.what()).find("/x/y"), std::string::npos) << e.what();
  }
}

TEST(PresharedKey, RandomKeysDifferAndFingerprintIsStable) {
  const PresharedKey a = PresharedKey::random();
  const PresharedKey b = PresharedKey::random();
  EXPECT_NE(a.to_hex(), b.to_hex());
  EXPECT_EQ(a.fingerprint(), PresharedKey::from_hex(a.to_hex(), "copy").fingerprint());
  EXPECT_NE(a.fingerprint(), b.fingerprint());
  EXPECT_EQ(a.fingerprint().size(), 8u);
}

TEST_F(KeyFileTest, GenerateWritesOwnerOnlyFileThatLoads) {
  const fs::path p = dir_ / "cluster.key";
  const PresharedKey k = generate_key_file(p);
  struct stat st {};
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(load_key_file(p).to_hex(), k.to_hex());
  EXPECT_THROW(generate_key_file(p), LoadError);  // never overwrites
}

TEST_F(KeyFileTest, LoadRejectsBadFiles) {
  EXPECT_THROW(load_key_file(dir_ / "missing.key"), LoadError);
  EXPECT_THROW(load_key_file(write("short.key", "abcd")), LoadError);
  EXPECT_THROW(load_key_file(write("long.key", std::string(kHex) + kHex)), LoadError);
  EXPECT_THROW(load_key_file(dir_), LoadError);
  const fs::path open = write("open.key", kHex, 0644);
  try {
    load_key_file(open);
    FAIL() << "accepted a world-readable key file";
  } catch (const LoadError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(open.string()), std::string::npos) << msg;
    EXPECT_NE(msg.find("chmod 600"), std::string::npos) << msg;
  }
  EXPECT_EQ(load_key_file(write("ok.key", std::string(kHex) + "\n")).to_hex(), kHex);
}

}  // namespace
}  // namespace huddle::net
