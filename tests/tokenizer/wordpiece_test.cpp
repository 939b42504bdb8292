// WordPiece with BertNormalizer and BertPreTokenizer.
#include <gtest/gtest.h>

#include "test_util.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace huddle {
namespace {

using nlohmann::json;

class TokBertTest : public ::testing::Test {
 protected:
  void SetUp() override { bert_ = Tokenizer::load(test::fixture_model("bert-tiny")); }
  std::vector<std::int32_t> enc(std::string_view text) const { return bert_->encode(text, false); }
  std::int32_t id(std::string_view token) const { return bert_->token_to_id(token).value(); }
  std::unique_ptr<Tokenizer> bert_;
};

TEST_F(TokBertTest, LowercasesAndStripsAccents) {
  EXPECT_EQ(enc("NAÏVE CAFÉ"), enc("naive cafe"));
  EXPECT_EQ(enc("Hello World"), (std::vector<std::int32_t>{id("hello"), id("world")}));
}

TEST_F(TokBertTest, StripsDecomposedCombiningMarksLikeHuggingFace) {
  // "e" + U+0301 COMBINING ACUTE: the mark is removed (llama.cpp keeps it; the README says the
  // references follow Hugging Face).
  EXPECT_EQ(enc("cafe\xCC\x81"), enc("cafe"));
}

TEST_F(TokBertTest, CleanTextDropsControlsAndMapsWhitespace) {
  EXPECT_EQ(enc("hel\x01lo"), enc("hello"));
  EXPECT_EQ(enc("hello\tworld\xC2\xA0there\r\nnow"), enc("hello world there now"));
  EXPECT_EQ(enc(std::string("a\0b", 3)), enc("ab"));
}

TEST_F(TokBertTest, CjkIdeographsAreSeparateWords) {
  // Each ideograph is its own word; the tiny vocabulary knows neither, so each is one [UNK].
  const std::int32_t unk = id("[UNK]");
  EXPECT_EQ(enc("你好"), (std::vector<std::int32_t>{unk, unk}));
  EXPECT_EQ(enc("the你好world"), (std::vector<std::int32_t>{id("the"), unk, unk, id("world")}));
  // Hiragana is not in the CJK ideograph blocks: the run stays one word, one [UNK].
  EXPECT_EQ(enc("ひらがな"), (std::vector<std::int32_t>{unk}));
}

TEST_F(TokBertTest, PunctuationIsSplitOff) {
  EXPECT_EQ(enc("hello,world!"), enc("hello , world !"));
  EXPECT_EQ(enc("hello,world!"),
            (std::vector<std::int32_t>{id("hello"), id(","), id("world"), id("!")}));
}

TEST_F(TokBertTest, OverlongWordIsOneUnknown) {
  EXPECT_EQ(enc(std::string(100, 'a')).size(), 100u);  // a ##a ##a ...: exactly at the limit
  EXPECT_EQ(enc(std::string(101, 'a')), (std::vector<std::int32_t>{id("[UNK]")}));
}

TEST_F(TokBertTest, DecodeJoinsContinuationPieces) {
  const std::vector<std::int32_t> ids = {id("the"), id("s"), id("##e"), id("##p"), id(".")};
  EXPECT_EQ(bert_->decode(ids), "the sep.");
}

// The textbook example (BERT paper, Wu et al. 2016): "unaffable" -> un ##aff ##able.
TEST(TokWordPieceTest, GreedyLongestMatchFirst) {
  const json spec = {{"model",
                      {{"type", "WordPiece"},
                       {"unk_token", "[UNK]"},
                       {"continuing_subword_prefix", "##"},
                       {"max_input_chars_per_word", 100},
                       {"vocab",
                        {{"[UNK]", 0},
                         {"un", 1},
                         {"##aff", 2},
                         {"##able", 3},
                         {"u", 4},
                         {"##n", 5},
                         {"##a", 6}}}}},
                     {"pre_tokenizer", {{"type", "WhitespaceSplit"}}},
                     {"decoder", {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}}}};
  const auto t = tok::tokenizer_from_json(spec);
  EXPECT_EQ(t->encode("unaffable"), (std::vector<std::int32_t>{1, 2, 3}));
  EXPECT_EQ(t->encode("una"), (std::vector<std::int32_t>{1, 6}));
  // A word with any unmatched part is a single [UNK], not a partial match.
  EXPECT_EQ(t->encode("unaffablez"), (std::vector<std::int32_t>{0}));
  EXPECT_EQ(t->encode("un unaffable"), (std::vector<std::int32_t>{1, 1, 2, 3}));
  EXPECT_EQ(t->decode(std::vector<std::int32_t>{1, 1, 2, 3}), "un unaffable");
}

}  // namespace
}  // namespace huddle
