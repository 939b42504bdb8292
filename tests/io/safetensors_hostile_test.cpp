// Hand-made broken .safetensors files: each must be refused with a LoadError naming the file and
// the tensor or field at fault.
#include "io/safetensors.h"

#include "io/io_test_util.h"

namespace huddle::io {
namespace {

using testing::expect_error;
using testing::safetensors_bytes;
using testing::TempDir;
using testing::u64_le;
using testing::write_file;

class SafetensorsHostile : public ::testing::Test {
 protected:
  // Writes `bytes` and expects open() to fail with a message holding the path and `parts`.
  void expect_refused(const std::string& bytes, std::initializer_list<std::string> parts) {
    write_file(path_, bytes);
    const std::string msg = expect_error([&] { SafetensorsFile::open(path_); }, parts);
    EXPECT_NE(msg.find(path_.string()), std::string::npos) << msg;
  }
  // A file whose header is `header` over a zeroed data buffer of `data_bytes`.
  void expect_header_refused(const std::string& header, std::size_t data_bytes,
                             std::initializer_list<std::string> parts) {
    expect_refused(safetensors_bytes(header, std::string(data_bytes, '\0')), parts);
  }

  TempDir dir_;
  std::filesystem::path path_ = dir_ / "bad.safetensors";
};

TEST_F(SafetensorsHostile, ShorterThanTheLengthPrefix) {
  expect_refused("", {"0 bytes", "shorter than the 8-byte"});
  expect_refused(std::string("\x05\x00\x00", 3), {"3 bytes"});
}

TEST_F(SafetensorsHostile, HeaderLengthPastTheEnd) {
  expect_refused(u64_le(100) + "{}", {"header length 100", "10-byte file"});
}

TEST_F(SafetensorsHostile, AbsurdHeaderLength) {
  expect_refused(u64_le(200'000'000) + "{}", {"header length 200000000", "limit"});
  expect_refused(u64_le(UINT64_MAX) + "{}", {"header length 18446744073709551615"});
}

TEST_F(SafetensorsHostile, MalformedJson) {
  expect_header_refused(R"({"a":{"dtype":"F32",)", 0, {"header", "malformed JSON"});
  expect_header_refused("\xff\xfe", 0, {"header", "malformed JSON"});
}

TEST_F(SafetensorsHostile, HeaderNotAnObject) {
  expect_header_refused("[1, 2]", 0, {"header must be a JSON object", "array"});
}

TEST_F(SafetensorsHostile, EntryNotAnObject) {
  expect_header_refused(R"({"w": 5})", 0, {"tensor 'w'", "must be an object"});
}

TEST_F(SafetensorsHostile, MissingFields) {
  expect_header_refused(R"({"w":{"shape":[1],"data_offsets":[0,4]}})", 4,
                        {"tensor 'w'", "\"dtype\""});
  expect_header_refused(R"({"w":{"dtype":"F32","data_offsets":[0,4]}})", 4,
                        {"tensor 'w'", "\"shape\""});
  expect_header_refused(R"({"w":{"dtype":"F32","shape":[1]}})", 4,
                        {"tensor 'w'", "\"data_offsets\""});
}

TEST_F(SafetensorsHostile, IllTypedFields) {
  expect_header_refused(R"({"w":{"dtype":32,"shape":[1],"data_offsets":[0,4]}})", 4,
                        {"tensor 'w'", "\"dtype\" must be a string"});
  expect_header_refused(R"({"w":{"dtype":"F32","shape":"1","data_offsets":[0,4]}})", 4,
                        {"tensor 'w'", "\"shape\" must be an array"});
  expect_header_refused(R"({"w":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}})", 4,
                        {"tensor 'w'", "shape dimension must be a non-negative integer"});
  expect_header_refused(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":["0",4]}})", 4,
                        {"tensor 'w'", "data_offsets begin must be a non-negative integer"});
  expect_header_refused(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":{"a":0}}})", 4,
                        {"tensor 'w'", "\"data_offsets\" must be [begin, end]"});
}

TEST_F(SafetensorsHostile, UnknownDtypeIsNamed) {
  expect_header_refused(R"({"w":{"dtype":"F33","shape":[1],"data_offsets":[0,4]}})", 4,
                        {"tensor 'w'", "unknown dtype \"F33\""});
}

TEST_F(SafetensorsHostile, NegativeDimension) {
  expect_header_refused(R"({"w":{"dtype":"F32","shape":[2,-3],"data_offsets":[0,24]}})", 24,
                        {"tensor 'w'", "shape dimension -3 is negative"});
}

TEST_F(SafetensorsHostile, OverflowingShape) {
  // 2^32 * 2^32 elements overflow int64; 2^31 * 2^31 elements fit, but not their 2^67 bits.
  expect_header_refused(
      R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", 4,
      {"tensor 'w'", "overflows"});
  expect_header_refused(
      R"({"w":{"dtype":"F32","shape":[2147483648,2147483648],"data_offsets":[0,4]}})", 4,
      {"tensor 'w'", "shape [2147483648, 2147483648] F32 overflows"});
  expect_header_refused(
      R"({"w":{"dtype":"F32","shape":[99999999999999999999],"data_offsets":[0,4]}})", 4,
      {"tensor 'w'", "shape dimension"});
}

TEST_F(SafetensorsHostile, DataOffsetsNotTwoOrderedIntegers) {
  expect_header_refused(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[4]}})", 8,
                        {"tensor 'w'", "[begin, end]"});
  expect_header_refused(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}})", 8,
                        {"tensor 'w'", "[begin, end]"});
  expect_header_refused(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", 8,
                        {"tensor 'w'", "end before begin"});
  expect_header_refused(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", 8,
                        {"tensor 'w'", "data_offsets begin -4 is negative"});
}

