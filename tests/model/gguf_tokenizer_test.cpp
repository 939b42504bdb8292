// The tokenizer a GGUF file carries (tokenizer/gguf_vocab.h), written from a tokenizer.json and
// read back, gives the ids and text of the tokenizer.json itself.
#include "core/error.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "model/gguf_export.h"
#include "test_util.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

namespace huddle {
namespace {

std::vector<std::string> texts_for(const std::string& model) {
  std::ifstream in(testing::fixture("references/" + model + ".tokenizer.json"));
  std::vector<std::string> texts;
  for (const auto& c : nlohmann::json::parse(in)) texts.push_back(c["text"].get<std::string>());
  for (const char* extra :
       {"", " ", "  leading and trailing  ", "digits 1234567 and 3.14159", "tabs\tand\r\nlines\n\n",
        "ünïcödé 日本語 emoji 🙂", "It's 'quoted' and I'LL shout",
        "<|end_of_text|> inside", "<|endoftext|>x", "\xff\xfe not utf-8"}) {
    texts.emplace_back(extra);
  }
  return texts;
}

void expect_same_tokenizer(const Tokenizer& want, const Tokenizer& got, const std::string& model) {
  EXPECT_EQ(got.bos_id(), want.bos_id()) << model;
  EXPECT_EQ(got.eos_id(), want.eos_id()) << model;
  EXPECT_EQ(got.vocab_size(), want.vocab_size()) << model;
  for (const std::string& text : texts_for(model)) {
    for (bool special : {true, false}) {
      const std::vector<std::int32_t> ids = want.encode(text, special);
      EXPECT_EQ(got.encode(text, special), ids) << model << ": '" << text << "' " << special;
      EXPECT_EQ(got.decode(ids), want.decode(ids)) << model << ": '" << text << "'";
      EXPECT_EQ(got.decode(ids, true), want.decode(ids, true)) << model << ": '" << text << "'";
    }
  }
}

TEST(GgufTokenizer, LlamaTinyThroughQuantizeMatchesTokenizerJson) {
  testing::TempDir dir;
  quantize_to_gguf(testing::fixture_model("llama-tiny"), dir / "m.gguf", DType::Q8_0);
  const auto want = Tokenizer::load(testing::fixture_model("llama-tiny"));
  const auto got = Tokenizer::load(dir / "m.gguf");
  EXPECT_EQ(io::GgufFile::open(dir / "m.gguf").string("tokenizer.ggml.pre"), "llama-bpe");
  EXPECT_EQ(got->context_length(), std::optional<std::size_t>(128));
  expect_same_tokenizer(*want, *got, "llama-tiny");
}

TEST(GgufTokenizer, Gpt2TinyVocabularyMatchesTokenizerJson) {
  testing::TempDir dir;
  io::GgufWriter w;
  w.set("general.architecture", io::GgufValue::string("gpt2"));
  EXPECT_EQ(tok::write_gguf_vocab(w, testing::fixture_model("gpt2-tiny"), 512), "");
  w.write(dir / "v.gguf");
  const auto want = Tokenizer::load(testing::fixture_model("gpt2-tiny"));
  const auto got = Tokenizer::load(dir / "v.gguf");
  EXPECT_EQ(io::GgufFile::open(dir / "v.gguf").string("tokenizer.ggml.pre"), "gpt-2");
  expect_same_tokenizer(*want, *got, "gpt2-tiny");
}

TEST(GgufTokenizer, ShortVocabulariesArePaddedAsLlamaCppDoes) {
  testing::TempDir dir;
  io::GgufWriter w;
  tok::write_gguf_vocab(w, testing::fixture_model("gpt2-tiny"), 520);
  w.write(dir / "v.gguf");
  const io::GgufFile f = io::GgufFile::open(dir / "v.gguf");
  const auto tokens = f.string_array("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), 520u);
  EXPECT_EQ(tokens[519], "[PAD519]");
  EXPECT_EQ(f.integer_array("tokenizer.ggml.token_type")[519], 5);
  EXPECT_EQ(f.integer_array("tokenizer.ggml.token_type")[511], 3);  // <|endoftext|> is control
  // A vocabulary larger than the embeddings cannot be written.
  io::GgufWriter small;
  EXPECT_THROW(tok::write_gguf_vocab(small, testing::fixture_model("gpt2-tiny"), 100), LoadError);
}

TEST(GgufTokenizer, FilesWithoutOrWithAnUnreadTokenizerAreRefusedByName) {
  testing::TempDir dir;
  quantize_to_gguf(testing::fixture_model("qwen2-tiny"), dir / "none.gguf", DType::F32);
  try {
    Tokenizer::load(dir / "none.gguf");
    ADD_FAILURE() << "no error";
  } catch (const LoadError& e) {
    EXPECT_NE(std::string(e.what()).find("has no tokenizer"), std::string::npos) << e.what();
  }
  for (const auto& [key, value, message] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"tokenizer.ggml.model", "bert", "tokenizer.ggml.model 'bert'"},
           {"tokenizer.ggml.pre", "deepseek-llm", "tokenizer.ggml.pre 'deepseek-llm'"}}) {
    io::GgufWriter w;
    tok::write_gguf_vocab(w, testing::fixture_model("llama-tiny"), 512);
    w.set(key, io::GgufValue::string(value));
    w.write(dir / "t.gguf");
    try {
      Tokenizer::load(dir / "t.gguf");
      ADD_FAILURE() << "no error for " << value;
    } catch (const LoadError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("t.gguf"), std::string::npos) << e.what();
    }
  }
}

