// SentencePiece tokenizer.model files: a tiny model is trained here (libsentencepiece's trainer)
// on a few lines, then loaded through Tokenizer::load like a checkpoint's.
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <random>

#include "core/error.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "test_util.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace huddle {
namespace {

const std::vector<std::string> kCorpus = {
    "The quick brown fox jumps over the lazy dog.",
    "Once upon a time there was a small language model.",
    "It wanted to grow up and read every book in the library.",
    "Tokens become vectors, vectors become attention, attention becomes text.",
    "Numbers like 12, 345 and 6789 appear in text too.",
    "Naïve café owners serve crème brûlée and smørrebrød.",
    "日本語のテキストと中文字符也在这里。",
    "Emoji 🙂 and symbols like → and ∑ show up sometimes.",
};

class TokSentencePieceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::make_unique<test::TempDir>("sentencepiece");
    const auto corpus = dir_->path() / "corpus.txt";
    std::string text;
    for (int rep = 0; rep < 4; ++rep) {
      for (const auto& line : kCorpus) text += line + "\n";
    }
    test::write_file(corpus, text);
    // Identity normalization and kept whitespace make the model lossless, as Llama's is; byte
    // fallback spells characters the model has not seen.
    const std::string args = "--input=" + corpus.string() +
                             " --model_prefix=" + (dir_->path() / "tokenizer").string() +
                             " --model_type=bpe --vocab_size=400 --hard_vocab_limit=false"
                             " --character_coverage=1.0 --byte_fallback=true"
                             " --normalization_rule_name=identity --remove_extra_whitespaces=false"
                             " --split_digits=true --minloglevel=2";
    const auto status = sentencepiece::SentencePieceTrainer::Train(args);
    ASSERT_TRUE(status.ok()) << status.ToString();
    std::filesystem::remove(corpus);
  }
  static void TearDownTestSuite() { dir_.reset(); }

  static std::unique_ptr<test::TempDir> dir_;
};

std::unique_ptr<test::TempDir> TokSentencePieceTest::dir_;

TEST_F(TokSentencePieceTest, LoadsTokenizerModelWhenThereIsNoTokenizerJson) {
  ASSERT_TRUE(std::filesystem::exists(dir_->path() / "tokenizer.model"));
  const auto t = Tokenizer::load(dir_->path());
  EXPECT_EQ(t->kind(), "SentencePiece");
  EXPECT_GE(t->vocab_size(), 256u + 3u);  // byte pieces + <unk> <s> </s>
  // SentencePiece's defaults: <unk>=0, <s>=1, </s>=2.
  EXPECT_EQ(t->bos_id(), 1);
  EXPECT_EQ(t->eos_ids(), std::vector<std::int32_t>{2});
  EXPECT_EQ(t->token_to_id("<s>"), 1);
  EXPECT_EQ(t->id_to_token(2), "</s>");
  EXPECT_FALSE(t->token_to_id("surely-not-a-piece").has_value());
  EXPECT_TRUE(t->is_special(1));
}

TEST_F(TokSentencePieceTest, RoundTripsTrainingAndRandomText) {
  const auto t = Tokenizer::load(dir_->path());
  for (const auto& line : kCorpus) {
    const auto ids = t->encode(line);
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids.front(), 1);  // BOS
    EXPECT_EQ(t->decode(ids, /*skip_special=*/true), line);
  }
  test::TextGenerator gen(77);
  for (int i = 0; i < 200; ++i) {
    std::string text = gen.next();
    // SentencePiece's C API takes NUL-free text; everything else must survive.
    text.erase(std::remove(text.begin(), text.end(), '\0'), text.end());
    const auto ids = t->encode(text, false);
    EXPECT_EQ(t->decode(ids), text) << "case " << i;
  }
}

TEST_F(TokSentencePieceTest, ControlPiecesInTextAndDecodeOfSpecials) {
  const auto t = Tokenizer::load(dir_->path());
  const auto ids = t->encode("hello</s>world", false);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 2), 1);
  // The text after a control piece gets SentencePiece's dummy prefix, as llama.cpp and Hugging
  // Face's legacy Llama tokenizer give it, and decodes with that space.
  EXPECT_EQ(t->decode(ids), "hello</s> world");
  EXPECT_EQ(t->decode(ids, true), "hello world");
  const auto after = t->encode("world", false);
  EXPECT_TRUE(std::equal(after.begin(), after.end(), ids.end() - after.size()));
}

TEST_F(TokSentencePieceTest, StreamingMatchesFullDecode) {
  const auto t = Tokenizer::load(dir_->path());
  test::TextGenerator gen(8);
  for (int i = 0; i < 100; ++i) {
    std::string text = gen.next();
    text.erase(std::remove(text.begin(), text.end(), '\0'), text.end());
    const auto ids = t->encode(text);
    StreamDecoder stream(*t, /*skip_special=*/true);
    std::string out;
    for (const auto id : ids) {
      const std::string chunk = stream.push(id);
      EXPECT_TRUE(tok::is_valid_utf8(chunk));
      out += chunk;
    }
    out += stream.finish();
    EXPECT_EQ(out, t->decode(ids, true)) << "case " << i;
  }
}

