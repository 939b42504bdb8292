// Writing .safetensors files and reading them back.
#include "io/safetensors_writer.h"

#include "io/io_test_util.h"
#include "io/safetensors.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>

namespace huddle::io {
namespace {

using testing::TempDir;

// Values exactly representable in F16 and BF16 (at most 8 significant bits, small exponents),
// so a round trip through either must return them unchanged.
const std::vector<float> kExact = {0.0f, 1.0f, -2.5f, 0.375f, 96.0f, -0.0078125f};

TEST(SafetensorsWriter, RoundTripF32F16Bf16) {
  TempDir dir;
  const Tensor t = Tensor::from_f32({2, 3}, kExact);
  for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
    const auto path = dir / "rt.safetensors";
    write_safetensors(path, {{"t", t}}, {{"format", "pt"}}, dtype);
    const SafetensorsFile f = SafetensorsFile::open(path);
    ASSERT_EQ(f.entries().size(), 1u);
    EXPECT_EQ(f.entries()[0].dtype, dtype);
    EXPECT_EQ(f.entries()[0].shape, (Shape{2, 3}));
    EXPECT_EQ(f.entries()[0].nbytes, 6 * dtype_size(dtype));
    EXPECT_EQ(f.metadata().at("format"), "pt");
    const Tensor back = f.view("t");
    for (std::int64_t i = 0; i < 6; ++i) {
      std::uint16_t h = 0;
      float v = 0;
      if (dtype == DType::F32) {
        v = back.f32()[i];
      } else {
        std::memcpy(&h, static_cast<const std::byte*>(back.raw()) + 2 * i, 2);
        v = dtype == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
      }
      EXPECT_EQ(v, kExact[static_cast<std::size_t>(i)]) << dtype_name(dtype) << " element " << i;
    }
  }
}

TEST(SafetensorsWriter, HalfPrecisionBitPatterns) {
  // 1.0 is 0x3C00 in IEEE binary16 and 0x3F80 in bfloat16 (the top half of 0x3F800000).
  TempDir dir;
  const Tensor one = Tensor::from_f32({1}, std::vector<float>{1.0f});
  write_safetensors(dir / "h.safetensors", {{"f16", one}}, {}, DType::F16);
  write_safetensors(dir / "b.safetensors", {{"bf16", one}}, {}, DType::BF16);
  const auto bits = [](const SafetensorsFile& f, const std::string& name) {
    std::uint16_t h = 0;
    std::memcpy(&h, f.bytes(*f.find(name)).data(), 2);
    return h;
  };
  EXPECT_EQ(bits(SafetensorsFile::open(dir / "h.safetensors"), "f16"), 0x3C00);
  EXPECT_EQ(bits(SafetensorsFile::open(dir / "b.safetensors"), "bf16"), 0x3F80);
}

TEST(SafetensorsWriter, HeaderIsPaddedAndTensorsAligned) {
  TempDir dir;
  const auto path = dir / "mixed.safetensors";
  // Added smallest-first with odd sizes; the writer must still align every tensor.
  write_safetensors(path,
                    {{"h", Tensor::from_f32({3}, std::vector<float>{1, 2, 3})},
                     {"i", Tensor::from_i32({1}, std::vector<std::int32_t>{42})},
                     {"f", Tensor::from_f32({5}, std::vector<float>{1, 2, 3, 4, 5})}},
                    {}, std::nullopt);
  SafetensorsWriter w(dir / "mixed2.safetensors");
  w.add("half", DType::F16, {3}, float_fill(DType::F16, [](std::int64_t first, std::span<float> o) {
          for (std::size_t i = 0; i < o.size(); ++i) o[i] = static_cast<float>(first) + i;
        }));
  w.add("word", DType::F32, {1},
        float_fill(DType::F32, [](std::int64_t, std::span<float> o) { o[0] = 7; }));
  const std::uint64_t size = w.write();
  EXPECT_EQ(size, std::filesystem::file_size(dir / "mixed2.safetensors"));
  for (const auto& p : {path, dir / "mixed2.safetensors"}) {
    const std::string raw = testing::read_file(p);
    std::uint64_t n = 0;
    std::memcpy(&n, raw.data(), 8);
    EXPECT_EQ(n % 8, 0u) << p;
    EXPECT_EQ(raw[8], '{');
    const SafetensorsFile f = SafetensorsFile::open(p);
    std::uint64_t data_bytes = 0;
    for (const SafetensorsEntry& e : f.entries()) {
      EXPECT_EQ(e.offset % dtype_size(e.dtype), 0u) << e.name;
      data_bytes += e.nbytes;
    }
    EXPECT_EQ(8 + n + data_bytes, raw.size()) << "no gaps or trailing bytes in " << p;
  }
  const SafetensorsFile f = SafetensorsFile::open(dir / "mixed2.safetensors");
  EXPECT_EQ(f.view("word").f32()[0], 7.0f);
  std::uint16_t h = 0;
  std::memcpy(&h, static_cast<const std::byte*>(f.view("half").raw()) + 4, 2);
  EXPECT_EQ(f16_to_f32(h), 2.0f);
}

TEST(SafetensorsWriter, StreamsInChunksCoveringEveryByteOnce) {
  TempDir dir;
  const auto path = dir / "chunks.safetensors";
  static constexpr std::size_t kChunk = 64;  // bytes: forces many chunks and shared chunks
  SafetensorsWriter w(path, kChunk);
  std::vector<std::pair<std::uint64_t, std::size_t>> calls;
  // Element i of tensor k holds 1000 k + i, so a misplaced chunk shows in the values.
  const std::vector<std::int64_t> sizes = {37, 3, 100, 1};
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    std::string name = "t";  // not "t" + to_string(k): GCC 12's -Wrestrict false positive
    name += std::to_string(k);
    w.add(name, DType::F32, {sizes[k]},
          [k, &calls](std::uint64_t offset, std::span<std::byte> out) {
            EXPECT_LE(out.size(), kChunk);
            EXPECT_EQ(offset % 4, 0u);
            EXPECT_EQ(out.size() % 4, 0u);
            if (k == 2) calls.emplace_back(offset, out.size());
            for (std::size_t i = 0; i < out.size() / 4; ++i) {
              const float v = 1000.0f * static_cast<float>(k) + static_cast<float>(offset / 4 + i);
              std::memcpy(out.data() + 4 * i, &v, 4);
            }
          });
  }
  EXPECT_EQ(w.data_bytes(), 141u * 4u);
  w.write();
  std::uint64_t next = 0;
  for (const auto& [offset, size] : calls) {
    EXPECT_EQ(offset, next);
    next += size;
  }
  EXPECT_EQ(next, 400u);
  EXPECT_GT(calls.size(), 1u);
  const SafetensorsFile f = SafetensorsFile::open(path);
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    const std::vector<float> v = f.view("t" + std::to_string(k)).to_vector();
    ASSERT_EQ(v.size(), static_cast<std::size_t>(sizes[k]));
    for (std::size_t i = 0; i < v.size(); ++i) {
      ASSERT_EQ(v[i], 1000.0f * static_cast<float>(k) + static_cast<float>(i)) << k << " " << i;
    }
  }
}

