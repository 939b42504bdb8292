// The fixture references: for each tiny model, the ids of six texts as Hugging Face's tokenizers
// pipeline produces them (tests/fixtures/README.md: made by an independent re-implementation and
// cross-checked against llama.cpp). Compared exactly.
#include <gtest/gtest.h>

#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace huddle {
namespace {

class TokReferenceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(TokReferenceTest, IdsMatchReferenceExactly) {
  const std::string model = GetParam();
  const auto tokenizer = Tokenizer::load(test::fixture_model(model));
  const auto cases = test::read_json(std::filesystem::path(HUDDLE_FIXTURES_DIR) / "references" /
                                     (model + ".tokenizer.json"));
  ASSERT_EQ(cases.size(), 6u);
  for (const auto& c : cases) {
    const std::string text = c["text"].get<std::string>();
    const auto expected = c["ids"].get<std::vector<std::int32_t>>();
    EXPECT_EQ(tokenizer->encode(text), expected) << model << ": " << text;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TokReferenceTest,
                         ::testing::Values("gpt2-tiny", "llama-tiny", "bert-tiny"));

// Byte-level BPE is lossless; WordPiece is not (lowercase, accents, [UNK]).
class TokByteLevelReferenceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(TokByteLevelReferenceTest, ReferenceIdsDecodeBackToTheText) {
  const std::string model = GetParam();
  const auto tokenizer = Tokenizer::load(test::fixture_model(model));
  const auto cases = test::read_json(std::filesystem::path(HUDDLE_FIXTURES_DIR) / "references" /
                                     (model + ".tokenizer.json"));
  for (const auto& c : cases) {
    const auto ids = c["ids"].get<std::vector<std::int32_t>>();
    EXPECT_EQ(tokenizer->decode(ids, /*skip_special=*/true), c["text"].get<std::string>());
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TokByteLevelReferenceTest,
                         ::testing::Values("gpt2-tiny", "llama-tiny"));

TEST(TokBertReferenceTest, DecodeJoinsWordPiecesAndDropsSpecials) {
  const auto bert = Tokenizer::load(test::fixture_model("bert-tiny"));
  const auto cases = test::read_json(std::filesystem::path(HUDDLE_FIXTURES_DIR) / "references" /
                                     "bert-tiny.tokenizer.json");
  // Case 0 has every word in the vocabulary; WordPiece's cleanup glues " ." back to ".".
  const auto ids = cases[0]["ids"].get<std::vector<std::int32_t>>();
  EXPECT_EQ(bert->decode(ids, true), "the quick brown fox jumps over the lazy dog.");
  EXPECT_EQ(bert->decode(ids, false), "[CLS] the quick brown fox jumps over the lazy dog. [SEP]");
  // Case 5: "A naïve café owner." comes back lowercased and without accents.
  const auto ids5 = cases[5]["ids"].get<std::vector<std::int32_t>>();
  EXPECT_EQ(bert->decode(ids5, true), "a naive cafe owner.");
}

TEST(TokReferenceTest, SpecialIdsComeFromTheModelDirectory) {
  // Values from each fixture's config.json (README: llama BOS 509 / EOS 510, gpt2 511 for both).
  const auto llama = Tokenizer::load(test::fixture_model("llama-tiny"));
  EXPECT_EQ(llama->bos_id(), 509);
  EXPECT_EQ(llama->eos_ids(), std::vector<std::int32_t>{510});
  EXPECT_EQ(llama->context_length(), 128u);
  EXPECT_EQ(llama->vocab_size(), 512u);
  EXPECT_EQ(llama->num_special_tokens_to_add(), 1u);
  EXPECT_EQ(llama->kind(), "BPE");

  const auto gpt2 = Tokenizer::load(test::fixture_model("gpt2-tiny"));
  EXPECT_EQ(gpt2->bos_id(), 511);
  EXPECT_EQ(gpt2->eos_id(), 511);
  EXPECT_EQ(gpt2->num_special_tokens_to_add(), 0u);

  const auto bert = Tokenizer::load(test::fixture_model("bert-tiny"));
  EXPECT_FALSE(bert->eos_id().has_value());
  EXPECT_EQ(bert->num_special_tokens_to_add(), 2u);
  EXPECT_EQ(bert->kind(), "WordPiece");
  EXPECT_EQ(bert->token_to_id("[CLS]"), 2);
  EXPECT_EQ(bert->id_to_token(3), "[SEP]");
  EXPECT_TRUE(bert->is_special(2));
  EXPECT_FALSE(bert->is_special(bert->token_to_id("the").value()));
}

}  // namespace
}  // namespace huddle
