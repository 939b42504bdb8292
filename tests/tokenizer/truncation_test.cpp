// Text longer than the context: a clear InputError, or truncation only when asked for.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/error.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace huddle {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(TokTruncationTest, TooLongTextIsAnErrorStatingBothLengths) {
  const auto t = Tokenizer::load(test::fixture_model("llama-tiny"));
  const std::string text = "one two three four five six seven eight nine ten";
  const std::size_t n = t->encode(text).size();  // BOS included
  ASSERT_GT(n, 6u);
  EXPECT_EQ(t->encode_for_context(text, n), t->encode(text));
  try {
    t->encode_for_context(text, n - 1);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr(std::to_string(n)), HasSubstr(std::to_string(n - 1)),
                                HasSubstr("context")));
  }
}

TEST(TokTruncationTest, KeepStartAndKeepEndKeepTheSpecialTokens) {
  const auto t = Tokenizer::load(test::fixture_model("bert-tiny"));
  const std::string text = "hello world there and tokens become vectors";
  const auto plain = t->encode(text, false);
  ASSERT_EQ(plain.size(), 7u);
  const std::int32_t cls = 2, sep = 3;
  const auto start = t->encode_for_context(text, 5, Truncation::kKeepStart);
  EXPECT_EQ(start, (std::vector<std::int32_t>{cls, plain[0], plain[1], plain[2], sep}));
  const auto end = t->encode_for_context(text, 5, Truncation::kKeepEnd);
  EXPECT_EQ(end, (std::vector<std::int32_t>{cls, plain[4], plain[5], plain[6], sep}));
  EXPECT_THROW(t->encode_for_context(text, 1, Truncation::kKeepStart), InputError);
  EXPECT_EQ(t->encode_for_context(text, 3, Truncation::kKeepStart, /*add_special=*/false),
            (std::vector<std::int32_t>{plain[0], plain[1], plain[2]}));
}

TEST(TokTruncationTest, FixtureContextLengthIsTheModelsPositions) {
  const auto t = Tokenizer::load(test::fixture_model("gpt2-tiny"));
  ASSERT_EQ(t->context_length(), 128u);  // n_positions in config.json
  std::string long_text;
  for (int i = 0; i < 200; ++i) long_text += " x";
  EXPECT_THROW(t->encode_for_context(long_text, *t->context_length()), InputError);
  EXPECT_EQ(t->encode_for_context(long_text, 128, Truncation::kKeepEnd).size(), 128u);
}

}  // namespace
}  // namespace huddle
