// StreamDecoder: chunks concatenate to the full decode and never split a UTF-8 character.
#include <gtest/gtest.h>

#include "core/error.h"
#include "test_util.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace huddle {
namespace {

// Streams ids one by one; checks every chunk is valid UTF-8 on its own. Returns the chunks.
std::vector<std::string> stream(const Tokenizer& tokenizer, const std::vector<std::int32_t>& ids,
                                bool skip_special) {
  StreamDecoder decoder(tokenizer, skip_special);
  std::vector<std::string> chunks;
  for (const std::int32_t id : ids) chunks.push_back(decoder.push(id));
  chunks.push_back(decoder.finish());
  for (const std::string& c : chunks) EXPECT_TRUE(tok::is_valid_utf8(c)) << c;
  return chunks;
}

std::string join(const std::vector<std::string>& chunks) {
  std::string all;
  for (const auto& c : chunks) all += c;
  return all;
}

class TokStreamDecoderTest : public ::testing::TestWithParam<std::string> {};

TEST_P(TokStreamDecoderTest, ChunksConcatenateToTheFullDecode) {
  const auto tokenizer = Tokenizer::load(test::fixture_model(GetParam()));
  test::TextGenerator gen(99);
  for (int i = 0; i < 300; ++i) {
    const auto ids = tokenizer->encode(gen.next());
    for (const bool skip : {false, true}) {
      ASSERT_EQ(join(stream(*tokenizer, ids, skip)), tokenizer->decode(ids, skip))
          << "case " << i << " skip_special " << skip;
    }
  }
}

TEST_P(TokStreamDecoderTest, RandomIdSequencesAlsoMatch) {
  // Generated ids need not form valid UTF-8; the stream must still equal the full decode.
  const auto tokenizer = Tokenizer::load(test::fixture_model(GetParam()));
  test::TextGenerator gen(5);
  for (int i = 0; i < 200; ++i) {
    std::vector<std::int32_t> ids;
    for (std::size_t k = 0, n = gen.pick(20); k < n; ++k) {
      ids.push_back(static_cast<std::int32_t>(gen.pick(tokenizer->vocab_size())));
    }
    ASSERT_EQ(join(stream(*tokenizer, ids, false)), tokenizer->decode(ids)) << "case " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TokStreamDecoderTest,
                         ::testing::Values("gpt2-tiny", "llama-tiny", "bert-tiny"));

TEST(TokStreamDecoderTest, HoldsBackAnEmojiUntilItsLastByte) {
  const auto tokenizer = Tokenizer::load(test::fixture_model("gpt2-tiny"));
  const std::string emoji = "\xF0\x9F\x98\x80";  // U+1F600, four bytes
  const auto ids = tokenizer->encode("a" + emoji + "b");
  // The tiny vocabulary has no merges for these bytes: one id per byte.
  ASSERT_EQ(ids.size(), 6u);
  StreamDecoder decoder(*tokenizer);
  EXPECT_EQ(decoder.push(ids[0]), "a");
  EXPECT_EQ(decoder.push(ids[1]), "");
  EXPECT_EQ(decoder.push(ids[2]), "");
  EXPECT_EQ(decoder.push(ids[3]), "");
  EXPECT_EQ(decoder.push(ids[4]), emoji);
  EXPECT_EQ(decoder.push(ids[5]), "b");
  EXPECT_EQ(decoder.finish(), "");
}

TEST(TokStreamDecoderTest, AnUnfinishedCharacterIsFlushedAsReplacement) {
  const auto tokenizer = Tokenizer::load(test::fixture_model("gpt2-tiny"));
  const auto ids = tokenizer->encode("x\xF0\x9F");  // first two bytes of an emoji
  StreamDecoder decoder(*tokenizer);
  std::string out;
  for (const auto id : ids) out += decoder.push(id);
  EXPECT_EQ(out, "x");
  EXPECT_EQ(decoder.finish(), "\xEF\xBF\xBD");
  EXPECT_EQ(tokenizer->decode(ids), "x\xEF\xBF\xBD");
}

TEST(TokStreamDecoderTest, BadIdThrowsAndLeavesTheStreamUsable) {
  const auto tokenizer = Tokenizer::load(test::fixture_model("llama-tiny"));
  const auto ids = tokenizer->encode("hi there", false);
  StreamDecoder decoder(*tokenizer);
  std::string out = decoder.push(ids[0]);
  EXPECT_THROW(decoder.push(100000), InputError);
  EXPECT_THROW(decoder.push(-1), InputError);
  for (std::size_t i = 1; i < ids.size(); ++i) out += decoder.push(ids[i]);
  out += decoder.finish();
  EXPECT_EQ(out, "hi there");
}

// Decoders that treat the first token specially (Llama 2's Replace/ByteFallback/Fuse/Strip chain,
// Metaspace) must still stream to exactly the full decode, over random id sequences.
TEST(TokStreamDecoderTest, FirstTokenSensitiveDecodersStreamExactly) {
  using nlohmann::json;
  const json vocab = {{"<unk>", 0},  {"<s>", 1},    {"<0xC3>", 2},   {"<0xA9>", 3},
                      {"<0xF0>", 4}, {"<0x9F>", 5}, {"<0x99>", 6},   {"<0x82>", 7},
                      {"\u2581", 8}, {"a", 9},      {"\u2581a", 10}, {"\u2581\u2581", 11},
                      {"b", 12}};
  json fixed_vocab;
  for (auto& [k, v] : vocab.items())
    fixed_vocab[json::parse("\"" + k + "\"").get<std::string>()] = v;
  const json model = {{"type", "BPE"},
                      {"vocab", fixed_vocab},
                      {"merges", json::array()},
                      {"unk_token", "<unk>"},
                      {"byte_fallback", true}};
  const json added =
      json::array({{{"id", 1}, {"content", "<s>"}, {"special", true}, {"normalized", false}}});
  const json llama2_decoder = {
      {"type", "Sequence"},
      {"decoders",
       {{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
        {{"type", "ByteFallback"}},
        {{"type", "Fuse"}},
        {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
  const json metaspace_decoder = {
      {"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "always"}};
  for (const json& decoder : {llama2_decoder, metaspace_decoder}) {
    json spec = {{"model", model}, {"added_tokens", added}, {"decoder", decoder}};
    spec = json::parse(spec.dump());  // \u escapes above are JSON text, as in a tokenizer.json
    const auto t = tok::tokenizer_from_json(spec);
    test::TextGenerator gen(11);
    for (int i = 0; i < 400; ++i) {
      std::vector<std::int32_t> ids;
      for (std::size_t k = 0, n = gen.pick(10); k < n; ++k) {
        ids.push_back(static_cast<std::int32_t>(gen.pick(13)));
      }
      for (const bool skip : {false, true}) {
        ASSERT_EQ(join(stream(*t, ids, skip)), t->decode(ids, skip)) << decoder.dump();
      }
    }
  }
}

}  // namespace
}  // namespace huddle
