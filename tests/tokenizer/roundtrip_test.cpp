// Round trip: for byte-level BPE, decode(encode(text)) == text for any valid UTF-8 text.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace huddle {
namespace {

class TokRoundTripTest : public ::testing::TestWithParam<std::string> {};

TEST_P(TokRoundTripTest, RandomMixedTextSurvivesEncodeDecode) {
  const auto tokenizer = Tokenizer::load(test::fixture_model(GetParam()));
  test::TextGenerator gen(20240611);
  int checked = 0;
  for (int i = 0; i < 600; ++i) {
    const std::string text = gen.next();
    ASSERT_TRUE(tok::is_valid_utf8(text));
    const auto ids = tokenizer->encode(text);
    ASSERT_EQ(tokenizer->decode(ids, /*skip_special=*/true), text) << "case " << i;
    // Without special tokens the ids are the same minus the template's.
    ASSERT_EQ(tokenizer->encode(text, false).size() + tokenizer->num_special_tokens_to_add(),
              ids.size());
    ++checked;
  }
  EXPECT_EQ(checked, 600);
}

TEST_P(TokRoundTripTest, HandPickedHardCases) {
  const auto tokenizer = Tokenizer::load(test::fixture_model(GetParam()));
  const std::vector<std::string> texts = {
      "",
      " ",
      "\n",
      "     \n\n\t  \r\n ",
      "trailing   ",
      "emoji 👍🏽 family 👨‍👩‍👧 flag 🇫🇷",
      "中文字符和日本語のテキスト",
      "e\xCC\x81 vs \xC3\xA9",  // decomposed and precomposed é
      "\xEF\xBF\xBD replacement char itself",
      "tabs\tand\vvertical\ffeeds",
      "'s 't 're 've 'm 'll 'd 'S 'LL",
      "12345678901234567890",
      std::string("nul\0inside", 10),
  };
  for (const std::string& text : texts) {
    EXPECT_EQ(tokenizer->decode(tokenizer->encode(text), true), text);
  }
}

INSTANTIATE_TEST_SUITE_P(ByteLevel, TokRoundTripTest, ::testing::Values("gpt2-tiny", "llama-tiny"));

TEST(TokRoundTripTest, LlamaPrependsBosAndGpt2AddsNothing) {
  const auto llama = Tokenizer::load(test::fixture_model("llama-tiny"));
  const auto gpt2 = Tokenizer::load(test::fixture_model("gpt2-tiny"));
  const std::string text = "Hello world";
  const auto with = llama->encode(text);
  const auto without = llama->encode(text, false);
  ASSERT_EQ(with.size(), without.size() + 1);
  EXPECT_EQ(with.front(), llama->bos_id().value());
  EXPECT_TRUE(std::equal(without.begin(), without.end(), with.begin() + 1));
  EXPECT_EQ(gpt2->encode(text), gpt2->encode(text, false));
}

TEST(TokRoundTripTest, ConcurrentEncodingGivesTheSameIds) {
  const auto tokenizer = Tokenizer::load(test::fixture_model("llama-tiny"));
  test::TextGenerator gen(7);
  std::vector<std::string> texts;
  std::vector<std::vector<std::int32_t>> expected;
  for (int i = 0; i < 64; ++i) {
    texts.push_back(gen.next(40));
    expected.push_back(tokenizer->encode(texts.back()));
  }
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (std::size_t i = 0; i < texts.size(); ++i) {
        if (tokenizer->encode(texts[i]) != expected[i]) ++mismatches;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
}  // namespace huddle
