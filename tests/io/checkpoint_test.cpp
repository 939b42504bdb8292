// Hugging Face model directories: single-file and sharded checkpoints, valid and hostile.
#include "io/checkpoint.h"

#include "io/io_test_util.h"
#include "io/safetensors_writer.h"

#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>
#include <sstream>

namespace huddle::io {
namespace {

using testing::expect_error;
using testing::TempDir;
using testing::write_file;

// The path of the file mapped at address `p`, from the kernel's own list of mappings.
std::string mapped_path_of(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream in(line);
    std::string range, perms, offset, dev, inode, path;
    in >> range >> perms >> offset >> dev >> inode >> path;
    const std::size_t dash = range.find('-');
    const auto lo = std::stoull(range.substr(0, dash), nullptr, 16);
    const auto hi = std::stoull(range.substr(dash + 1), nullptr, 16);
    if (lo <= a && a < hi) return path;
  }
  return {};
}

// Tensors whose element i of tensor k is k + i / 8, exact in every float dtype used here.
std::vector<TensorSource> sources(int count, std::int64_t rows, DType dtype) {
  std::vector<TensorSource> out;
  for (int k = 0; k < count; ++k) {
    out.push_back({"layer." + std::to_string(k) + ".weight",
                   dtype,
                   {rows, 4},
                   float_fill(dtype, [k](std::int64_t first, std::span<float> o) {
                     for (std::size_t i = 0; i < o.size(); ++i) {
                       o[i] = static_cast<float>(k) + static_cast<float>(first + i) / 8.0f;
                     }
                   })});
  }
  return out;
}

void expect_source_values(const Checkpoint& c, int k, std::int64_t rows) {
  const Tensor t = c.load_f32("layer." + std::to_string(k) + ".weight");
  ASSERT_EQ(t.shape(), (Shape{rows, 4}));
  const std::vector<float> v = t.to_vector();
  for (std::size_t i = 0; i < v.size(); ++i) {
    ASSERT_EQ(v[i], static_cast<float>(k) + static_cast<float>(i) / 8.0f) << k << " " << i;
  }
}

TEST(Checkpoint, Gpt2TinyFixture) {
  const auto dir = testing::kFixtures / "models/gpt2-tiny";
  const Checkpoint c = Checkpoint::open(dir);
  const std::vector<std::string> names = c.names();
  EXPECT_EQ(names.size(), 40u);
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_TRUE(c.has("transformer.h.2.mlp.c_fc.weight"));
  EXPECT_FALSE(c.has("lm_head.weight"));  // tied to wte, not stored
  const TensorInfo info = c.info("transformer.h.0.attn.c_attn.weight");
  EXPECT_EQ(info.dtype, DType::F32);
  EXPECT_EQ(info.shape, (Shape{128, 384}));  // Conv1D [in, out], q/k/v packed along out
  EXPECT_EQ(info.file, dir / "model.safetensors");
  EXPECT_EQ(c.total_bytes(), 676'992u * 4u);  // params from tests/fixtures/README.md
}

TEST(Checkpoint, LoadF32OfF32IsZeroCopyAndKeepsTheMappingAlive) {
  const auto dir = testing::kFixtures / "models/llama-tiny";
  Tensor t;
  {
    const Checkpoint c = Checkpoint::open(dir);
    t = c.load_f32("model.embed_tokens.weight");
    EXPECT_TRUE(c.files()[0].mapping()->contains(t.raw()));
  }
  // The checkpoint is gone; the view must still point into the file's mapping.
  EXPECT_EQ(std::filesystem::path(mapped_path_of(t.raw())),
            std::filesystem::canonical(dir / "model.safetensors"));
  EXPECT_EQ(t.shape(), (Shape{512, 128}));
  EXPECT_TRUE(std::isfinite(t.to_vector().back()));
}

TEST(Checkpoint, WidensF16AndBf16) {
  TempDir dir;
  std::vector<TensorSource> all = sources(1, 3, DType::F16);
  std::vector<TensorSource> bf = sources(2, 5, DType::BF16);
  all.push_back(std::move(bf[1]));
  write_checkpoint(dir.path(), std::move(all), 1 << 20);
  const Checkpoint c = Checkpoint::open(dir.path());
  EXPECT_EQ(c.info("layer.0.weight").dtype, DType::F16);
  EXPECT_EQ(c.info("layer.1.weight").dtype, DType::BF16);
  expect_source_values(c, 0, 3);
  expect_source_values(c, 1, 5);
  EXPECT_FALSE(c.files()[0].mapping()->contains(c.load_f32("layer.0.weight").raw()));
  EXPECT_EQ(c.view("layer.0.weight").dtype(), DType::F16);
  EXPECT_EQ(c.total_bytes(), (3u * 4u + 5u * 4u) * 2u);
}

TEST(Checkpoint, ShardedRoundTrip) {
  TempDir dir;
  // 5 tensors of 6x4 F32 = 96 bytes each; 200-byte shards hold two each: 3 shards.
  const auto written =
      write_checkpoint(dir.path(), sources(5, 6, DType::F32), 200, {{"format", "pt"}}, 64);
  ASSERT_EQ(written.size(), 4u);
  EXPECT_EQ(written.back().filename(), kSafetensorsIndexName);
  EXPECT_EQ(written[0].filename(), "model-00001-of-00003.safetensors");
  EXPECT_FALSE(std::filesystem::exists(dir / kSafetensorsFileName));

  const auto index = nlohmann::json::parse(testing::read_file(written.back()));
  EXPECT_EQ(index["metadata"]["total_size"], 5 * 96);
  EXPECT_EQ(index["weight_map"]["layer.4.weight"], "model-00003-of-00003.safetensors");

  const Checkpoint c = Checkpoint::open(dir.path());
  EXPECT_EQ(c.files().size(), 3u);
  EXPECT_EQ(c.names().size(), 5u);
  EXPECT_EQ(c.total_bytes(), 5u * 96u);
  EXPECT_EQ(c.metadata().at("total_size"), "480");
  EXPECT_EQ(c.info("layer.2.weight").file, dir / "model-00002-of-00003.safetensors");
  for (int k = 0; k < 5; ++k) expect_source_values(c, k, 6);
  EXPECT_EQ(c.files()[1].metadata().at("format"), "pt");

  // Rewriting as one file removes the index, which would otherwise contradict it.
  write_checkpoint(dir.path(), sources(2, 6, DType::F32), 1 << 20);
  EXPECT_FALSE(std::filesystem::exists(dir / kSafetensorsIndexName));
  EXPECT_EQ(Checkpoint::open(dir.path()).names().size(), 2u);
}

TEST(Checkpoint, SingleFileWinsOverAnIndex) {
  TempDir dir;
  write_checkpoint(dir.path(), sources(1, 2, DType::F32), 1 << 20);
  // A broken index next to model.safetensors is never read, as in transformers.
  write_file(dir / kSafetensorsIndexName, "not json");
  const Checkpoint c = Checkpoint::open(dir.path());
  EXPECT_EQ(c.files().size(), 1u);
  expect_source_values(c, 0, 2);
}

TEST(Checkpoint, OversizedTensorGetsItsOwnShard) {
  TempDir dir;
  std::vector<TensorSource> s = sources(3, 2, DType::F32);  // 32 bytes each
  s[1].shape = {100, 4};                                    // 1600 bytes
  const auto written = write_checkpoint(dir.path(), std::move(s), 64);
  EXPECT_EQ(written.size(), 4u);  // three shards + index
  const Checkpoint c = Checkpoint::open(dir.path());
  EXPECT_EQ(c.info("layer.1.weight").shape, (Shape{100, 4}));
  expect_source_values(c, 2, 2);
}

TEST(Checkpoint, UnsupportedDtypeIsSkippedButNamedOnLoad) {
  TempDir dir;
  // Like bert-base's I64 position_ids next to float weights.
  write_file(
      dir / kSafetensorsFileName,
      testing::safetensors_bytes(R"({"ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]},)"
                                 R"("w":{"dtype":"F32","shape":[2],"data_offsets":[16,24]}})",
                                 std::string(24, '\0')));
  const Checkpoint c = Checkpoint::open(dir.path());
  EXPECT_EQ(c.names(), (std::vector<std::string>{"w"}));
  EXPECT_FALSE(c.has("ids"));
  expect_error([&] { c.load_f32("ids"); }, {"'ids'", "I64", dir.path().string()});
}