TEST_F(SafetensorsHostile, EndPastTheEndOfTheFile) {
  expect_header_refused(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 12,
                        {"tensor 'w'", "past the end of the 12-byte data buffer"});
  expect_header_refused(
      R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[18446744073709551612,18446744073709551615]}})",
      4, {"tensor 'w'", "past the end"});
}

TEST_F(SafetensorsHostile, ByteSizeDisagreesWithShape) {
  expect_header_refused(R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})", 24,
                        {"tensor 'w'", "shape [2, 3] F32 needs 24 bytes but data_offsets span 20"});
  expect_header_refused(R"({"w":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})", 2,
                        {"tensor 'w'", "not a whole number of bytes"});
}

TEST_F(SafetensorsHostile, OverlappingTensors) {
  expect_header_refused(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                        R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                        12, {"'a'", "'b'", "overlap"});
  // An unsupported-dtype tensor may not overlap either.
  expect_header_refused(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                        R"("ids":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})",
                        8, {"'a'", "'ids'", "overlap"});
}

TEST_F(SafetensorsHostile, DuplicateTensorNames) {
  expect_header_refused(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                        R"("w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                        8, {"header", "duplicate key 'w'"});
}

TEST_F(SafetensorsHostile, BadMetadata) {
  expect_header_refused(R"({"__metadata__":[1]})", 0, {"\"__metadata__\"", "object"});
  expect_header_refused(R"({"__metadata__":{"format":1}})", 0,
                        {"\"__metadata__\" field 'format'", "must be a string"});
}

// `depth` arrays nested inside one another: [[[...]]].
std::string nested_arrays(std::size_t depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

// Before the bound, a value nested this deep crashed the loader: printing it into an error
// message (json::dump, which recurses) overflowed the stack.
TEST_F(SafetensorsHostile, DeeplyNestedHeaderIsRefusedNamingTheFile) {
  const std::string deep = nested_arrays(1'000'000);
  expect_header_refused(R"({"w":{"dtype":)" + deep + R"(,"shape":[1],"data_offsets":[0,4]}})", 4,
                        {"header", "nested deeper than 64"});
  expect_header_refused(R"({"__metadata__":{"format":)" + deep + "}}", 0,
                        {"header", "nested deeper than 64"});
  expect_header_refused(deep, 0, {"header", "nested deeper than 64"});
  // Within the bound, nesting is only a type error.
  expect_header_refused(R"({"w":{"dtype":)" + nested_arrays(60) + "}}", 0,
                        {"tensor 'w'", "\"dtype\" must be a string"});
}

}  // namespace
}  // namespace huddle::io