TEST_F(TokSentencePieceTest, AddBosFollowsTokenizerConfig) {
  test::TempDir other("sentencepiece_config");
  std::filesystem::copy_file(dir_->path() / "tokenizer.model", other.path() / "tokenizer.model");
  test::write_file(other.path() / "tokenizer_config.json",
                   R"({"add_bos_token": false, "add_eos_token": true})");
  const auto t = Tokenizer::load(other.path());
  const auto ids = t->encode("hello");
  EXPECT_NE(ids.front(), 1);
  EXPECT_EQ(ids.back(), 2);
  EXPECT_EQ(t->num_special_tokens_to_add(), 1u);
}

// Huddle reads tokenizer.model without libsentencepiece (spm_model_file.h): a truncated or
// corrupted file is a LoadError naming it, never a crash; a unigram model is refused by name.
TEST_F(TokSentencePieceTest, BrokenAndUnreadModelFilesAreRefusedByName) {
  std::ifstream in(dir_->path() / "tokenizer.model", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 100u);
  test::TempDir broken("sentencepiece_broken");
  int refused = 0;
  for (std::size_t len : {std::size_t{1}, std::size_t{7}, bytes.size() / 3, bytes.size() - 1}) {
    test::write_file(broken.path() / "tokenizer.model", bytes.substr(0, len));
    try {
      Tokenizer::load(broken.path());
    } catch (const LoadError& e) {
      EXPECT_NE(std::string(e.what()).find("tokenizer.model"), std::string::npos) << e.what();
      ++refused;
    }
  }
  EXPECT_GE(refused, 3);  // a cut can land between pieces and still parse; most do not
  std::mt19937 rng(5);
  for (int i = 0; i < 200; ++i) {
    std::string flipped = bytes;
    flipped[rng() % flipped.size()] = static_cast<char>(rng());
    test::write_file(broken.path() / "tokenizer.model", flipped);
    try {
      Tokenizer::load(broken.path())->encode("hello world");
    } catch (const LoadError&) {
    } catch (const InputError&) {
    }
  }
  const std::string args = "--input=" + (dir_->path() / "corpus-unigram.txt").string() +
                           " --model_prefix=" + (broken.path() / "unigram").string() +
                           " --model_type=unigram --vocab_size=200 --hard_vocab_limit=false"
                           " --minloglevel=2";
  std::string corpus;
  for (int rep = 0; rep < 4; ++rep) {
    for (const auto& line : kCorpus) corpus += line + "\n";
  }
  test::write_file(dir_->path() / "corpus-unigram.txt", corpus);
  const auto status = sentencepiece::SentencePieceTrainer::Train(args);
  ASSERT_TRUE(status.ok()) << status.ToString();
  std::filesystem::rename(broken.path() / "unigram.model", broken.path() / "tokenizer.model");
  try {
    Tokenizer::load(broken.path());
    ADD_FAILURE() << "a unigram model loaded";
  } catch (const LoadError& e) {
    EXPECT_NE(std::string(e.what()).find("unigram"), std::string::npos) << e.what();
  }
}

// The same model as a GGUF "llama" vocabulary (pieces, scores and types as llama.cpp's converter
// writes them), encoded by Huddle's own SentencePiece BPE: the ids libsentencepiece gives, on the
// training lines and on random text, and the text back.
class TokGgufSentencePieceTest : public TokSentencePieceTest {
 protected:
  static std::filesystem::path write_gguf(const sentencepiece::SentencePieceProcessor& sp,
                                          const std::string& name, bool add_space_prefix) {
    std::vector<std::string> pieces;
    std::vector<io::GgufValue> scores, types;
    for (int id = 0; id < sp.GetPieceSize(); ++id) {
      pieces.push_back(sp.IdToPiece(id));
      scores.push_back(io::GgufValue::f32(sp.GetScore(id)));
      // (The trained model has no user-defined pieces: type 4.)
      const int type = sp.IsUnknown(id)   ? 2
                       : sp.IsControl(id) ? 3
                       : sp.IsUnused(id)  ? 5
                       : sp.IsByte(id)    ? 6
                                          : 1;
      types.push_back(io::GgufValue::i32(type));
    }
    io::GgufWriter w;
    w.set("general.architecture", io::GgufValue::string("llama"));
    w.set("tokenizer.ggml.model", io::GgufValue::string("llama"));
    w.set("tokenizer.ggml.tokens", io::GgufValue::string_array(pieces));
    w.set("tokenizer.ggml.scores", io::GgufValue::array(io::GgufType::F32, std::move(scores)));
    w.set("tokenizer.ggml.token_type", io::GgufValue::array(io::GgufType::I32, std::move(types)));
    w.set("tokenizer.ggml.bos_token_id", io::GgufValue::u32(1));
    w.set("tokenizer.ggml.eos_token_id", io::GgufValue::u32(2));
    w.set("tokenizer.ggml.unknown_token_id", io::GgufValue::u32(0));
    if (!add_space_prefix) w.set("tokenizer.ggml.add_space_prefix", io::GgufValue::boolean(false));
    const auto file = dir_->path() / name;
    w.write(file);
    return file;
  }
};

