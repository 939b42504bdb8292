// GGUF files that are valid GGUF but not a model Huddle can build: refused with a LoadError naming
// the file and the key or tensor, never a crash or a silently different model.
#include "core/error.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "model/gguf_export.h"
#include "model/model.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

namespace huddle {
namespace {

// Rewrites `from` with `edit` applied to its metadata; tensors are copied byte for byte unless
// `drop` names them.
void rewrite(const std::filesystem::path& from, const std::filesystem::path& to,
             const std::function<void(io::GgufWriter&)>& edit, const std::string& drop = "") {
  const io::GgufFile f = io::GgufFile::open(from);
  io::GgufWriter w;
  for (const auto& [key, value] : f.layout().metadata) w.set(key, value);
  edit(w);
  for (const io::GgufTensorInfo& t : f.tensors()) {
    if (t.name == drop) continue;
    const auto bytes = f.bytes(t);
    w.add_tensor(t.name, t.dtype, t.shape, [bytes](std::span<std::byte> out) {
      std::copy(bytes.begin(), bytes.end(), out.begin());
    });
  }
  w.write(to);
}

class GgufModelErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    quantize_to_gguf(testing::fixture_model("llama-tiny"), good_, DType::Q8_0);
  }
  void expect_refused(const std::function<void(io::GgufWriter&)>& edit,
                      std::initializer_list<std::string> parts, const std::string& drop = "") {
    rewrite(good_, bad_, edit, drop);
    try {
      Model::load(bad_);
      ADD_FAILURE() << "no error";
    } catch (const LoadError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(bad_.string()), std::string::npos) << msg;
      for (const std::string& part : parts) {
        EXPECT_NE(msg.find(part), std::string::npos) << "lacks '" << part << "': " << msg;
      }
    }
  }
  testing::TempDir dir_;
  std::filesystem::path good_ = dir_ / "good.gguf";
  std::filesystem::path bad_ = dir_ / "bad.gguf";
};

TEST_F(GgufModelErrors, TheUneditedCopyLoads) {
  rewrite(good_, bad_, [](io::GgufWriter&) {});
  EXPECT_EQ(Model::load(bad_).config().layers, 3);
}

TEST_F(GgufModelErrors, ArchitectureHuddleDoesNotReadFromGguf) {
  expect_refused([](auto& w) { w.set("general.architecture", io::GgufValue::string("gpt2")); },
                 {"general.architecture is 'gpt2'"});
}

TEST_F(GgufModelErrors, MissingOrMistypedHyperParameters) {
  expect_refused([](auto& w) { w.set("llama.block_count", io::GgufValue::string("3")); },
                 {"'llama.block_count' is string"});
  expect_refused([](auto& w) { w.set("llama.embedding_length", io::GgufValue::u32(0)); },
                 {"'llama.embedding_length' is 0"});
  expect_refused([](auto& w) { w.set("llama.rope.dimension_count", io::GgufValue::u32(16)); },
                 {"rope.dimension_count' is 16", "head dim is 32"});
}

TEST_F(GgufModelErrors, RopeScalingHuddleCannotHonour) {
  expect_refused([](auto& w) { w.set("llama.rope.scaling.type", io::GgufValue::string("yarn")); },
                 {"'llama.rope.scaling.type' is 'yarn'"});
}

TEST_F(GgufModelErrors, ShapesThatDoNotMatchTheMetadata) {
  expect_refused([](auto& w) { w.set("llama.feed_forward_length", io::GgufValue::u32(320)); },
                 {"mlp.", "has shape"});
}

TEST_F(GgufModelErrors, MissingTensor) {
  expect_refused([](auto&) {}, {"model.layers.1.self_attn.v_proj.weight", "missing"},
                 "blk.1.attn_v.weight");
}

TEST_F(GgufModelErrors, RopeFactorsWithoutTheirParameters) {
  rewrite(good_, bad_, [](io::GgufWriter& w) {
    w.add_tensor("rope_freqs.weight", DType::F32, {16}, [](std::span<std::byte>) {});
  });
  try {
    Model::load(bad_);
    ADD_FAILURE() << "no error";
  } catch (const LoadError& e) {
    EXPECT_NE(std::string(e.what()).find("rope_freqs.weight"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace huddle
