// The `huddle` command as scripts use it: flags, outputs, exit codes (0 ok, 1 error, 2 usage).
#include "io/npy.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

namespace huddle {
namespace {

using testing::contains;
using testing::fixture;
using testing::fixture_model;
using testing::ids_arg;
using testing::run_huddle;

TEST(Cli, HelpAndUsageErrors) {
  EXPECT_EQ(run_huddle({"--help"}).exit_code, 0);
  const auto help = run_huddle({"run", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_TRUE(contains(help.out, "--dump-logits"));
  EXPECT_EQ(run_huddle({"synth", "--help"}).exit_code, 0);
  EXPECT_EQ(run_huddle({}).exit_code, 2);
  EXPECT_EQ(run_huddle({"frobnicate"}).exit_code, 2);
  EXPECT_EQ(run_huddle({"run", "--model", fixture_model("gpt2-tiny"), "--ids", "1,2", "--bogus"})
                .exit_code,
            2);
  const auto bad_ids = run_huddle({"run", "--model", fixture_model("gpt2-tiny"), "--ids", "1,x,3"});
  EXPECT_EQ(bad_ids.exit_code, 2);
  EXPECT_TRUE(contains(bad_ids.err, "--ids")) << bad_ids.err;
  const auto encoder = run_huddle(
      {"run", "--model", fixture_model("bert-tiny"), "--ids", "1,2", "--n-predict", "2"});
  EXPECT_EQ(encoder.exit_code, 2) << encoder.err;
}

TEST(Cli, ErrorsNameTheCause) {
  const auto missing = run_huddle({"run", "--model", "/no/such/model", "--ids", "1"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_TRUE(contains(missing.err, "/no/such/model")) << missing.err;

  const auto vocab = run_huddle({"run", "--model", fixture_model("gpt2-tiny"), "--ids", "1,512,3"});
  EXPECT_EQ(vocab.exit_code, 1);
  EXPECT_TRUE(contains(vocab.err, "512") && contains(vocab.err, "vocabulary")) << vocab.err;

  const std::vector<std::int32_t> long_prompt(129, 5);
  const auto context =
      run_huddle({"run", "--model", fixture_model("gpt2-tiny"), "--ids", ids_arg(long_prompt)});
  EXPECT_EQ(context.exit_code, 1);
  EXPECT_TRUE(contains(context.err, "context")) << context.err;

  testing::TempDir dir;
  testing::copy_model(fixture_model("llama-tiny"), dir.path());
  std::filesystem::resize_file(dir / "model.safetensors", 4);
  const auto truncated = run_huddle({"run", "--model", dir.path(), "--ids", "1,2"});
  EXPECT_EQ(truncated.exit_code, 1);
  EXPECT_TRUE(contains(truncated.err, "model.safetensors")) << truncated.err;
}

TEST(Cli, DumpLogitsMatchesReference) {
  for (const std::string model : {"gpt2-tiny", "llama-tiny", "bert-tiny"}) {
    testing::TempDir dir;
    const auto ids = testing::read_ids(fixture("references/" + model + ".16.ids.json"));
    const auto r = run_huddle({"run", "--model", fixture_model(model), "--ids", ids_arg(ids),
                               "--dump-logits", dir / "out.npy", "--threads", "1"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const Tensor out = io::read_npy(dir / "out.npy");
    const Tensor ref = io::read_npy(fixture("references/" + model + ".16.npy"));
    ASSERT_EQ(out.shape(), ref.shape()) << model;
    EXPECT_LE(testing::relative_error(out, ref), 1e-4) << model;
  }
}

TEST(Cli, JsonGenerationMatchesReference) {
  for (const std::string model : {"gpt2-tiny", "llama-tiny"}) {
    std::ifstream in(fixture("references/" + model + ".generate.json"));
    const nlohmann::json ref = nlohmann::json::parse(in);
    const auto r = run_huddle({"run", "--model", fixture_model(model), "--ids",
                               ids_arg(ref["prompt"].get<std::vector<std::int32_t>>()),
                               "--n-predict", "16", "--json", "--threads", "2"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["generated"], ref["greedy"]) << model;
    EXPECT_GT(j["prefill_ms"].get<double>(), 0.0);
    EXPECT_GT(j["decode_ms_per_token"].get<double>(), 0.0);
  }
}

TEST(Cli, SynthThenRun) {
  testing::TempDir dir;
  const nlohmann::json config = {{"model_type", "llama"},    {"vocab_size", 200},
                                 {"hidden_size", 64},        {"intermediate_size", 80},
                                 {"num_hidden_layers", 2},   {"num_attention_heads", 4},
                                 {"num_key_value_heads", 1}, {"max_position_embeddings", 64}};
  std::ofstream(dir / "small.json") << config.dump();
  const auto synth = run_huddle({"synth", "--arch", "llama", "--config", dir / "small.json", "-o",
                                 dir / "model", "--dtype", "bf16"});
  ASSERT_EQ(synth.exit_code, 0) << synth.err;
  const auto r =
      run_huddle({"run", "--model", dir / "model", "--ids", "1,2,3", "--n-predict", "3", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["generated"].size(), 3u);
  EXPECT_EQ(run_huddle({"synth", "--arch", "gpt2", "--preset", "gpt9", "-o", dir / "x"}).exit_code,
            2);
  EXPECT_EQ(run_huddle({"synth", "--arch", "opt", "--preset", "gpt2", "-o", dir / "x"}).exit_code,
            2);
}

}  // namespace
}  // namespace huddle