TEST(Checkpoint, IntegerTensorIsNotLoadedAsFloat) {
  TempDir dir;
  write_safetensors(dir / kSafetensorsFileName,
                    {{"ids", Tensor::from_i32({2}, std::vector<std::int32_t>{1, 2})}});
  const Checkpoint c = Checkpoint::open(dir.path());
  EXPECT_EQ(c.view("ids").i32()[1], 2);
  expect_error([&] { c.load_f32("ids"); }, {"'ids'", "I32", "not a floating-point type"});
}

// ---- hostile directories ----

class CheckpointHostile : public ::testing::Test {
 protected:
  void SetUp() override {
    write_safetensors(dir_ / "shard-a.safetensors",
                      {{"a", Tensor::from_f32({1}, std::vector<float>{1})}});
  }
  void write_index(const std::string& text) { write_file(dir_ / kSafetensorsIndexName, text); }
  std::string index_path() const { return (dir_ / kSafetensorsIndexName).string(); }

  TempDir dir_;
};

TEST_F(CheckpointHostile, MissingTensorNamesTensorAndDirectory) {
  write_index(R"({"weight_map":{"a":"shard-a.safetensors"}})");
  const Checkpoint c = Checkpoint::open(dir_.path());
  expect_error([&] { c.load_f32("transformer.nope"); },
               {"'transformer.nope'", dir_.path().string()});
  expect_error([&] { c.info("transformer.nope"); }, {"'transformer.nope'"});
}

