// Text in, text out: --prompt tokenizes with the model's tokenizer, output streams as text,
// sampling is seeded and the same on one device or several.
#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>

namespace huddle {
namespace {

using testing::contains;
using testing::fixture_model;
using testing::ids_arg;
using testing::run_huddle;

TEST(TextCli, PromptEqualsIdsAndStreamsText) {
  for (const std::string model : {"gpt2-tiny", "llama-tiny"}) {
    const auto by_text =
        run_huddle({"run", "--model", fixture_model(model), "--prompt", "The quick brown fox",
                    "--n-predict", "8", "--ignore-eos", "--json"});
    ASSERT_EQ(by_text.exit_code, 0) << by_text.err;
    const nlohmann::json a = nlohmann::json::parse(by_text.out);
    const auto by_ids = run_huddle({"run", "--model", fixture_model(model), "--ids",
                                    ids_arg(a["prompt_ids"].get<std::vector<std::int32_t>>()),
                                    "--n-predict", "8", "--ignore-eos", "--json"});
    ASSERT_EQ(by_ids.exit_code, 0) << by_ids.err;
    EXPECT_EQ(a["generated"], nlohmann::json::parse(by_ids.out)["generated"]) << model;
    // Without --json the generated text goes to stdout: the same text as the JSON's.
    const auto streamed = run_huddle({"run", "--model", fixture_model(model), "--prompt",
                                      "The quick brown fox", "--n-predict", "8", "--ignore-eos"});
    ASSERT_EQ(streamed.exit_code, 0) << streamed.err;
    EXPECT_EQ(streamed.out, a["text"].get<std::string>() + "\n") << model;
  }
  // Llama's tokenizer adds BOS.
  const auto llama =
      run_huddle({"run", "--model", fixture_model("llama-tiny"), "--prompt", "hi", "--json"});
  EXPECT_EQ(nlohmann::json::parse(llama.out)["prompt_ids"][0], 509);
}

// stdout and stderr into one pipe (`scripts/demo 2>&1 | less`): stdout is then fully buffered, and
// the text's last line must still end before the summary that stderr writes at once.
TEST(TextCli, TextEndsItsLineBeforeTheSummaryInOnePipe) {
  const std::string cmd = std::string(HUDDLE_BINARY) + " run --model '" +
                          fixture_model("llama-tiny").string() +
                          "' --prompt 'The quick brown fox' --n-predict 8 --ignore-eos 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  ASSERT_EQ(pclose(pipe), 0) << out;
  const std::size_t summary = out.find("huddle: ");
  ASSERT_NE(summary, std::string::npos) << out;
  EXPECT_TRUE(summary > 0 && out[summary - 1] == '\n') << out;
}

TEST(TextCli, SeededSamplingIsReproducibleAndDistributionIndependent) {
  const std::vector<std::string> base = {"run",      "--model",      fixture_model("llama-tiny"),
                                         "--prompt", "Call 555",     "--n-predict",
                                         "12",       "--ignore-eos", "--temperature",
                                         "3",        "--top-k",      "50",
                                         "--top-p",  "0.95",         "--json"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run_huddle(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out)["generated"];
  };
  const auto first = with({"--seed", "11"});
  EXPECT_EQ(with({"--seed", "11"}), first);
  EXPECT_EQ(with({"--seed", "11", "--local-devices", "2", "--strategy", "galaxy"}), first);
  bool differs = false;
  for (const std::string seed : {"12", "13", "14"})
    differs = differs || with({"--seed", seed}) != first;
  EXPECT_TRUE(differs);
}

TEST(TextCli, BadTextInputs) {
  const std::string model = fixture_model("gpt2-tiny");
  EXPECT_EQ(run_huddle({"run", "--model", model, "--ids", "1", "--prompt", "x"}).exit_code, 2);
  EXPECT_EQ(run_huddle({"run", "--model", model}).exit_code, 2);
  std::string long_text;
  for (int i = 0; i < 200; ++i) long_text += "word ";
  const auto r = run_huddle({"run", "--model", model, "--prompt", long_text});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("128"), std::string::npos) << r.err;
  const auto missing =
      run_huddle({"run", "--model", model, "--prompt-file", "/no/such/prompt.txt"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("/no/such/prompt.txt"), std::string::npos) << missing.err;
  EXPECT_EQ(run_huddle({"run", "--model", model, "--prompt", "x", "--top-p", "2"}).exit_code, 1);
}

}  // namespace
}  // namespace huddle
