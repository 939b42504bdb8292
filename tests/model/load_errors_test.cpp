// Broken model directories: one clear LoadError naming the file, tensor or field.
#include "core/error.h"
#include "io/checkpoint.h"
#include "model/model.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

namespace huddle {
namespace {

using testing::TempDir;

void expect_load_error(const std::filesystem::path& dir, const std::vector<std::string>& needles) {
  try {
    Model::load(dir);
    ADD_FAILURE() << "loaded " << dir;
  } catch (const LoadError& e) {
    for (const std::string& n : needles) {
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos)
          << "'" << n << "' not in: " << e.what();
    }
  }
}

void edit_config(const std::filesystem::path& dir,
                 const std::function<void(nlohmann::json&)>& edit) {
  std::ifstream in(dir / "config.json");
  nlohmann::json j = nlohmann::json::parse(in);
  in.close();
  edit(j);
  std::ofstream(dir / "config.json") << j.dump();
}

TEST(LoadErrors, MissingDirectory) {
  expect_load_error("/nonexistent/huddle-model", {"/nonexistent/huddle-model"});
}

TEST(LoadErrors, MissingConfig) {
  TempDir dir;
  testing::copy_model(testing::fixture_model("gpt2-tiny"), dir.path());
  std::filesystem::remove(dir / "config.json");
  expect_load_error(dir.path(), {"config.json"});
}

TEST(LoadErrors, ConfigNotJson) {
  TempDir dir;
  testing::copy_model(testing::fixture_model("gpt2-tiny"), dir.path());
  std::ofstream(dir / "config.json") << "{\"model_type\": \"gpt2\", ";
  expect_load_error(dir.path(), {"config.json", "JSON"});
}

TEST(LoadErrors, UnsupportedArchitecture) {
  TempDir dir;
  testing::copy_model(testing::fixture_model("gpt2-tiny"), dir.path());
  edit_config(dir.path(), [](nlohmann::json& j) {
    j["model_type"] = "mamba";
    j["architectures"] = {"MambaForCausalLM"};
  });
  expect_load_error(dir.path(), {"mamba", "MambaForCausalLM", "supported"});
}

TEST(LoadErrors, MissingCheckpoint) {
  TempDir dir;
  testing::copy_model(testing::fixture_model("gpt2-tiny"), dir.path());
  std::filesystem::remove(dir / "model.safetensors");
  expect_load_error(dir.path(), {"model.safetensors"});
}

TEST(LoadErrors, MissingTensor) {
  TempDir dir;
  testing::rewrite_checkpoint(
      testing::fixture_model("llama-tiny"), dir.path(),
      [](const std::string& n) { return n == "model.layers.2.mlp.down_proj.weight" ? "" : n; });
  expect_load_error(dir.path(), {"model.layers.2.mlp.down_proj.weight", "missing"});
}

TEST(LoadErrors, ShapeDisagreesWithConfig) {
  TempDir dir;
  testing::copy_model(testing::fixture_model("gpt2-tiny"), dir.path());
  edit_config(dir.path(), [](nlohmann::json& j) { j["n_positions"] = 256; });
  expect_load_error(dir.path(), {"transformer.wpe.weight", "[128, 128]", "[256, 128]", "config"});
}

TEST(LoadErrors, TruncatedCheckpoint) {
  TempDir dir;
  testing::copy_model(testing::fixture_model("bert-tiny"), dir.path());
  std::filesystem::resize_file(dir / "model.safetensors", 100'000);
  expect_load_error(dir.path(), {"model.safetensors"});
}

TEST(LoadErrors, DuplicateTensorUnderTwoNames) {
  TempDir dir;
  const io::Checkpoint original = io::Checkpoint::open(testing::fixture_model("gpt2-tiny"));
  testing::rewrite_checkpoint(testing::fixture_model("gpt2-tiny"), dir.path(),
                              [](const std::string& n) { return n; },
                              {{"wte.weight", original.view("transformer.wte.weight")}});
  expect_load_error(dir.path(), {"wte.weight", "transformer.wte.weight"});
}

}  // namespace
}  // namespace huddle