TEST(SafetensorsWriter, EmptyScalarAndStridedTensors) {
  TempDir dir;
  const auto path = dir / "shapes.safetensors";
  const Tensor big = Tensor::from_f32({2, 4}, std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7});
  write_safetensors(path, {{"empty", Tensor::zeros(DType::F32, {0, 5})},
                           {"scalar", Tensor::from_f32({}, std::vector<float>{2.5f})},
                           {"vector", Tensor::from_f32({3}, std::vector<float>{1, 2, 3})},
                           {"cols", big.cols(1, 3)}});
  const SafetensorsFile f = SafetensorsFile::open(path);
  EXPECT_EQ(f.view("empty").shape(), (Shape{0, 5}));
  EXPECT_EQ(f.view("empty").numel(), 0);
  EXPECT_EQ(f.view("scalar").rank(), 0);
  EXPECT_EQ(f.view("scalar").to_vector(), (std::vector<float>{2.5f}));
  EXPECT_EQ(f.view("vector").to_vector(), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(f.view("cols").to_vector(), (std::vector<float>{1, 2, 5, 6}));
}

TEST(SafetensorsWriter, FailingFillLeavesNoFile) {
  TempDir dir;
  const auto path = dir / "half-written.safetensors";
  SafetensorsWriter w(path, 64);
  w.add("ok", DType::F32, {64}, float_fill(DType::F32, [](std::int64_t, std::span<float> o) {
          std::fill(o.begin(), o.end(), 1.0f);
        }));
  w.add("boom", DType::F32, {4},
        [](std::uint64_t, std::span<std::byte>) { throw std::runtime_error("generator failed"); });
  EXPECT_THROW(w.write(), std::runtime_error);
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path.string() + ".tmp"));
}

TEST(SafetensorsWriter, UnwritableDirectoryIsAnError) {
  TempDir dir;
  const auto path = dir / "missing-subdir" / "x.safetensors";
  testing::expect_error<Error>(
      [&] {
        write_safetensors(path, {{"a", Tensor::zeros(DType::F32, {1})}});
      },
      {path.string() + ".tmp"});
}

}  // namespace
}  // namespace huddle::io
