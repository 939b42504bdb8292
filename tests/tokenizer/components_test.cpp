// Pipeline components on hand-made tokenizer.json specs whose expected outputs follow from the
// Hugging Face semantics by hand.
#include <gtest/gtest.h>

#include "core/error.h"
#include "test_util.h"
#include "tokenizer/decoders.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/normalizers.h"
#include "tokenizer/pre_tokenizers.h"

namespace huddle {
namespace {

using nlohmann::json;
using Ids = std::vector<std::int32_t>;

json vocab_abc() {
  return {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"bc", 4}, {"abc", 5}, {"aa", 6}};
}

std::unique_ptr<tok::HfTokenizer> bpe(json merges, json extra = json::object()) {
  json model = {{"type", "BPE"}, {"vocab", vocab_abc()}, {"merges", std::move(merges)}};
  model.update(extra);
  return tok::tokenizer_from_json(json{{"model", model}});
}

TEST(TokBpeTest, MergesApplyLowestRankFirst) {
  EXPECT_EQ(bpe({"b c", "a b"})->encode("abc"), (Ids{0, 4}));  // bc first, then no a+bc
  EXPECT_EQ(bpe({"a b", "b c"})->encode("abc"), (Ids{3, 2}));  // ab first
  EXPECT_EQ(bpe({"b c", "a bc"})->encode("abc"), (Ids{5}));    // bc, then a+bc
  EXPECT_EQ(bpe(json::array({{"a", "b"}, {"ab", "c"}}))->encode("abc"), (Ids{5}));  // pair form
}

TEST(TokBpeTest, EqualRanksMergeLeftmostFirst) {
  EXPECT_EQ(bpe({"a a"})->encode("aaa"), (Ids{6, 0}));
  EXPECT_EQ(bpe({"a a"})->encode("aaaa"), (Ids{6, 6}));
}

TEST(TokBpeTest, IgnoreMergesTakesWholeWordsFromTheVocabulary) {
  // No merge can build "abc" from "a b" alone, but the word is in the vocabulary.
  EXPECT_EQ(bpe({"a b"})->encode("abc"), (Ids{3, 2}));
  EXPECT_EQ(bpe({"a b"}, {{"ignore_merges", true}})->encode("abc"), (Ids{5}));
}

TEST(TokBpeTest, UnknownCharactersUseUnkOrAreDropped) {
  json model = {{"type", "BPE"},
                {"vocab", {{"<unk>", 0}, {"a", 1}, {"b", 2}}},
                {"merges", json::array()},
                {"unk_token", "<unk>"}};
  EXPECT_EQ(tok::tokenizer_from_json({{"model", model}})->encode("axxb"), (Ids{1, 0, 0, 2}));
  model["fuse_unk"] = true;
  EXPECT_EQ(tok::tokenizer_from_json({{"model", model}})->encode("axxb"), (Ids{1, 0, 2}));
  model.erase("unk_token");
  EXPECT_EQ(tok::tokenizer_from_json({{"model", model}})->encode("axxb"), (Ids{1, 2}));
}

TEST(TokBpeTest, ByteFallbackSpellsUnknownCharactersInBytes) {
  // "é" is C3 A9 in UTF-8. Llama 2 style: Metaspace-free normalizer, ByteFallback + Fuse decoder.
  const json spec = {
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers",
         {{{"type", "Prepend"}, {"prepend", "▁"}},
          {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "▁"}}}}}},
      {"model",
       {{"type", "BPE"},
        {"vocab", {{"<unk>", 0}, {"<0xC3>", 1}, {"<0xA9>", 2}, {"▁", 3}, {"c", 4}, {"a", 5}}},
        {"merges", json::array()},
        {"unk_token", "<unk>"},
        {"byte_fallback", true}}},
      {"decoder",
       {{"type", "Sequence"},
        {"decoders",
         {{{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}},
          {{"type", "ByteFallback"}},
          {{"type", "Fuse"}},
          {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}}};
  const auto t = tok::tokenizer_from_json(spec);
  const Ids ids = t->encode("ca é");
  EXPECT_EQ(ids, (Ids{3, 4, 5, 3, 1, 2}));
  EXPECT_EQ(t->decode(ids), "ca é");
  // A character with no byte tokens either (z) falls back to unk.
  EXPECT_EQ(t->encode("z"), (Ids{3, 0}));
  // A lone byte token that is not UTF-8 decodes to U+FFFD.
  EXPECT_EQ(t->decode(Ids{4, 1}), "c\xEF\xBF\xBD");
  EXPECT_TRUE(t->passes_raw_bytes());
}

TEST(TokSplitBehaviorTest, EachBehaviorOnADashedText) {
  // "a-b--c": gap a, match -, gap b, match -, match -, gap c.
  const std::vector<tok::Segment> segments = {{0, 1, false}, {1, 2, true}, {2, 3, false},
                                              {3, 4, true},  {4, 5, true}, {5, 6, false}};
  using R = std::vector<std::pair<std::size_t, std::size_t>>;
  EXPECT_EQ(tok::apply_split_behavior(segments, tok::SplitBehavior::kRemoved),
            (R{{0, 1}, {2, 3}, {5, 6}}));
  EXPECT_EQ(tok::apply_split_behavior(segments, tok::SplitBehavior::kIsolated),
            (R{{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}, {5, 6}}));
  EXPECT_EQ(tok::apply_split_behavior(segments, tok::SplitBehavior::kMergedWithPrevious),
            (R{{0, 2}, {2, 4}, {4, 5}, {5, 6}}));
  EXPECT_EQ(tok::apply_split_behavior(segments, tok::SplitBehavior::kMergedWithNext),
            (R{{0, 1}, {1, 3}, {3, 4}, {4, 6}}));
  EXPECT_EQ(tok::apply_split_behavior(segments, tok::SplitBehavior::kContiguous),
            (R{{0, 1}, {1, 2}, {2, 3}, {3, 5}, {5, 6}}));
}

std::vector<std::string> pre_tokenize(const json& spec, std::string text) {
  const auto p = tok::make_pre_tokenizer(spec, "pre_tokenizer");
  std::vector<tok::Piece> pieces = {{std::move(text), true}};
  p->split(pieces);
  std::vector<std::string> out;
  for (const auto& piece : pieces) out.push_back(piece.text);
  return out;
}

TEST(TokPreTokenizerTest, Gpt2ByteLevelRegex) {
  const json spec = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  // 'Ġ' (U+0120) is the byte-level form of a space, 'Ċ' (U+010A) of a newline.
  EXPECT_EQ(pre_tokenize(spec, "Hello world's  end\n"),
            (std::vector<std::string>{"Hello", "Ġworld", "'s", "Ġ", "Ġend", "Ċ"}));
  const json prefixed = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}};
  EXPECT_EQ(pre_tokenize(prefixed, "Hi"), (std::vector<std::string>{"ĠHi"}));
}

