// `huddle tokenize` / `huddle detokenize`, through the functions the commands call and through a
// CLI11 app parsing real argv.
#include <gtest/gtest.h>
#include <CLI/CLI.hpp>

#include "cli/tokenize_command.h"
#include "core/error.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace huddle {
namespace {

std::string join_ids(const std::vector<std::int32_t>& ids) {
  std::string s;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(ids[i]);
  }
  return s;
}

const std::string kLlama = test::fixture_model("llama-tiny").string();

TEST(TokenizeCommandTest, PrintsTheTokenizersIds) {
  const auto t = Tokenizer::load(kLlama);
  const std::string text = "The quick brown fox.";
  cli::TokenizeOptions o;
  o.model_dir = kLlama;
  o.text = text;
  EXPECT_EQ(cli::tokenize_to_string(o), join_ids(t->encode(text)) + "\n");
  o.json = true;
  EXPECT_EQ(nlohmann::json::parse(cli::tokenize_to_string(o)).get<std::vector<std::int32_t>>(),
            t->encode(text));
  o.json = false;
  o.no_special = true;
  EXPECT_EQ(cli::tokenize_to_string(o), join_ids(t->encode(text, false)) + "\n");
}

TEST(TokenizeCommandTest, DetokenizeRoundTrips) {
  const auto t = Tokenizer::load(kLlama);
  const std::string text = "naïve café 🙂 line\nbreak";
  cli::DetokenizeOptions o;
  o.model_dir = kLlama;
  o.ids = join_ids(t->encode(text));
  EXPECT_EQ(cli::detokenize_to_string(o), "<|begin_of_text|>" + text + "\n");
  o.skip_special = true;
  EXPECT_EQ(cli::detokenize_to_string(o), text + "\n");
}

TEST(TokenizeCommandTest, ErrorsAreTyped) {
  cli::DetokenizeOptions d;
  d.model_dir = kLlama;
  d.ids = "1,x,3";
  EXPECT_THROW(cli::detokenize_to_string(d), UsageError);
  d.ids = "1,99999";
  EXPECT_THROW(cli::detokenize_to_string(d), InputError);
  d.model_dir = "/nonexistent/model";
  d.ids = "1";
  EXPECT_THROW(cli::detokenize_to_string(d), LoadError);

  cli::TokenizeOptions o;
  o.model_dir = kLlama;
  o.text = "The quick brown fox.";
  o.max_tokens = 2;
  EXPECT_THROW(cli::tokenize_to_string(o), InputError);  // more ids than asked for
  o.max_tokens.reset();
  o.text = std::string(2000, 'x') + " " + std::string(2000, '9');  // far over 128 positions
  o.truncate = "right";
  EXPECT_EQ(nlohmann::json::parse("[" + cli::tokenize_to_string(o) + "]").size(), 128u);
  o.truncate = "sideways";
  EXPECT_THROW(cli::tokenize_to_string(o), UsageError);
  o.truncate = "none";
  o.max_tokens = 0;
  EXPECT_THROW(cli::tokenize_to_string(o), UsageError);
}

// Runs `args` through a CLI11 app with the tokenize commands; returns stdout.
std::string run_cli(std::vector<std::string> args) {
  CLI::App app;
  app.require_subcommand(1);
  cli::add_tokenize_commands(app);
  args.insert(args.begin(), "huddle");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  ::testing::internal::CaptureStdout();
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (...) {
    ::testing::internal::GetCapturedStdout();
    throw;
  }
  return ::testing::internal::GetCapturedStdout();
}

TEST(TokenizeCommandTest, SubcommandsThroughCli11) {
  const auto t = Tokenizer::load(kLlama);
  EXPECT_EQ(run_cli({"tokenize", "--model", kLlama, "--text", "Hi there"}),
            join_ids(t->encode("Hi there")) + "\n");
  EXPECT_EQ(run_cli({"tokenize", "--model", kLlama, "--text", "Hi there", "--max-tokens", "2",
                     "--truncate", "left"}),
            join_ids(t->encode_for_context("Hi there", 2, Truncation::kKeepEnd)) + "\n");
  EXPECT_EQ(run_cli({"detokenize", "--model", kLlama, "--ids", join_ids(t->encode("Hi there")),
                     "--skip-special"}),
            "Hi there\n");
  EXPECT_THROW(run_cli({"tokenize", "--model", kLlama}), CLI::ParseError);  // --text missing
  EXPECT_THROW(run_cli({"tokenize", "--model", kLlama, "--text", "x", "--max-tokens", "-3"}),
               CLI::ParseError);
}

// Tokenizing is not running: text longer than the model's context (128 positions) gives all of
// its ids, the same as the tokenizer's.
TEST(TokenizeCommandTest, TextLongerThanTheContextTokenizesWhole) {
  const auto t = Tokenizer::load(kLlama);
  std::string text;
  for (int i = 0; i < 200; ++i) text += "The quick brown fox jumps over the lazy dog. ";
  const std::vector<std::int32_t> ids = t->encode(text);
  ASSERT_GT(ids.size(), 4 * 128u);
  cli::TokenizeOptions o;
  o.model_dir = kLlama;
  o.text = text;
  EXPECT_EQ(cli::tokenize_to_string(o), join_ids(ids) + "\n");
  EXPECT_EQ(run_cli({"tokenize", "--model", kLlama, "--text", text, "--json"}),
            nlohmann::json(ids).dump() + "\n");
}

}  // namespace
}  // namespace huddle
