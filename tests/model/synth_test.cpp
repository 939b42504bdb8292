// `huddle synth` output loads back as a model of the requested shape, in every stored dtype.
#include "model/synth.h"
#include "core/error.h"
#include "io/checkpoint.h"
#include "model/model.h"
#include "runtime/executor.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cmath>

namespace huddle {
namespace {

// The architecture's first preset, shrunk; GQA for the rotary decoders.
ModelConfig small(const std::string& arch_name) {
  ModelConfig c = find_architecture(arch_name)->presets.front().second;
  c.vocab_size = 300;
  c.hidden = 64;
  c.layers = 2;
  c.heads = 4;
  c.kv_heads = arch_name == "gpt2" || arch_name == "bert" ? 4 : 2;
  c.head_dim = 16;
  c.ffn = 96;
  c.max_positions = 40;
  return c;
}

class Synth : public ::testing::TestWithParam<std::tuple<std::string, DType>> {};

TEST_P(Synth, WritesALoadableModel) {
  const auto& [arch_name, dtype] = GetParam();
  testing::TempDir dir;
  SynthOptions options;
  options.dtype = dtype;
  const ModelConfig config = small(arch_name);
  const std::int64_t params =
      write_synthetic_model(*find_architecture(arch_name), config, dir.path(), options);
  const Model model = Model::load(dir.path());
  EXPECT_EQ(model.config().hidden, 64);
  EXPECT_EQ(model.config().kv_heads, config.kv_heads);
  std::int64_t loaded = 0;
  for (const auto& [name, t] : model.weights()) loaded += t.numel();
  EXPECT_EQ(loaded, params);
  const io::Checkpoint checkpoint = io::Checkpoint::open(dir.path());
  for (const std::string& name : checkpoint.names())
    EXPECT_EQ(checkpoint.info(name).dtype, dtype) << name;

  Executor executor(model.graph(), model.weights(), model.config().max_positions);
  const std::vector<std::int32_t> ids = {1, 5, 9, 299};
  const Tensor out = executor.forward(ids, true);
  for (float v : out.to_vector()) ASSERT_TRUE(std::isfinite(v));
}

INSTANTIATE_TEST_SUITE_P(All, Synth,
                         ::testing::Combine(::testing::Values("gpt2", "bert", "llama", "qwen2",
                                                              "mistral", "phi3"),
                                            ::testing::Values(DType::F32, DType::BF16, DType::F16)),
                         [](const auto& p) {
                           return std::get<0>(p.param) + "_" +
                                  std::string(dtype_name(std::get<1>(p.param)));
                         });

// The decoder fields config.json carries come back as written: rope scaling (dynamic writes the
// original context and reads back the stretched one), biases, the sliding window.
TEST(Synth, DecoderFieldsRoundTrip) {
  ModelConfig llama = small("llama");
  llama.rope = {.theta = 500000.0f,
                .scaling = kernels::RopeScaling::Llama3,
                .factor = 8.0f,
                .low_freq_factor = 1.0f,
                .high_freq_factor = 4.0f,
                .original_max_positions = 16};
  llama.qkv_bias = llama.o_bias = llama.mlp_bias = true;
  ModelConfig dynamic = small("llama");
  dynamic.rope = {.theta = 10000.0f,
                  .scaling = kernels::RopeScaling::Dynamic,
                  .factor = 2.0f,
                  .original_max_positions = 20};
  ModelConfig mistral = small("mistral");
  mistral.sliding_window = 8;
  for (const ModelConfig& c : {llama, dynamic, mistral, small("phi3"), small("qwen2")}) {
    testing::TempDir dir;
    write_synthetic_model(*find_architecture(c.architecture), c, dir.path(), {});
    const ModelConfig back = Model::load(dir.path()).config();
    EXPECT_EQ(back.rope.scaling, c.rope.scaling) << c.architecture;
    EXPECT_EQ(back.rope.theta, c.rope.theta) << c.architecture;
    EXPECT_EQ(back.rope.factor, c.rope.factor) << c.architecture;
    EXPECT_EQ(back.rope.original_max_positions, c.rope.original_max_positions) << c.architecture;
    EXPECT_EQ(back.max_positions, c.max_positions) << c.architecture;
    EXPECT_EQ(back.sliding_window, c.sliding_window) << c.architecture;
    EXPECT_EQ(back.qkv_bias, c.qkv_bias) << c.architecture;
    EXPECT_EQ(back.o_bias, c.o_bias) << c.architecture;
    EXPECT_EQ(back.mlp_bias, c.mlp_bias) << c.architecture;
  }
}

TEST(Synth, SameSeedSameWeights) {
  testing::TempDir a, b;
  const Architecture& arch = *find_architecture("gpt2");
  write_synthetic_model(arch, small("gpt2"), a.path(), {});
  write_synthetic_model(arch, small("gpt2"), b.path(), {});
  const Model ma = Model::load(a.path()), mb = Model::load(b.path());
  EXPECT_EQ(ma.weights().at("h.1.mlp.c_fc.weight").to_vector(),
            mb.weights().at("h.1.mlp.c_fc.weight").to_vector());
}

TEST(Synth, UnknownPresetListsChoices) {
  try {
    find_preset(*find_architecture("gpt2"), "gpt5");
    ADD_FAILURE();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("gpt2-medium"), std::string::npos);
  }
}

}  // namespace
}  // namespace huddle
