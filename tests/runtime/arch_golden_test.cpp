// The Llama-family architectures (llama3 / linear / dynamic rope scaling, Qwen2, Mistral's
// sliding window, Phi-3's fused projections) on one device against the float64 references that
// tests/fixtures/make_arch_fixtures.py computes independently of Huddle. Tolerance
// 1e-4 x max|ref|; argmax per position and greedy ids identical (the script picked prompts whose
// gaps make that follow from the tolerance).
#include "io/npy.h"
#include "model/model.h"
#include "runtime/executor.h"
#include "runtime/generate.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

namespace huddle {
namespace {

constexpr double kArchTolerance = 1e-4;

std::string test_name(const ::testing::TestParamInfo<std::string>& p) {
  std::string name = p.param;
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

class ArchGolden : public ::testing::TestWithParam<std::string> {
 protected:
  const std::string stem = "references/" + GetParam() + ".40";
};

TEST_P(ArchGolden, LogitsOfEveryPositionMatchTheReference) {
  const Model model = Model::load(testing::fixture_model(GetParam()));
  const auto ids = testing::read_ids(testing::fixture(stem + ".ids.json"));
  const Tensor reference = io::read_npy(testing::fixture(stem + ".npy"));
  Executor executor(model.graph(), model.weights(), model.config().max_positions);
  const Tensor out = executor.forward(ids, /*all_rows=*/true);
  ASSERT_EQ(out.shape(), reference.shape());
  EXPECT_LE(testing::relative_error(out, reference), kArchTolerance);
  EXPECT_EQ(testing::row_argmax(out), testing::row_argmax(reference));
}

// Prefill in uneven chunks then single tokens: the KV cache (and a sliding window over it, and
// per-position dynamic frequencies) give the reference rows.
TEST_P(ArchGolden, ChunkedPrefillAndDecodeMatchTheReference) {
  const Model model = Model::load(testing::fixture_model(GetParam()));
  const auto ids = testing::read_ids(testing::fixture(stem + ".ids.json"));
  const Tensor reference = io::read_npy(testing::fixture(stem + ".npy"));
  Executor executor(model.graph(), model.weights(), model.config().max_positions);
  std::size_t done = 0;
  for (const std::size_t chunk : {13, 1, 9, 2, 1, 7, 1, 1, 5}) {
    const Tensor out = executor.forward(std::span(ids).subspan(done, chunk), /*all_rows=*/true);
    const Tensor ref =
        reference.rows(static_cast<std::int64_t>(done), static_cast<std::int64_t>(done + chunk));
    EXPECT_LE(testing::relative_error(out, ref), kArchTolerance) << "chunk at " << done;
    done += chunk;
  }
  ASSERT_EQ(done, ids.size());
}

TEST_P(ArchGolden, GreedyGenerationMatchesTheReference) {
  const Model model = Model::load(testing::fixture_model(GetParam()));
  std::ifstream in(testing::fixture("references/" + GetParam() + ".generate.json"));
  const nlohmann::json ref = nlohmann::json::parse(in);
  const auto greedy = ref["greedy"].get<std::vector<std::int32_t>>();
  Executor executor(model.graph(), model.weights(), model.config().max_positions);
  GenerationOptions options;
  options.n_predict = static_cast<int>(greedy.size());
  const GenerationResult result =
      generate(executor, ref["prompt"].get<std::vector<std::int32_t>>(), options);
  EXPECT_EQ(result.generated, greedy);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ArchGolden,
                         ::testing::Values("llama3-tiny", "llama-linear-tiny", "llama-dynamic-tiny",
                                           "qwen2-tiny", "mistral-tiny", "phi3-tiny"),
                         test_name);

// What each fixture exists for is what the engine built from its config.json.
TEST(ArchFixtures, ConfigsCarryTheFeatureUnderTest) {
  const Model llama3 = Model::load(testing::fixture_model("llama3-tiny"));
  EXPECT_EQ(llama3.config().rope.scaling, kernels::RopeScaling::Llama3);
  EXPECT_TRUE(llama3.config().tie_word_embeddings);
  EXPECT_FALSE(llama3.graph().find("lm_head.weight").has_value());
  const Model dynamic = Model::load(testing::fixture_model("llama-dynamic-tiny"));
  EXPECT_EQ(dynamic.config().rope.scaling, kernels::RopeScaling::Dynamic);
  EXPECT_EQ(dynamic.config().max_positions, 64);  // 32 x factor 2
  const Model linear = Model::load(testing::fixture_model("llama-linear-tiny"));
  EXPECT_TRUE(linear.config().qkv_bias && linear.config().o_bias && linear.config().mlp_bias);
  const Model qwen2 = Model::load(testing::fixture_model("qwen2-tiny"));
  EXPECT_EQ(qwen2.config().architecture, "qwen2");
  EXPECT_TRUE(qwen2.config().qkv_bias);
  EXPECT_EQ(qwen2.config().sliding_window, 0);  // use_sliding_window: false
  const Model mistral = Model::load(testing::fixture_model("mistral-tiny"));
  EXPECT_EQ(mistral.config().sliding_window, 8);
  const Model phi3 = Model::load(testing::fixture_model("phi3-tiny"));
  EXPECT_EQ(phi3.config().sliding_window, 24);
  const auto q = phi3.graph().find("model.layers.0.self_attn.qkv_proj.weight[0:0:64]");
  ASSERT_TRUE(q.has_value());  // the fused tensor is used through slices
}

// The engine honours each feature: with it switched off in config.json, the logits miss the
// reference by far more than the tolerance.
TEST(ArchFixtures, SwitchingTheFeatureOffMissesTheReference) {
  const std::vector<std::pair<std::string, nlohmann::json>> cases = {
      {"llama3-tiny", {{"rope_scaling", nullptr}}},
      {"llama-linear-tiny", {{"rope_scaling", nullptr}}},
      {"llama-dynamic-tiny", {{"rope_scaling", nullptr}, {"max_position_embeddings", 64}}},
      {"mistral-tiny", {{"sliding_window", nullptr}}},
      {"phi3-tiny", {{"sliding_window", nullptr}}},
      {"llama-linear-tiny", {{"attention_bias", false}, {"mlp_bias", false}}},
  };
  for (const auto& [name, patch] : cases) {
    testing::TempDir dir;
    testing::copy_model(testing::fixture_model(name), dir.path());
    std::ifstream in(dir / "config.json");
    nlohmann::json config = nlohmann::json::parse(in);
    in.close();
    for (const auto& [key, value] : patch.items()) config[key] = value;
    std::ofstream(dir / "config.json") << config.dump();
    const Model model = Model::load(dir.path());
    const auto ids = testing::read_ids(testing::fixture("references/" + name + ".40.ids.json"));
    Executor executor(model.graph(), model.weights(), model.config().max_positions);
    const Tensor out = executor.forward(ids, /*all_rows=*/true);
    EXPECT_GT(testing::relative_error(
                  out, io::read_npy(testing::fixture("references/" + name + ".40.npy"))),
              1e-2)
        << name << " with " << patch.dump();
  }
}

}  // namespace
}  // namespace huddle