TEST_F(CheckpointHostile, NoWeightsNamesBothFiles) {
  std::filesystem::remove(dir_ / "shard-a.safetensors");
  expect_error([&] { Checkpoint::open(dir_.path()); },
               {dir_.path().string(), kSafetensorsFileName, kSafetensorsIndexName});
}

TEST_F(CheckpointHostile, DirectoryMissingOrAFile) {
  expect_error([&] { Checkpoint::open(dir_ / "nowhere"); }, {"nowhere", "does not exist"});
  expect_error([&] { Checkpoint::open(dir_ / "shard-a.safetensors"); },
               {"shard-a.safetensors", "not a directory"});
}

TEST_F(CheckpointHostile, MalformedIndexJson) {
  write_index(R"({"weight_map": {"a": "shard-a.safetensors",)");
  expect_error([&] { Checkpoint::open(dir_.path()); }, {index_path(), "malformed JSON"});
}

TEST_F(CheckpointHostile, IndexNotAnObject) {
  write_index(R"(["shard-a.safetensors"])");
  expect_error([&] { Checkpoint::open(dir_.path()); }, {index_path(), "must be a JSON object"});
}

TEST_F(CheckpointHostile, WeightMapMissingOrWrongType) {
  write_index(R"({"metadata":{}})");
  expect_error([&] { Checkpoint::open(dir_.path()); }, {index_path(), "missing \"weight_map\""});
  write_index(R"({"weight_map":["a"]})");
  expect_error([&] { Checkpoint::open(dir_.path()); },
               {index_path(), "\"weight_map\" must be an object"});
  write_index(R"({"weight_map":{"a":3}})");
  expect_error([&] { Checkpoint::open(dir_.path()); }, {index_path(), "tensor 'a'", "file name"});
}

TEST_F(CheckpointHostile, DuplicateTensorInIndex) {
  write_index(R"({"weight_map":{"a":"shard-a.safetensors","a":"shard-b.safetensors"}})");
  expect_error([&] { Checkpoint::open(dir_.path()); }, {index_path(), "duplicate key 'a'"});
}

TEST_F(CheckpointHostile, MissingShardNamesShardAndTensor) {
  write_index(
      R"({"weight_map":{"a":"shard-a.safetensors","b":"model-00002-of-00002.safetensors"}})");
  expect_error([&] { Checkpoint::open(dir_.path()); },
               {index_path(), "shard 'model-00002-of-00002.safetensors'", "tensor 'b'"});
}

TEST_F(CheckpointHostile, TensorAbsentFromItsShard) {
  write_index(R"({"weight_map":{"a":"shard-a.safetensors","ghost":"shard-a.safetensors"}})");
  expect_error([&] { Checkpoint::open(dir_.path()); },
               {index_path(), "tensor 'ghost'", "shard 'shard-a.safetensors'"});
}

TEST_F(CheckpointHostile, PathTraversalIsRefused) {
  for (const std::string shard : {"../outside.safetensors", "/etc/passwd", "sub/shard.safetensors",
                                  "..", "..\\\\x.safetensors"}) {
    write_index(R"({"weight_map":{"a":")" + shard + R"("}})");
    expect_error([&] { Checkpoint::open(dir_.path()); }, {index_path(), "tensor 'a'", "refused"});
  }
}

TEST_F(CheckpointHostile, BrokenShardNamesTheShardFile) {
  write_file(dir_ / "shard-b.safetensors", testing::u64_le(1000) + "{}");
  write_index(R"({"weight_map":{"a":"shard-a.safetensors","b":"shard-b.safetensors"}})");
  expect_error([&] { Checkpoint::open(dir_.path()); },
               {(dir_ / "shard-b.safetensors").string(), "header length 1000"});
}

}  // namespace
}  // namespace huddle::io
