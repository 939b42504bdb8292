// `huddle quantize` and `huddle run --model X.gguf` through the binary: greedy ids equal the
// Hugging Face directory's, the GGUF's tokenizer gives the directory's prompt ids, and broken
// files end in exit 1 with a message naming the file (never a crash).
#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

namespace huddle {
namespace {

using testing::run_huddle;

std::string prompt_ids(const std::string& model) {
  std::ifstream in(testing::fixture("references/" + model + ".generate.json"));
  const nlohmann::json ref = nlohmann::json::parse(in);
  std::string ids;
  for (int id : ref["prompt"]) {
    if (!ids.empty()) ids.push_back(',');
    ids.append(std::to_string(id));
  }
  return ids;
}

nlohmann::json run_json(const std::vector<std::string>& args) {
  const auto r = run_huddle(args, 120);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(r.out.substr(0, r.out.find('\n')));
}

class GgufCli : public ::testing::Test {
 protected:
  std::string quantize(const std::string& model, const std::string& type) {
    const std::string out = (dir_ / (model + "." + type + ".gguf")).string();
    const auto r =
        run_huddle({"quantize", "--type", type, testing::fixture_model(model).string(), out});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("wrote " + out), std::string::npos) << r.out;
    return out;
  }
  testing::TempDir dir_;
};

TEST_F(GgufCli, GreedyIdsFromTheGgufEqualTheDirectorys) {
  for (const std::string model : {"llama-tiny", "qwen2-tiny"}) {
    const std::string ids = prompt_ids(model);
    const std::vector<std::string> run = {"run", "--ids",        ids,      "--n-predict",
                                          "16",  "--ignore-eos", "--json", "--model"};
    auto with = [&](const std::string& m) {
      auto args = run;
      args.push_back(m);
      return run_json(args)["generated"];
    };
    const auto want = with(testing::fixture_model(model).string());
    ASSERT_EQ(want.size(), 16u);
    EXPECT_EQ(with(quantize(model, "f32")), want) << model;
    EXPECT_EQ(with(quantize(model, "f16")), want) << model;
  }
}

TEST_F(GgufCli, TextPromptsAreTokenizedByTheGgufsTokenizer) {
  const std::string gguf = quantize("llama-tiny", "q8_0");
  const std::vector<std::string> args = {
      "run", "--prompt", "It's naïve café, 1234!", "--n-predict", "1", "--json", "--model"};
  auto a = args, b = args;
  a.push_back(testing::fixture_model("llama-tiny").string());
  b.push_back(gguf);
  EXPECT_EQ(run_json(b)["prompt_ids"], run_json(a)["prompt_ids"]);
}

TEST_F(GgufCli, QuantizeSaysWhenThereIsNoTokenizerAndRefusesOtherArchitectures) {
  const auto ok =
      run_huddle({"quantize", "--type", "q4_0", testing::fixture_model("qwen2-tiny").string(),
                  (dir_ / "q.gguf").string()});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.err.find("no tokenizer.json"), std::string::npos) << ok.err;
  const auto gpt2 = run_huddle(
      {"quantize", testing::fixture_model("gpt2-tiny").string(), (dir_ / "g.gguf").string()});
  EXPECT_EQ(gpt2.exit_code, 1);
  EXPECT_NE(gpt2.err.find("writes llama and qwen2"), std::string::npos) << gpt2.err;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "g.gguf"));
  const auto type =
      run_huddle({"quantize", "--type", "q5_k", testing::fixture_model("llama-tiny").string(),
                  (dir_ / "x.gguf").string()});
  EXPECT_EQ(type.exit_code, 2);
  EXPECT_NE(type.err.find("q5_k"), std::string::npos) << type.err;
}

TEST_F(GgufCli, BrokenFilesExitOneNamingTheFile) {
  const std::string gguf = quantize("llama-tiny", "q8_0");
  std::ifstream in(gguf, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::vector<std::pair<std::string, std::string>> cases = {
      {bytes.substr(0, bytes.size() / 2), "past the end"},  // truncated data
      {bytes.substr(0, 4) + std::string("\x63\0\0\0", 4) + bytes.substr(8), "version 99"},
      {"GGUF", "past the end"},
      {"not a model at all", "not a GGUF file"},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto path = dir_ / ("bad" + std::to_string(i) + ".gguf");
    std::ofstream(path, std::ios::binary) << cases[i].first;
    const auto r = run_huddle({"run", "--model", path.string(), "--ids", "1,2"});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("huddle: error: " + path.string()), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(cases[i].second), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace huddle
