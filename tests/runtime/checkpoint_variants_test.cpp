// Checkpoints as users have them: hub name prefixes, ignored buffers and heads, tied heads and
// shards all give the answer of the plain F32 fixture. (Half-precision storage: the F16/BF16
// fixtures in arch_golden_test.cpp, against references of their own.)
#include "core/dtype.h"
#include "io/checkpoint.h"
#include "io/safetensors_writer.h"
#include "model/model.h"
#include "runtime/executor.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

namespace huddle {
namespace {

using testing::TempDir;

Tensor run_fixture_prompt(const std::filesystem::path& dir, const std::string& ids_model) {
  const Model model = Model::load(dir);
  const auto ids = testing::read_ids(testing::fixture("references/" + ids_model + ".16.ids.json"));
  Executor executor(model.graph(), model.weights(), model.config().max_positions);
  return executor.forward(ids, true).clone();
}

std::string identity(const std::string& name) {
  return name;
}

TEST(CheckpointVariants, Gpt2WithoutPrefixAndWithMaskBuffers) {
  TempDir dir;
  const Tensor mask = Tensor::zeros(DType::F32, {1, 1, 4, 4});
  testing::rewrite_checkpoint(
      testing::fixture_model("gpt2-tiny"), dir.path(),
      [](const std::string& n) { return n.starts_with("transformer.") ? n.substr(12) : n; },
      {{"h.0.attn.bias", mask}, {"h.1.attn.masked_bias", mask}});
  const Tensor expected = run_fixture_prompt(testing::fixture_model("gpt2-tiny"), "gpt2-tiny");
  EXPECT_EQ(testing::relative_error(run_fixture_prompt(dir.path(), "gpt2-tiny"), expected), 0.0);
}

TEST(CheckpointVariants, BertWithPrefixPoolerAndHeads) {
  TempDir dir;
  testing::rewrite_checkpoint(testing::fixture_model("bert-tiny"), dir.path(),
                              [](const std::string& n) { return "bert." + n; },
                              {{"cls.predictions.bias", Tensor::zeros(DType::F32, {512})}});
  const Tensor expected = run_fixture_prompt(testing::fixture_model("bert-tiny"), "bert-tiny");
  EXPECT_EQ(testing::relative_error(run_fixture_prompt(dir.path(), "bert-tiny"), expected), 0.0);
}

TEST(CheckpointVariants, LlamaTiedHeadWhenLmHeadAbsent) {
  // A checkpoint whose lm_head equals the embedding must give the same logits as one that omits
  // lm_head and relies on tying.
  TempDir untied, tied;
  const io::Checkpoint original = io::Checkpoint::open(testing::fixture_model("llama-tiny"));
  const Tensor embed = original.view("model.embed_tokens.weight");
  testing::rewrite_checkpoint(testing::fixture_model("llama-tiny"), untied.path(),
                              [](const std::string& n) { return n == "lm_head.weight" ? "" : n; },
                              {{"lm_head.weight", embed}});
  testing::rewrite_checkpoint(testing::fixture_model("llama-tiny"), tied.path(),
                              [](const std::string& n) { return n == "lm_head.weight" ? "" : n; });
  const Tensor a = run_fixture_prompt(untied.path(), "llama-tiny");
  const Tensor b = run_fixture_prompt(tied.path(), "llama-tiny");
  EXPECT_EQ(testing::relative_error(b, a), 0.0);
  // And it differs from the untied fixture's real head.
  EXPECT_GT(testing::relative_error(
                b, run_fixture_prompt(testing::fixture_model("llama-tiny"), "llama-tiny")),
            1e-3);
}

TEST(CheckpointVariants, TieWordEmbeddingsFlagWinsOverStoredHead) {
  TempDir dir;
  testing::rewrite_checkpoint(testing::fixture_model("llama-tiny"), dir.path(), identity);
  std::ifstream in(dir / "config.json");
  nlohmann::json config = nlohmann::json::parse(in);
  in.close();
  config["tie_word_embeddings"] = true;
  std::ofstream(dir / "config.json") << config.dump();
  const Model model = Model::load(dir.path());
  EXPECT_FALSE(model.weights().contains("lm_head.weight"));
}

TEST(CheckpointVariants, ShardedCheckpointGivesIdenticalOutput) {
  TempDir dir;
  testing::copy_model(testing::fixture_model("gpt2-tiny"), dir.path());
  std::filesystem::remove(dir / "model.safetensors");
  const io::Checkpoint original = io::Checkpoint::open(testing::fixture_model("gpt2-tiny"));
  std::vector<io::TensorSource> sources;
  for (const std::string& name : original.names()) {
    const Tensor t = original.view(name);
    sources.push_back({name, DType::F32, t.shape(), io::tensor_fill(t, DType::F32)});
  }
  const auto written = io::write_checkpoint(dir.path(), std::move(sources), 600'000);
  ASSERT_GT(written.size(), 3u);  // several shards plus the index
  const Tensor expected = run_fixture_prompt(testing::fixture_model("gpt2-tiny"), "gpt2-tiny");
  EXPECT_EQ(testing::relative_error(run_fixture_prompt(dir.path(), "gpt2-tiny"), expected), 0.0);
}

}  // namespace
}  // namespace huddle
