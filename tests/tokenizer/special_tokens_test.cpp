// Added and special tokens are matched in the text before normalization and splitting.
#include <gtest/gtest.h>

#include "test_util.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace huddle {
namespace {

using nlohmann::json;

std::vector<std::int32_t> concat(std::initializer_list<std::vector<std::int32_t>> parts) {
  std::vector<std::int32_t> all;
  for (const auto& p : parts) all.insert(all.end(), p.begin(), p.end());
  return all;
}

TEST(TokSpecialTokensTest, Gpt2EndOfTextInsideTextIsOneToken) {
  const auto t = Tokenizer::load(test::fixture_model("gpt2-tiny"));
  const auto ids = t->encode("hello<|endoftext|>world", false);
  EXPECT_EQ(ids, concat({t->encode("hello", false), {511}, t->encode("world", false)}));
  EXPECT_EQ(t->decode(ids), "hello<|endoftext|>world");
  EXPECT_EQ(t->decode(ids, /*skip_special=*/true), "helloworld");
}

TEST(TokSpecialTokensTest, LlamaSpecialsInTextAndTemplateBos) {
  const auto t = Tokenizer::load(test::fixture_model("llama-tiny"));
  const auto ids = t->encode("<|begin_of_text|>Hi<|end_of_text|>");
  EXPECT_EQ(ids, concat({{509, 509}, t->encode("Hi", false), {510}}));
  // A partial special token is ordinary text.
  EXPECT_EQ(t->encode("<|end_of_text", false).size(), t->encode("<|end_of_text", false).size());
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 510), 1);
  const auto partial = t->encode("<|end_of_text", false);
  EXPECT_EQ(std::count(partial.begin(), partial.end(), 510), 0);
}

TEST(TokSpecialTokensTest, BertSepIsNotSplitOnPunctuationButLowercaseIs) {
  const auto t = Tokenizer::load(test::fixture_model("bert-tiny"));
  const std::int32_t cls = 2, sep = 3;
  const std::int32_t hello = t->token_to_id("hello").value();
  const std::int32_t world = t->token_to_id("world").value();
  EXPECT_EQ(t->encode("hello [SEP] world"),
            (std::vector<std::int32_t>{cls, hello, sep, world, sep}));
  // "[sep]" is not the special token (matched case-sensitively on the raw text): '[' and ']' are
  // not in the tiny vocabulary, "sep" is spelled by WordPiece.
  const std::int32_t unk = t->token_to_id("[UNK]").value();
  const std::vector<std::int32_t> sep_word = {
      t->token_to_id("s").value(), t->token_to_id("##e").value(), t->token_to_id("##p").value()};
  EXPECT_EQ(t->encode("[sep]", false), concat({{unk}, sep_word, {unk}}));
}

// A byte-level-free toy BPE over the characters a, b, c, x, ' ' with one merge "a b".
json toy_bpe(json added_tokens, json normalizer = nullptr) {
  return json{{"added_tokens", std::move(added_tokens)},
              {"normalizer", std::move(normalizer)},
              {"pre_tokenizer", nullptr},
              {"model",
               {{"type", "BPE"},
                {"vocab", {{"a", 0}, {"b", 1}, {"c", 2}, {"x", 3}, {" ", 4}, {"ab", 5}}},
                {"merges", {"a b"}}}},
              {"decoder", {{"type", "Fuse"}}}};
}

json added(std::string content, int id, bool special, json extra = json::object()) {
  json t = {
      {"content", std::move(content)}, {"id", id}, {"special", special}, {"normalized", false}};
  t.update(extra);
  return t;
}

TEST(TokSpecialTokensTest, LeftmostLongestMatchWins) {
  auto t = tok::tokenizer_from_json(toy_bpe(
      json::array({added("<a>", 10, true), added("<a><b>", 11, true), added("b>", 12, true)})));
  // At position 0 both "<a>" and "<a><b>" match: the longer one wins.
  EXPECT_EQ(t->encode("<a><b>c", false), (std::vector<std::int32_t>{11, 2}));
  EXPECT_EQ(t->encode("<a>c", false), (std::vector<std::int32_t>{10, 2}));
  // "b>" starts later than "<a>" does, so "<a>" wins and "b>" is then found after it.
  EXPECT_EQ(t->encode("<a>b>", false), (std::vector<std::int32_t>{10, 12}));
}

TEST(TokSpecialTokensTest, LstripAndRstripAbsorbWhitespace) {
  auto plain = tok::tokenizer_from_json(toy_bpe(json::array({added("<m>", 10, true)})));
  auto stripping = tok::tokenizer_from_json(
      toy_bpe(json::array({added("<m>", 10, true, {{"lstrip", true}, {"rstrip", true}})})));
  EXPECT_EQ(plain->encode("a  <m> b", false), (std::vector<std::int32_t>{0, 4, 4, 10, 4, 1}));
  EXPECT_EQ(stripping->encode("a  <m> b", false), (std::vector<std::int32_t>{0, 10, 1}));
}

TEST(TokSpecialTokensTest, SingleWordTokensNeedWordBoundaries) {
  auto t = tok::tokenizer_from_json(
      toy_bpe(json::array({added("cx", 10, false, {{"single_word", true}})})));
  EXPECT_EQ(t->encode("cx", false), (std::vector<std::int32_t>{10}));
  EXPECT_EQ(t->encode("a cx b", false), (std::vector<std::int32_t>{0, 4, 10, 4, 1}));
  // Inside a word it is ordinary text.
  EXPECT_EQ(t->encode("acxb", false), (std::vector<std::int32_t>{0, 2, 3, 1}));
}

TEST(TokSpecialTokensTest, NormalizedAddedTokensMatchAfterNormalization) {
  json token = added("AB", 10, false);
  token["normalized"] = true;
  auto t = tok::tokenizer_from_json(toy_bpe(json::array({token}), {{"type", "Lowercase"}}));
  // The token's content is lowercased like the text, so "AB", "Ab" and "ab" all match.
  EXPECT_EQ(t->encode("AB", false), (std::vector<std::int32_t>{10}));
  EXPECT_EQ(t->encode("cAbc", false), (std::vector<std::int32_t>{2, 10, 2}));
  EXPECT_FALSE(t->is_special(10));
}

}  // namespace
}  // namespace huddle
