// GgufWriter -> GgufFile round trip: metadata of every value type, tensors of every dtype Huddle
// reads, the layout llama.cpp expects (alignment, innermost-first dims).
#include "io/gguf.h"
#include "core/quant.h"
#include "io/gguf_writer.h"

#include "io/gguf_test_bytes.h"
#include "io/io_test_util.h"

#include <cmath>
#include <cstring>

namespace huddle::io {
namespace {

using testing::TempDir;

TEST(Gguf, MetadataOfEveryTypeRoundTrips) {
  TempDir dir;
  GgufWriter w;
  w.set("general.architecture", GgufValue::string("llama"));
  w.set("a.u32", GgufValue::u32(4000000000u));
  w.set("a.i32", GgufValue::i32(-7));
  w.set("a.u64", GgufValue::u64(1ull << 40));
  w.set("a.f32", GgufValue::f32(1e-5f));
  w.set("a.bool", GgufValue::boolean(true));
  w.set("a.strings", GgufValue::string_array({"x", "", "y z"}));
  w.set("a.ints", GgufValue::array(GgufType::I32, {GgufValue::i32(3), GgufValue::i32(-1)}));
  w.set("a.nested", GgufValue::array(GgufType::Array, {GgufValue::string_array({"n"})}));
  w.write(dir / "m.gguf");

  const GgufFile f = GgufFile::open(dir / "m.gguf");
  EXPECT_EQ(f.layout().version, 3u);
  EXPECT_EQ(f.string("general.architecture"), "llama");
  EXPECT_EQ(f.integer("a.u32"), 4000000000ll);
  EXPECT_EQ(f.integer("a.i32"), -7);
  EXPECT_EQ(f.integer("a.u64"), 1ll << 40);
  EXPECT_EQ(f.number("a.f32"), static_cast<double>(1e-5f));
  EXPECT_EQ(f.boolean("a.bool"), true);
  EXPECT_EQ(f.string_array("a.strings"), (std::vector<std::string>{"x", "", "y z"}));
  EXPECT_EQ(f.integer_array("a.ints"), (std::vector<std::int64_t>{3, -1}));
  ASSERT_NE(f.find("a.nested"), nullptr);
  EXPECT_EQ(f.find("a.nested")->items.at(0).items.at(0).s, "n");
  EXPECT_EQ(f.find("absent"), nullptr);
  EXPECT_EQ(f.integer("absent"), std::nullopt);
  testing::expect_error([&] { f.string("absent"); }, {"m.gguf", "'absent' is missing"});
  testing::expect_error([&] { f.integer("a.strings"); }, {"'a.strings' is array of string"});
  testing::expect_error([&] { f.string("a.u32"); }, {"'a.u32' is u32, not a string"});
}

TEST(Gguf, TensorsOfEveryDtypeRoundTripWithTheirShapes) {
  TempDir dir;
  std::vector<float> values(3 * 64);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = std::sin(0.37f * i) * 2;
  GgufWriter w;
  for (DType dtype : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0}) {
    w.add_tensor(std::string("t.") + std::string(dtype_name(dtype)), dtype, {3, 64},
                 [&, dtype](std::span<std::byte> out) {
                   ASSERT_EQ(out.size(), dtype_bytes(dtype, 3 * 64));
                   for (int r = 0; r < 3; ++r) {
                     quantize_row(dtype, values.data() + r * 64,
                                  out.data() + r * dtype_bytes(dtype, 64), 64);
                   }
                 });
  }
  w.add_tensor("norm", DType::F32, {5}, [](std::span<std::byte> out) {
    const float v[5] = {1, 2, 3, 4, 5};
    std::memcpy(out.data(), v, sizeof v);
  });
  EXPECT_THROW(w.add_tensor("norm", DType::F32, {5}, {}), Error);
  EXPECT_THROW(w.add_tensor("bad", DType::Q8_0, {2, 33}, {}), Error);
  w.write(dir / "t.gguf");

  const GgufFile f = GgufFile::open(dir / "t.gguf");
  ASSERT_EQ(f.tensors().size(), 6u);
  for (const GgufTensorInfo& t : f.tensors()) {
    EXPECT_EQ(t.offset % 32, 0u) << t.name;
  }
  for (DType dtype : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0}) {
    const Tensor t = f.view(std::string("t.") + std::string(dtype_name(dtype)));
    EXPECT_EQ(t.dtype(), dtype);
    EXPECT_EQ(t.shape(), (Shape{3, 64}));
    std::vector<std::byte> expected(dtype_bytes(dtype, 3 * 64));
    for (int r = 0; r < 3; ++r) {
      quantize_row(dtype, values.data() + r * 64, expected.data() + r * dtype_bytes(dtype, 64), 64);
    }
    EXPECT_EQ(std::memcmp(t.raw(), expected.data(), expected.size()), 0) << dtype_name(dtype);
  }
  const Tensor norm = f.view("norm");
  EXPECT_EQ(norm.shape(), (Shape{5}));
  EXPECT_EQ(norm.f32()[4], 5.0f);
  testing::expect_error([&] { f.view("nope"); }, {"t.gguf", "no tensor named 'nope'"});
}

// The bytes llama.cpp reads: header fields, key/value encoding, dims innermost first, type ids,
// offsets relative to the 32-aligned data section.
TEST(Gguf, WriterLaysOutTheFileAsLlamaCppReadsIt) {
  TempDir dir;
  GgufWriter w;
  w.set("general.architecture", GgufValue::string("llama"));
  w.add_tensor("w", DType::Q8_0, {2, 32}, [](std::span<std::byte>) {});
  w.write(dir / "x.gguf");
  const std::string bytes = testing::read_file(dir / "x.gguf");
  using namespace testing;
  const std::string head = gguf_header(3, 1, 1) + kv_string("general.architecture", "llama") +
                           tensor_info("w", {32, 2}, 8, 0);
  ASSERT_EQ(bytes.substr(0, head.size()), head);
  EXPECT_EQ(bytes.size(), pad32(head).size() + 96);  // 2 rows x 34 bytes, padded to 32
}

}  // namespace
}  // namespace huddle::io