TEST(TokPreTokenizerTest, Llama3SplitRegexKeepsDigitTriplesAndContractions) {
  const json spec = {
      {"type", "Split"},
      {"pattern",
       {{"Regex",
         R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}}},
      {"behavior", "Isolated"},
      {"invert", false}};
  EXPECT_EQ(pre_tokenize(spec, "I'LL pay 1234567 now!\n\nOk"),
            (std::vector<std::string>{"I", "'LL", " pay", " ", "123", "456", "7", " now", "!\n\n",
                                      "Ok"}));
}

TEST(TokPreTokenizerTest, MetaspacePrependSchemes) {
  const json always = {
      {"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "always"}, {"split", true}};
  EXPECT_EQ(pre_tokenize(always, "Hey  friend"),
            (std::vector<std::string>{"▁Hey", "▁", "▁friend"}));
  const json first_no_split = {
      {"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "first"}, {"split", false}};
  EXPECT_EQ(pre_tokenize(first_no_split, "a b"), (std::vector<std::string>{"▁a▁b"}));
  const auto p = tok::make_pre_tokenizer(first_no_split, "pre_tokenizer");
  std::vector<tok::Piece> later = {{"a b", false}};  // not at the start of the input
  p->split(later);
  EXPECT_EQ(later.at(0).text, "a▁b");
}

TEST(TokPreTokenizerTest, DigitsAndPunctuationAndWhitespace) {
  EXPECT_EQ(pre_tokenize({{"type", "Digits"}, {"individual_digits", true}}, "ab12c"),
            (std::vector<std::string>{"ab", "1", "2", "c"}));
  EXPECT_EQ(pre_tokenize({{"type", "Digits"}, {"individual_digits", false}}, "ab12c"),
            (std::vector<std::string>{"ab", "12", "c"}));
  EXPECT_EQ(pre_tokenize({{"type", "Punctuation"}}, "hi!?"),
            (std::vector<std::string>{"hi", "!", "?"}));
  EXPECT_EQ(pre_tokenize({{"type", "Whitespace"}}, "hi there, you"),
            (std::vector<std::string>{"hi", "there", ",", "you"}));
  EXPECT_EQ(pre_tokenize({{"type", "WhitespaceSplit"}}, " hi  there,\tyou "),
            (std::vector<std::string>{"hi", "there,", "you"}));
}

std::string decode_tokens(const json& spec, std::vector<std::string> tokens) {
  tok::make_decoder(spec, "decoder")->decode_chain(tokens);
  std::string out;
  for (const auto& t : tokens) out += t;
  return out;
}

TEST(TokDecoderTest, HuggingFaceDecoderSemantics) {
  EXPECT_EQ(
      decode_tokens({{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "always"}},
                    {"▁Hey", "▁friend", "!"}),
      "Hey friend!");
  EXPECT_EQ(
      decode_tokens({{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "never"}},
                    {"▁Hey"}),
      " Hey");
  EXPECT_EQ(decode_tokens({{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}},
                          {"it", "'", "s", "un", "##real", "!"}),
            "it ' s unreal!");
  EXPECT_EQ(decode_tokens({{"type", "ByteFallback"}}, {"<0xE5>", "<0x8F>", "<0xAB>", "a"}), "叫a");
  EXPECT_EQ(decode_tokens({{"type", "ByteFallback"}}, {"<0xE5>", "<0x8F>", "a"}),
            "\xEF\xBF\xBD\xEF\xBF\xBD"
            "a");
  // A run that is not UTF-8 as a whole keeps its valid characters (SentencePiece's rule, see
  // decoders.cpp; Hugging Face would give three U+FFFD here).
  EXPECT_EQ(decode_tokens({{"type", "ByteFallback"}}, {"<0xC3>", "<0xA9>", "<0x9F>"}),
            "\xC3\xA9\xEF\xBF\xBD");
  EXPECT_EQ(decode_tokens({{"type", "Strip"}, {"content", "H"}, {"start", 1}, {"stop", 0}},
                          {"Hey", " friend!", "HHH"}),
            "ey friend!HH");
  EXPECT_EQ(
      decode_tokens({{"type", "BPEDecoder"}, {"suffix", "</w>"}}, {"hel", "lo</w>", "you</w>"}),
      "hello you");
}

TEST(TokNormalizerTest, UnicodeForms) {
  const std::string decomposed = "e\xCC\x81";  // e + COMBINING ACUTE
  const std::string composed = "\xC3\xA9";     // é
  EXPECT_EQ(tok::make_normalizer({{"type", "NFC"}}, "n")->normalize(decomposed), composed);
  EXPECT_EQ(tok::make_normalizer({{"type", "NFD"}}, "n")->normalize(composed), decomposed);
  EXPECT_EQ(tok::make_normalizer({{"type", "NFKC"}}, "n")->normalize("\xEF\xAC\x81"), "fi");  // ﬁ
  EXPECT_EQ(tok::make_normalizer({{"type", "Lowercase"}}, "n")->normalize("ÀB\xC4\xB0"),
            "àbi\xCC\x87");  // İ lowercases to i + combining dot above
  EXPECT_EQ(
      tok::make_normalizer({{"type", "Strip"}, {"strip_left", true}, {"strip_right", false}}, "n")
          ->normalize(" \t x "),
      "x ");
}

}  // namespace
}  // namespace huddle
