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

ModelConfig small(const std::string& arch_name) {
  ModelConfig c = find_preset(*find_architecture(arch_name), arch_name == "gpt2"   ? "gpt2"
                                                             : arch_name == "bert" ? "bert-base"
                                                                                   : "llama-1b");
  c.vocab_size = 300;
  c.hidden = 64;
  c.layers = 2;
  c.heads = 4;
  c.kv_heads = arch_name == "llama" ? 2 : 4;
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
                         ::testing::Combine(::testing::Values("gpt2", "bert", "llama"),
                                            ::testing::Values(DType::F32, DType::BF16, DType::F16)),
                         [](const auto& p) {
                           return std::get<0>(p.param) + "_" +
                                  std::string(dtype_name(std::get<1>(p.param)));
                         });

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