TEST_F(TokGgufSentencePieceTest, LlamaVocabularyEncodesAsSentencePieceDoes) {
  sentencepiece::SentencePieceProcessor sp;
  ASSERT_TRUE(sp.Load((dir_->path() / "tokenizer.model").string()).ok());
  const auto t = tok::load_gguf_tokenizer(write_gguf(sp, "spm.gguf", true));
  EXPECT_EQ(t->vocab_size(), static_cast<std::size_t>(sp.GetPieceSize()));
  EXPECT_EQ(t->bos_id(), 1);
  std::vector<std::string> texts(kCorpus.begin(), kCorpus.end());
  texts.push_back("  two leading spaces,   three inside, trailing  ");
  texts.push_back("unseen: ÆØÅ ЖЖЖ ☃☃ 🦀🦀 ǅ");
  test::TextGenerator gen(91);
  for (int i = 0; i < 300; ++i) {
    std::string text = gen.next();
    text.erase(std::remove(text.begin(), text.end(), '\0'), text.end());
    // Control pieces written in the text are matched first by both; keep to plain text here.
    if (text.find("<s>") != std::string::npos || text.find("</s>") != std::string::npos ||
        text.find("<unk>") != std::string::npos || !tok::is_valid_utf8(text)) {
      continue;
    }
    texts.push_back(text);
  }
  // The tokenizer.model itself, read by Huddle's own reader, encodes the same way.
  const auto from_model = Tokenizer::load(dir_->path());
  int compared = 0;
  for (const std::string& text : texts) {
    std::vector<int> expected;
    ASSERT_TRUE(sp.Encode(text, &expected).ok());
    const std::vector<std::int32_t> ids = t->encode(text, /*add_special=*/false);
    EXPECT_EQ(ids, std::vector<std::int32_t>(expected.begin(), expected.end()))
        << "text: '" << text << "'";
    EXPECT_EQ(from_model->encode(text, false), ids) << "text: '" << text << "'";
    EXPECT_EQ(t->decode(ids), text);
    ++compared;
  }
  EXPECT_GE(compared, 200);
  // BOS as tokenizer.ggml.add_bos_token's default (true for "llama").
  EXPECT_EQ(t->encode("hello").front(), 1);
}

// `huddle quantize` of a directory with only tokenizer.model writes it as a "llama" vocabulary
// (padded to the embeddings as llama.cpp's converter does), which encodes as the directory does.
TEST_F(TokGgufSentencePieceTest, QuantizeWritesTokenizerModelAsALlamaVocabulary) {
  io::GgufWriter w;
  EXPECT_EQ(tok::write_gguf_vocab(w, dir_->path(), 512), "");
  w.write(dir_->path() / "written.gguf");
  const io::GgufFile f = io::GgufFile::open(dir_->path() / "written.gguf");
  EXPECT_EQ(f.string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(f.string_array("tokenizer.ggml.tokens").size(), 512u);
  EXPECT_EQ(f.integer_array("tokenizer.ggml.token_type").back(), 5);  // padding: unused
  const auto from_gguf = tok::load_gguf_tokenizer(f);
  const auto from_dir = Tokenizer::load(dir_->path());
  for (const std::string& line : kCorpus) {
    EXPECT_EQ(from_gguf->encode(line), from_dir->encode(line)) << line;
  }
  io::GgufWriter small;
  EXPECT_THROW(tok::write_gguf_vocab(small, dir_->path(), 100), LoadError);
}

TEST_F(TokGgufSentencePieceTest, WithoutSpacePrefixNoLeadingSpaceIsAdded) {
  sentencepiece::SentencePieceProcessor sp;
  ASSERT_TRUE(sp.Load((dir_->path() / "tokenizer.model").string()).ok());
  const auto with = tok::load_gguf_tokenizer(write_gguf(sp, "spm.gguf", true));
  const auto without = tok::load_gguf_tokenizer(write_gguf(sp, "spm-noprefix.gguf", false));
  const auto a = with->encode("quick fox", false);
  const auto b = without->encode("quick fox", false);
  EXPECT_NE(a, b);
  EXPECT_EQ(with->id_to_token(a.front())->rfind("\u2581", 0), 0u);
  EXPECT_EQ(without->decode(b), "quick fox");
}

}  // namespace
}  // namespace huddle
