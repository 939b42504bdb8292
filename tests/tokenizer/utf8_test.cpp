// Invalid UTF-8: repaired the way Unicode (and Hugging Face) prescribe; never a crash.
#include <gtest/gtest.h>

#include "test_util.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace huddle {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(TokUtf8Test, RepairReplacesMaximalSubparts) {
  // The example of Unicode 15, section 3.9 ("U+FFFD Substitution of Maximal Subparts").
  EXPECT_EQ(tok::repair_utf8("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64"),
            "a" + kFffd + kFffd + kFffd + "b" + kFffd + "c" + kFffd + kFffd + "d");
  EXPECT_EQ(tok::repair_utf8("\xED\xA0\x80"), kFffd + kFffd + kFffd);              // a surrogate
  EXPECT_EQ(tok::repair_utf8("\xC0\xAF"), kFffd + kFffd);                          // overlong '/'
  EXPECT_EQ(tok::repair_utf8("\xF4\x90\x80\x80"), kFffd + kFffd + kFffd + kFffd);  // > U+10FFFF
  EXPECT_EQ(tok::repair_utf8("ok \xE2\x82\xAC"), "ok \xE2\x82\xAC");
}

TEST(TokUtf8Test, ByteLevelBpeEncodesInvalidBytesUnchanged) {
  const auto t = Tokenizer::load(test::fixture_model("gpt2-tiny"));
  const std::string bytes = "\xFF\xFE\x80";
  std::vector<std::int32_t> expected;
  for (const char c : bytes) {
    expected.push_back(t->token_to_id(tok::byte_to_unicode(static_cast<unsigned char>(c))).value());
  }
  EXPECT_EQ(t->encode(bytes, false), expected);
  // decode() gives valid UTF-8: each byte is a maximal invalid subpart.
  EXPECT_EQ(t->decode(expected), kFffd + kFffd + kFffd);
}

TEST(TokUtf8Test, BertReplacesInvalidBytesWhichCleanTextThenDrops) {
  const auto t = Tokenizer::load(test::fixture_model("bert-tiny"));
  EXPECT_EQ(t->encode("hello\xFF world\xC3"), t->encode("hello world"));
}

TEST(TokUtf8Test, ArbitraryBytesNeverBreakAnyTokenizer) {
  test::TextGenerator gen(31337);
  for (const char* model : {"gpt2-tiny", "llama-tiny", "bert-tiny"}) {
    const auto t = Tokenizer::load(test::fixture_model(model));
    for (int i = 0; i < 300; ++i) {
      const std::string bytes = gen.next_bytes();
      std::vector<std::int32_t> ids;
      ASSERT_NO_THROW(ids = t->encode(bytes)) << model;
      for (const auto id : ids) ASSERT_LT(static_cast<std::size_t>(id), t->vocab_size());
      std::string text;
      ASSERT_NO_THROW(text = t->decode(ids, /*skip_special=*/true)) << model;
      EXPECT_TRUE(tok::is_valid_utf8(text));
      if (std::string(model) != "bert-tiny") {
        EXPECT_EQ(text, tok::repair_utf8(bytes)) << model;
      }
    }
  }
}

TEST(TokUtf8Test, DecodingArbitraryIdsGivesValidUtf8) {
  test::TextGenerator gen(4);
  for (const char* model : {"gpt2-tiny", "llama-tiny", "bert-tiny"}) {
    const auto t = Tokenizer::load(test::fixture_model(model));
    for (int i = 0; i < 300; ++i) {
      std::vector<std::int32_t> ids;
      for (std::size_t k = 0, n = gen.pick(12); k < n; ++k) {
        ids.push_back(static_cast<std::int32_t>(gen.pick(t->vocab_size())));
      }
      EXPECT_TRUE(tok::is_valid_utf8(t->decode(ids))) << model;
    }
  }
}

}  // namespace
}  // namespace huddle
