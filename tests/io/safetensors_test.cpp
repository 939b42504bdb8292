// Reading valid .safetensors files: the checked-in fixtures and hand-built files.
#include "io/safetensors.h"

#include "io/io_test_util.h"

#include <nlohmann/json.hpp>

#include <cstring>

namespace huddle::io {
namespace {

using testing::expect_error;
using testing::safetensors_bytes;
using testing::TempDir;
using testing::write_file;

// A second, independent reading of a fixture: the header parsed straight from the file bytes.
struct RawFile {
  std::string bytes;
  nlohmann::json header;
  std::size_t data_start = 0;
};

RawFile read_raw(const std::filesystem::path& path) {
  RawFile raw;
  raw.bytes = testing::read_file(path);
  std::uint64_t n = 0;
  std::memcpy(&n, raw.bytes.data(), 8);  // the test machine is little-endian, as the format
  raw.header = nlohmann::json::parse(raw.bytes.substr(8, n));
  raw.data_start = 8 + n;
  return raw;
}

TEST(Safetensors, Gpt2TinyFixtureMatchesAnIndependentRead) {
  const auto path = testing::kFixtures / "models/gpt2-tiny/model.safetensors";
  const SafetensorsFile f = SafetensorsFile::open(path);
  EXPECT_EQ(f.entries().size(), 40u);  // fixtures README: 40 tensors
  EXPECT_TRUE(f.unsupported().empty());

  const SafetensorsEntry* wte = f.find("transformer.wte.weight");
  ASSERT_NE(wte, nullptr);
  EXPECT_EQ(wte->dtype, DType::F32);
  EXPECT_EQ(wte->shape, (Shape{512, 128}));

  const RawFile raw = read_raw(path);
  const auto& offsets = raw.header["transformer.wte.weight"]["data_offsets"];
  const std::size_t begin = raw.data_start + offsets[0].get<std::size_t>();
  const std::size_t end = raw.data_start + offsets[1].get<std::size_t>();
  ASSERT_EQ(end - begin, 512u * 128u * 4u);

  const Tensor t = f.view("transformer.wte.weight");
  ASSERT_EQ(t.shape(), (Shape{512, 128}));
  std::vector<float> expected((end - begin) / 4);
  std::memcpy(expected.data(), raw.bytes.data() + begin, end - begin);
  EXPECT_EQ(t.to_vector(), expected);

  // Every entry agrees with the raw header.
  std::size_t tensors_in_header = 0;
  for (const auto& [name, value] : raw.header.items()) {
    if (name == "__metadata__") continue;
    ++tensors_in_header;
    const SafetensorsEntry* e = f.find(name);
    ASSERT_NE(e, nullptr) << name;
    EXPECT_EQ(e->shape, value["shape"].get<Shape>()) << name;
    EXPECT_EQ(e->offset, raw.data_start + value["data_offsets"][0].get<std::uint64_t>()) << name;
  }
  EXPECT_EQ(tensors_in_header, f.entries().size());
}

TEST(Safetensors, AllFixturesOpen) {
  // Tensor counts from tests/fixtures/README.md.
  for (const auto& [model, count] : {std::pair{"llama-tiny", 30u}, std::pair{"bert-tiny", 55u}}) {
    const SafetensorsFile f =
        SafetensorsFile::open(testing::kFixtures / "models" / model / "model.safetensors");
    EXPECT_EQ(f.entries().size(), count) << model;
    for (const SafetensorsEntry& e : f.entries()) EXPECT_EQ(e.dtype, DType::F32) << e.name;
  }
}

TEST(Safetensors, ViewBorrowsTheMappingAndOutlivesTheFile) {
  TempDir dir;
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"I32","shape":[],"data_offsets":[8,12]}})";
  std::string data(12, '\0');
  const float a[2] = {1.5f, -2.0f};
  const std::int32_t b = -7;
  std::memcpy(data.data(), a, 8);
  std::memcpy(data.data() + 8, &b, 4);
  // Pad the header so the data buffer starts 8-aligned, as real writers do.
  std::string padded = header + std::string((8 - header.size() % 8) % 8, ' ');
  write_file(dir / "x.safetensors", safetensors_bytes(padded, data));

  Tensor va, vb;
  {
    const SafetensorsFile f = SafetensorsFile::open(dir / "x.safetensors");
    EXPECT_EQ(f.metadata().at("format"), "pt");
    va = f.view("a");
    vb = f.view("b");
    EXPECT_TRUE(f.mapping()->contains(va.raw()));
    EXPECT_TRUE(f.mapping()->contains(vb.raw()));
  }
  EXPECT_EQ(va.to_vector(), (std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ(vb.rank(), 0);
  EXPECT_EQ(vb.numel(), 1);
  EXPECT_EQ(vb.i32()[0], -7);
}

TEST(Safetensors, UnalignedF32IsCopiedIntoAlignedStorage) {
  TempDir dir;
  // data_offsets [1, 9): the floats start one byte into an 8-aligned data buffer.
  std::string header = R"({"u":{"dtype":"F32","shape":[2],"data_offsets":[1,9]}})";
  header += std::string((8 - header.size() % 8) % 8, ' ');
  std::string data(9, '\0');
  const float u[2] = {3.25f, 4.5f};
  std::memcpy(data.data() + 1, u, 8);
  write_file(dir / "u.safetensors", safetensors_bytes(header, data));
  const SafetensorsFile f = SafetensorsFile::open(dir / "u.safetensors");
  const Tensor t = f.view("u");
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.raw()) % alignof(float), 0u);
  EXPECT_FALSE(f.mapping()->contains(t.raw()));
  EXPECT_EQ(t.to_vector(), (std::vector<float>{3.25f, 4.5f}));
}

TEST(Safetensors, EmptyTensorAndEmptyHeader) {
  TempDir dir;
  write_file(dir / "e.safetensors",
             safetensors_bytes(R"({"z":{"dtype":"F16","shape":[0,4],"data_offsets":[0,0]}})", ""));
  const SafetensorsFile f = SafetensorsFile::open(dir / "e.safetensors");
  ASSERT_NE(f.find("z"), nullptr);
  EXPECT_EQ(f.view("z").numel(), 0);
  EXPECT_EQ(f.view("z").shape(), (Shape{0, 4}));

  write_file(dir / "none.safetensors", safetensors_bytes("{}", ""));
  EXPECT_TRUE(SafetensorsFile::open(dir / "none.safetensors").entries().empty());
}

TEST(Safetensors, UnsupportedSpecDtypeIsListedButRefusedOnView) {
  TempDir dir;
  const auto path = dir / "fp8.safetensors";
  write_file(path, safetensors_bytes(R"({"q":{"dtype":"F8_E4M3","shape":[3],"data_offsets":[0,3]},)"
                                     R"("ids":{"dtype":"I64","shape":[2],"data_offsets":[3,19]}})",
                                     std::string(19, '\1')));
  const SafetensorsFile f = SafetensorsFile::open(path);
  EXPECT_TRUE(f.entries().empty());
  ASSERT_EQ(f.unsupported().size(), 2u);
  EXPECT_EQ(f.unsupported()[0].name, "ids");
  EXPECT_EQ(f.unsupported()[0].nbytes, 16u);
  EXPECT_EQ(f.find("q"), nullptr);
  expect_error([&] { f.view("q"); }, {path.string(), "'q'", "F8_E4M3"});
  expect_error([&] { f.view("ids"); }, {path.string(), "'ids'", "I64"});
  expect_error([&] { f.view("nope"); }, {path.string(), "'nope'"});
}

}  // namespace
}  // namespace huddle::io