// A SentencePiece ("llama") vocabulary whose types or scores do not fit its tokens is refused
// naming the key (tests/tokenizer/sentencepiece_test.cpp checks the encoding itself).
TEST(GgufTokenizer, MalformedSentencePieceVocabulariesAreRefusedByName) {
  testing::TempDir dir;
  auto base = [] {
    io::GgufWriter w;
    w.set("tokenizer.ggml.model", io::GgufValue::string("llama"));
    w.set("tokenizer.ggml.tokens", io::GgufValue::string_array({"<unk>", "<s>", "\u2581a", "b"}));
    return w;
  };
  auto expect_refused = [&](io::GgufWriter w, const std::string& message) {
    w.write(dir / "spm.gguf");
    try {
      tok::load_gguf_tokenizer(dir / "spm.gguf");
      ADD_FAILURE() << "no error for " << message;
    } catch (const LoadError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("spm.gguf"), std::string::npos) << e.what();
    }
  };
  auto types = [](std::vector<std::int32_t> v) {
    std::vector<io::GgufValue> out;
    for (const std::int32_t t : v) out.push_back(io::GgufValue::i32(t));
    return io::GgufValue::array(io::GgufType::I32, std::move(out));
  };
  io::GgufWriter bad_type = base();
  bad_type.set("tokenizer.ggml.token_type", types({2, 3, 1, 9}));
  expect_refused(std::move(bad_type), "token_type[3] is 9");
  io::GgufWriter bad_byte = base();
  bad_byte.set("tokenizer.ggml.token_type", types({2, 3, 1, 6}));
  expect_refused(std::move(bad_byte), "is not <0xXX>");
  io::GgufWriter short_scores = base();
  short_scores.set("tokenizer.ggml.scores",
                   io::GgufValue::array(io::GgufType::F32, {io::GgufValue::f32(0)}));
  expect_refused(std::move(short_scores), "tokenizer.ggml.scores has 1 entries for 4 tokens");
  // Well-formed, it loads and encodes "a b" as the pieces the scores allow.
  io::GgufWriter good = base();
  good.set("tokenizer.ggml.token_type", types({2, 3, 1, 1}));
  good.set("tokenizer.ggml.bos_token_id", io::GgufValue::u32(1));
  good.write(dir / "ok.gguf");
  const auto t = tok::load_gguf_tokenizer(dir / "ok.gguf");
  EXPECT_EQ(t->encode("a", false), std::vector<std::int32_t>{2});
  EXPECT_EQ(t->encode("a"), (std::vector<std::int32_t>{1, 2}));
  EXPECT_EQ(t->encode("ab", false), (std::vector<std::int32_t>{2, 3}));
  EXPECT_EQ(t->encode("c", false), std::vector<std::int32_t>{0});  // no piece, no bytes: <unk>
}

}  // namespace
}  // namespace huddle
