// The Llama-family architectures (llama3 / linear / dynamic rope scaling, Qwen2, Mistral's
// sliding window, Phi-3's fused projections) on one device against the float64 references that
// tests/fixtures/make_arch_fixtures.py computes independently of Huddle. Tolerance
// 1e-4 x max|ref|; argmax per position and greedy ids identical (the script picked prompts whose
// gaps make that follow from the tolerance).
//
// The same tests run on 16-bit copies (llama-tiny, qwen2-tiny and phi3-tiny stored F16 and BF16
// by the same script, with references computed from the rounded weights): the engine widens
// 16-bit weights to f32 exactly, so the tolerance is the F32 fixtures' one, while rounding itself
// moved the logits by 1e-3 to 1e-2 x max|ref| (the script asserts > 1e-3): a test against the
// F32 reference would need a tolerance ten to a hundred times wider.
#include "core/dtype.h"
#include "core/quant.h"
#include "io/checkpoint.h"
#include "io/npy.h"
#include "model/model.h"
#include "runtime/executor.h"
#include "runtime/generate.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
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

INSTANTIATE_TEST_SUITE_P(SixteenBit, ArchGolden,
                         ::testing::Values("llama-tiny-f16", "llama-tiny-bf16", "qwen2-tiny-f16",
                                           "qwen2-tiny-bf16", "phi3-tiny-f16", "phi3-tiny-bf16"),
                         test_name);

class SixteenBitFixture : public ::testing::TestWithParam<std::string> {
 protected:
  const bool bf16 = GetParam().ends_with("-bf16");
  const DType stored = bf16 ? DType::BF16 : DType::F16;
  const std::string parent = GetParam().substr(0, GetParam().rfind('-'));
};

// The 16-bit copy loads with its matrix weights kept in 16 bits (views of the file; norm scales
// and biases are widened to F32 as for every checkpoint), so it takes half the F32 parent's
// weight bytes.
TEST_P(SixteenBitFixture, MatrixWeightsStaySixteenBit) {
  const Model half = Model::load(testing::fixture_model(GetParam()));
  const Model full = Model::load(testing::fixture_model(parent));
  std::size_t matrices = 0;
  for (const auto& [name, tensor] : half.weights()) {
    if (tensor.shape().size() >= 2) {
      EXPECT_EQ(tensor.dtype(), stored) << name;
      ++matrices;
    } else {
      EXPECT_EQ(tensor.dtype(), DType::F32) << name;
    }
  }
  EXPECT_GE(matrices, 5u);
  // Small vectors are under 0.5% of either model's weights.
  EXPECT_GT(static_cast<double>(half.weight_bytes()),
            0.5 * static_cast<double>(full.weight_bytes()));
  EXPECT_LT(static_cast<double>(half.weight_bytes()),
            0.505 * static_cast<double>(full.weight_bytes()));
}

// Every stored value is the F32 parent's value rounded to nearest even by the engine's own
// conversion (the script rounds as torch does), for every tensor of the checkpoint.
TEST_P(SixteenBitFixture, StoredValuesAreTheParentRoundedToNearestEven) {
  const io::Checkpoint copy = io::Checkpoint::open(testing::fixture_model(GetParam()));
  const io::Checkpoint original = io::Checkpoint::open(testing::fixture_model(parent));
  std::vector<std::string> names = copy.names(), original_names = original.names();
  std::sort(names.begin(), names.end());
  std::sort(original_names.begin(), original_names.end());
  ASSERT_EQ(names, original_names);
  std::size_t values = 0;
  for (const std::string& name : names) {
    const Tensor view = copy.view(name);
    ASSERT_EQ(view.dtype(), stored) << name;
    const std::vector<float> w = original.view(name).to_vector();
    const std::vector<float> h = dequantize(view).to_vector();
    ASSERT_EQ(w.size(), h.size()) << name;
    for (std::size_t i = 0; i < w.size(); ++i) {
      const float rounded = bf16 ? bf16_to_f32(f32_to_bf16(w[i])) : f16_to_f32(f32_to_f16(w[i]));
      ASSERT_EQ(h[i], rounded) << name << " [" << i << "]";
    }
    values += w.size();
  }
  EXPECT_GT(values, 90'000u);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SixteenBitFixture,
                         ::testing::Values("llama-tiny-f16", "llama-tiny-bf16", "qwen2-tiny-f16",
                                           "qwen2-tiny-bf16", "phi3-tiny-f16", "phi3-tiny-bf16"),
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
