// Hand-made broken GGUF files: each must be refused with a LoadError naming the file and the key,
// tensor or field at fault; none may crash or allocate what the file only claims.
#include "io/gguf.h"

#include "core/quant.h"
#include "io/gguf_test_bytes.h"
#include "io/io_test_util.h"

namespace huddle::io {
namespace {

using namespace testing;

class GgufHostile : public ::testing::Test {
 protected:
  void expect_refused(const std::string& bytes, std::initializer_list<std::string> parts) {
    write_file(path_, bytes);
    const std::string msg = expect_error([&] { GgufFile::open(path_); }, parts);
    EXPECT_NE(msg.find(path_.string()), std::string::npos) << msg;
  }
  // One metadata key, one F32 tensor 't' [2, 32] at `offset`, then `data_bytes` of data.
  static std::string one_tensor(std::uint32_t type = 0, std::uint64_t offset = 0,
                                std::size_t data_bytes = 256,
                                std::vector<std::uint64_t> ne = {32, 2}) {
    return pad32(gguf_header(3, 1, 1) + kv_string("general.architecture", "llama") +
                 tensor_info("t", ne, type, offset)) +
           std::string(data_bytes, '\0');
  }

  TempDir dir_;
  std::filesystem::path path_ = dir_ / "bad.gguf";
};

TEST_F(GgufHostile, TheValidBaseFileOpens) {
  write_file(path_, one_tensor());
  const GgufFile f = GgufFile::open(path_);
  EXPECT_EQ(f.view("t").shape(), (Shape{2, 32}));
}

TEST_F(GgufHostile, WrongMagic) {
  expect_refused("GGUX" + one_tensor().substr(4), {"not a GGUF file"});
  expect_refused("GG", {"not a GGUF file"});
  expect_refused("", {"not a GGUF file"});
}

TEST_F(GgufHostile, UnsupportedVersions) {
  for (std::uint32_t v : {1u, 99u, 0u}) {
    expect_refused(gguf_header(v, 0, 0), {fmt::format("version {}", v), "not supported"});
  }
}

TEST_F(GgufHostile, TruncatedHeader) {
  const std::string full = one_tensor();
  for (std::size_t n : {6, 20, 30, 50, 70, 90}) {
    expect_refused(full.substr(0, n), {"past the end"});
  }
}

TEST_F(GgufHostile, CountsThatOverflowTheFile) {
  expect_refused(gguf_header(3, 0, UINT64_MAX), {"metadata entries", "past the end"});
  expect_refused(gguf_header(3, 1ull << 60, 0), {"tensors", "past the end"});
}

TEST_F(GgufHostile, StringLengthPastTheEnd) {
  expect_refused(gguf_header(3, 0, 1) + le64(UINT64_MAX) + "key" + std::string(20, '\0'),
                 {"metadata entry #0", "past the end"});
  expect_refused(gguf_header(3, 0, 1) + gstr("k") + le32(8) + le64(1000) + "short",
                 {"metadata 'k'", "past the end"});
}

TEST_F(GgufHostile, UnknownAndMalformedValues) {
  expect_refused(gguf_header(3, 0, 1) + gstr("k") + le32(13) + le32(0),
                 {"metadata 'k'", "unknown value type 13"});
  expect_refused(gguf_header(3, 0, 1) + gstr("k") + le32(7) + std::string(1, '\x02'),
                 {"metadata 'k'", "bool stored as 2"});
  expect_refused(gguf_header(3, 0, 1) + gstr("k") + le32(9) + le32(77) + le64(0),
                 {"metadata 'k'", "unknown value type 77"});
}

TEST_F(GgufHostile, ArrayCountPastTheEnd) {
  expect_refused(gguf_header(3, 0, 1) + gstr("k") + le32(9) + le32(10) + le64(1ull << 61),
                 {"metadata 'k'", "claims 2305843009213693952 u64 items"});
  expect_refused(gguf_header(3, 0, 1) + gstr("k") + le32(9) + le32(8) + le64(3) + gstr("a"),
                 {"metadata 'k'", "past the end"});
}

TEST_F(GgufHostile, TooDeeplyNestedArray) {
  // array of array of array of u8: three levels.
  const std::string inner = le32(0) + le64(1) + std::string(1, '\x01');
  const std::string mid = le32(9) + le64(1) + inner;
  expect_refused(gguf_header(3, 0, 1) + gstr("k") + le32(9) + le32(9) + le64(1) + mid,
                 {"metadata 'k'", "nests arrays deeper"});
  // Claiming millions of nested arrays is bounded by the bytes left, before any recursion.
  expect_refused(gguf_header(3, 0, 1) + gstr("k") + le32(9) + le32(9) + le64(1ull << 40),
                 {"metadata 'k'", "claims"});
}

TEST_F(GgufHostile, DuplicateKeysAndTensors) {
  expect_refused(gguf_header(3, 0, 2) + kv_u32("a", 1) + kv_u32("a", 2),
                 {"metadata key 'a' appears twice"});
  expect_refused(
      pad32(gguf_header(3, 2, 0) + tensor_info("t", {32}, 0, 0) + tensor_info("t", {32}, 0, 128)) +
          std::string(256, '\0'),
      {"tensor 't' appears twice"});
}

TEST_F(GgufHostile, TensorOffsetPastTheEnd) {
  expect_refused(one_tensor(0, 1024), {"tensor 't'", "past the end of the file"});
  expect_refused(one_tensor(0, UINT64_MAX - 31), {"tensor 't'", "past the end of the file"});
}

TEST_F(GgufHostile, TensorOffsetNotAligned) {
  expect_refused(one_tensor(0, 4, 512), {"tensor 't'", "not a multiple of the alignment 32"});
}

TEST_F(GgufHostile, TruncatedData) {
  expect_refused(one_tensor(0, 0, 100), {"tensor 't'", "256 bytes", "past the end"});
}

TEST_F(GgufHostile, UnknownAndUnsupportedTensorTypes) {
  expect_refused(one_tensor(99), {"tensor 't'", "unknown type id 99"});
  expect_refused(one_tensor(11), {"tensor 't' has type Q3_K, which Huddle does not read"});
  expect_refused(one_tensor(3), {"type Q4_1"});
}

TEST_F(GgufHostile, BadShapes) {
  expect_refused(one_tensor(0, 0, 256, {1, 2, 3, 4, 5}), {"tensor 't'", "5 dimensions"});
  expect_refused(one_tensor(0, 0, 256, {}), {"tensor 't'", "0 dimensions"});
  expect_refused(one_tensor(0, 0, 256, {1ull << 32, 1ull << 32, 1ull << 32}),
                 {"tensor 't'", "overflows"});
  expect_refused(one_tensor(0, 0, 256, {1ull << 63}), {"tensor 't'", "not a valid size"});
  expect_refused(one_tensor(8, 0, 256, {33, 2}), {"tensor 't'", "Q8_0", "not whole blocks"});
  // k-quants are read in super-blocks of 256 (core/kquant.h).
  expect_refused(one_tensor(12),
                 {"tensor 't' is Q4_K with rows of 32 elements", "not whole blocks of 256"});
  expect_refused(one_tensor(14, 0, 256, {128, 4}), {"tensor 't' is Q6_K with rows of 128"});
}

TEST_F(GgufHostile, KQuantsAreSizedByTheirBlocks) {
  // Two rows of one Q4_K super-block (144 bytes each): 288 bytes, so 256 are too few.
  expect_refused(one_tensor(12, 0, 256, {256, 2}), {"tensor 't'", "288 bytes", "past the end"});
  write_file(path_, one_tensor(12, 0, 288, {256, 2}));
  {
    const GgufFile f = GgufFile::open(path_);
    const Tensor t = f.view("t");  // Q4_K kept as its blocks
    EXPECT_EQ(t.dtype(), DType::Q4_K);
    EXPECT_EQ(t.shape(), (Shape{2, 256}));
    for (float v : dequantize(t).to_vector()) EXPECT_EQ(v, 0.0f);  // zero scales: every value 0
  }
  // Q6_K (210 bytes a super-block) likewise.
  expect_refused(one_tensor(14, 0, 400, {256, 2}), {"tensor 't'", "420 bytes", "past the end"});
  write_file(path_, one_tensor(14, 0, 420, {256, 2}));
  const GgufFile f = GgufFile::open(path_);
  const Tensor t = f.view("t");
  EXPECT_EQ(t.dtype(), DType::Q6_K);
  EXPECT_EQ(t.shape(), (Shape{2, 256}));
  for (float v : dequantize(t).to_vector()) EXPECT_EQ(v, 0.0f);
}

TEST_F(GgufHostile, OverlappingTensors) {
  expect_refused(pad32(gguf_header(3, 2, 0) + tensor_info("a", {32, 2}, 0, 0) +
                       tensor_info("b", {32}, 0, 128)) +
                     std::string(512, '\0'),
                 {"tensors 'a' and 'b' overlap"});
}

TEST_F(GgufHostile, BadAlignment) {
  expect_refused(gguf_header(3, 0, 1) + kv_u32("general.alignment", 3),
                 {"general.alignment", "power of two"});
  expect_refused(gguf_header(3, 0, 1) + kv_string("general.alignment", "32"),
                 {"general.alignment", "power of two"});
}

}  // namespace
}  // namespace huddle::io
