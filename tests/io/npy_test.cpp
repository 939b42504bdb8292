#include "io/npy.h"

#include "io/io_test_util.h"

#include <cmath>
#include <cstring>

namespace huddle::io {
namespace {

using testing::expect_error;
using testing::TempDir;
using testing::write_file;

const std::filesystem::path kReferences = std::filesystem::path(HUDDLE_FIXTURES_DIR) / "references";

// An .npy file as NumPy writes it: magic, version 1.0, header padded to 64 bytes, data.
std::string npy_bytes(const std::string& dict, const std::string& data) {
  std::string header = dict;
  header.append(63 - (10 + header.size()) % 64, ' ');
  header.push_back('\n');
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header + data;
}

TEST(Npy, ReadsTheReferenceFixtures) {
  // Shapes from tests/fixtures/README.md: logits [T, 512] for gpt2/llama, hidden [T, 128] bert.
  for (const auto& [file, rows, cols] :
       {std::tuple{"gpt2-tiny.16.npy", 16, 512}, std::tuple{"llama-tiny.64.npy", 64, 512},
        std::tuple{"bert-tiny.16.npy", 16, 128}}) {
    const auto path = kReferences / file;
    const Tensor t = read_npy(path);
    EXPECT_EQ(t.dtype(), DType::F32) << file;
    EXPECT_EQ(t.shape(), (Shape{rows, cols})) << file;
    // Independent read: the data is the file's last rows*cols*4 bytes.
    const std::string raw = testing::read_file(path);
    const std::size_t n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
    std::vector<float> expected(n);
    std::memcpy(expected.data(), raw.data() + raw.size() - 4 * n, 4 * n);
    EXPECT_EQ(t.to_vector(), expected) << file;
  }
}

TEST(Npy, RoundTripShapesAndDtypes) {
  TempDir dir;
  const auto path = dir / "a.npy";
  const Tensor m = Tensor::from_f32({2, 3}, std::vector<float>{1, -2, 3.5f, 4, 5, 6e-8f});
  write_npy(path, m);
  const Tensor back = read_npy(path);
  EXPECT_EQ(back.shape(), (Shape{2, 3}));
  EXPECT_EQ(back.to_vector(), m.to_vector());
  // NumPy pads the header to a multiple of 64 bytes: 128 for a 2-d shape, as in the fixtures
  // (tests/fixtures/references/*.npy have a 118-byte dict after the 10-byte prefix).
  EXPECT_EQ(std::filesystem::file_size(path), 128u + 24u);

  const std::string raw = testing::read_file(path);
  EXPECT_NE(raw.find("'shape': (2, 3)"), std::string::npos);

  write_npy(path, Tensor::from_f32({3}, std::vector<float>{7, 8, 9}));
  EXPECT_NE(testing::read_file(path).find("'shape': (3,)"), std::string::npos);
  EXPECT_EQ(read_npy(path).shape(), (Shape{3}));

  write_npy(path, Tensor::from_f32({}, std::vector<float>{2.5f}));
  EXPECT_NE(testing::read_file(path).find("'shape': ()"), std::string::npos);
  EXPECT_EQ(read_npy(path).rank(), 0);
  EXPECT_EQ(read_npy(path).to_vector(), (std::vector<float>{2.5f}));

  write_npy(path, Tensor::from_i32({2, 2}, std::vector<std::int32_t>{-1, 2, -3, 4}));
  const Tensor ints = read_npy(path);
  EXPECT_EQ(ints.dtype(), DType::I32);
  EXPECT_EQ(ints.i32()[2], -3);

  write_npy(path, Tensor::zeros(DType::F32, {0, 4}));
  EXPECT_EQ(read_npy(path).shape(), (Shape{0, 4}));
}

TEST(Npy, WritesStridedViews) {
  TempDir dir;
  const Tensor m =
      Tensor::from_f32({3, 4}, std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  write_npy(dir / "v.npy", m.cols(1, 3).rows(1, 3));
  const Tensor back = read_npy(dir / "v.npy");
  EXPECT_EQ(back.shape(), (Shape{2, 2}));
  EXPECT_EQ(back.to_vector(), (std::vector<float>{5, 6, 9, 10}));
}

TEST(Npy, ReadsVersion2Headers) {
  TempDir dir;
  std::string bytes = npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", "");
  // Version 2.0: a 4-byte header length. Rebuild the prefix around the same header.
  const std::string header = bytes.substr(10);
  std::string v2 = "\x93NUMPY";
  v2 += '\x02';
  v2 += '\x00';
  const std::uint32_t len = static_cast<std::uint32_t>(header.size());
  v2.append(reinterpret_cast<const char*>(&len), 4);
  const float one = 1.0f;
  v2 += header + std::string(reinterpret_cast<const char*>(&one), 4);
  write_file(dir / "v2.npy", v2);
  EXPECT_EQ(read_npy(dir / "v2.npy").to_vector(), (std::vector<float>{1.0f}));
}

class NpyHostile : public ::testing::Test {
 protected:
  void expect_refused(const std::string& bytes, std::initializer_list<std::string> parts) {
    write_file(path_, bytes);
    const std::string msg = expect_error([&] { read_npy(path_); }, parts);
    EXPECT_NE(msg.find(path_.string()), std::string::npos) << msg;
  }
  TempDir dir_;
  std::filesystem::path path_ = dir_ / "bad.npy";
};

TEST_F(NpyHostile, BadMagic) {
  expect_refused("PK\x03\x04 not numpy at all", {"bad magic"});
  expect_refused("", {"bad magic"});
}

TEST_F(NpyHostile, UnsupportedDtypeIsNamed) {
  expect_refused(
      npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", std::string(8, '\0')),
      {"unsupported dtype '<f8'"});
  expect_refused(
      npy_bytes("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", std::string(4, '\0')),
      {"'>f4'"});
}

TEST_F(NpyHostile, FortranOrder) {
  expect_refused(npy_bytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }",
                           std::string(16, '\0')),
                 {"fortran_order True"});
}

TEST_F(NpyHostile, DataSizeDisagreesWithShape) {
  expect_refused(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
                           std::string(20, '\0')),
                 {"shape [2, 3] <f4 needs 24 bytes", "holds 20"});
  expect_refused(
      npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", std::string(8, '\0')),
      {"needs 4 bytes", "holds 8"});
  expect_refused(npy_bytes("{'descr': '<f4', 'fortran_order': False, "
                           "'shape': (4294967296, 4294967296), }",
                           ""),
                 {"overflows"});
}

TEST_F(NpyHostile, MalformedHeader) {
  expect_refused(npy_bytes("{'descr': '<f4', 'shape': (1,), }", std::string(4, '\0')),
                 {"malformed .npy header", "'fortran_order'"});
  expect_refused(npy_bytes("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (1,), }", ""),
                 {"malformed .npy header", "True or False"});
  expect_refused(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", ""),
                 {"malformed .npy header", "dimension"});
  expect_refused(npy_bytes("{'descr': '<f4, 'fortran_order': False, 'shape': (1,)", ""),
                 {"malformed .npy header"});
  const std::string prefix("\x93NUMPY\x01\x00", 8);
  expect_refused(prefix + std::string("\xff\x00{'descr'", 9),
                 {"header length 255 runs past the end"});
  expect_refused(prefix + "\x10", {"truncated"});
  expect_refused(std::string("\x93NUMPY\x07\x00\x10\x00", 10), {"unsupported .npy version 7.0"});
}

}  // namespace
}  // namespace huddle::io
