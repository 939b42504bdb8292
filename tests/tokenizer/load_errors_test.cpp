// Broken, missing and unsupported tokenizer files give LoadError naming the file and what is wrong.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>

#include "core/error.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace huddle {
namespace {

using nlohmann::json;
using ::testing::AllOf;
using ::testing::HasSubstr;

// The message of the LoadError that loading `dir` throws ("" if it does not throw one).
std::string load_error(const std::filesystem::path& dir) {
  try {
    Tokenizer::load(dir);
  } catch (const LoadError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("wrong exception type: ") + e.what();
  }
  return "";
}

class TokLoadErrorTest : public ::testing::Test {
 protected:
  // gpt2-tiny's tokenizer.json with `edit` applied, written to a temp model dir.
  std::string error_after(const std::function<void(json&)>& edit) {
    json spec = test::read_json(test::fixture_model("gpt2-tiny") / "tokenizer.json");
    edit(spec);
    test::write_file(dir_.path() / "tokenizer.json", spec.dump());
    return load_error(dir_.path());
  }
  test::TempDir dir_{"load_errors"};
};

TEST_F(TokLoadErrorTest, MissingDirectoryAndMissingFiles) {
  EXPECT_THAT(load_error(dir_.path() / "nope"),
              AllOf(HasSubstr("nope"), HasSubstr("does not exist")));
  EXPECT_THAT(load_error(dir_.path()),
              AllOf(HasSubstr(dir_.path().string()), HasSubstr("tokenizer.json"),
                    HasSubstr("tokenizer.model")));
}

TEST_F(TokLoadErrorTest, MalformedJson) {
  std::ifstream in(test::fixture_model("gpt2-tiny") / "tokenizer.json");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  test::write_file(dir_.path() / "tokenizer.json", text.substr(0, text.size() / 2));
  EXPECT_THAT(load_error(dir_.path()),
              AllOf(HasSubstr("tokenizer.json"), HasSubstr("not valid JSON")));
  test::write_file(dir_.path() / "tokenizer.json", "[1, 2, 3]");
  EXPECT_THAT(load_error(dir_.path()), AllOf(HasSubstr("tokenizer.json"), HasSubstr("array")));
  test::write_file(dir_.path() / "tokenizer.json", "");
  EXPECT_THAT(load_error(dir_.path()), HasSubstr("tokenizer.json"));
}

TEST_F(TokLoadErrorTest, UnsupportedComponentTypesAreNamed) {
  EXPECT_THAT(error_after([](json& j) { j["model"]["type"] = "Unigram"; }),
              AllOf(HasSubstr("tokenizer.json"), HasSubstr("model"), HasSubstr("'Unigram'")));
  EXPECT_THAT(error_after([](json& j) {
                j["normalizer"] = {{"type", "Precompiled"}};
              }),
              AllOf(HasSubstr("normalizer"), HasSubstr("'Precompiled'")));
  EXPECT_THAT(error_after([](json& j) {
                j["pre_tokenizer"] = {{"type", "UnicodeScripts"}};
              }),
              AllOf(HasSubstr("pre_tokenizer"), HasSubstr("'UnicodeScripts'")));
  EXPECT_THAT(error_after([](json& j) {
                j["decoder"] = {{"type", "CTC"}};
              }),
              AllOf(HasSubstr("decoder"), HasSubstr("'CTC'")));
  EXPECT_THAT(error_after([](json& j) {
                j["post_processor"] = {{"type", "Magic"}};
              }),
              AllOf(HasSubstr("post_processor"), HasSubstr("'Magic'")));
  // Nested: the path points into the sequence.
  EXPECT_THAT(error_after([](json& j) {
                j["normalizer"] = {{"type", "Sequence"},
                                   {"normalizers", {{{"type", "NFC"}}, {{"type", "Nope"}}}}};
              }),
              AllOf(HasSubstr("normalizer.normalizers[1]"), HasSubstr("'Nope'")));
}

TEST_F(TokLoadErrorTest, MalformedFieldsAreNamed) {
  EXPECT_THAT(error_after([](json& j) { j.erase("model"); }), HasSubstr("model: missing field"));
  EXPECT_THAT(error_after([](json& j) { j["model"]["vocab"]["Ā"] = -3; }),
              AllOf(HasSubstr("model.vocab.Ā"), HasSubstr("out of range")));
  EXPECT_THAT(error_after([](json& j) { j["model"]["vocab"]["Ā"] = "zero"; }),
              HasSubstr("model.vocab.Ā"));
  EXPECT_THAT(error_after([](json& j) { j["model"]["vocab"]["Ā"] = 2000000000; }),
              HasSubstr("ids up to 2000000000"));
  EXPECT_THAT(error_after([](json& j) { j["model"]["merges"][3] = "zz qq"; }),
              AllOf(HasSubstr("merges[3]"), HasSubstr("'zz'")));
  EXPECT_THAT(error_after([](json& j) { j["model"]["merges"][0] = "nospace"; }),
              HasSubstr("merges[0]"));
  EXPECT_THAT(error_after([](json& j) { j["added_tokens"][0]["id"] = "x"; }),
              HasSubstr("added_tokens[0].id"));
  EXPECT_THAT(error_after([](json& j) { j["pre_tokenizer"]["use_regex"] = "yes"; }),
              HasSubstr("pre_tokenizer.use_regex"));
  EXPECT_THAT(error_after([](json& j) {
                j["pre_tokenizer"] = {{"type", "Split"},
                                      {"pattern", {{"Regex", "(unclosed"}}},
                                      {"behavior", "Isolated"}};
              }),
              AllOf(HasSubstr("invalid regex"), HasSubstr("(unclosed")));
  EXPECT_THAT(
      error_after([](json& j) {
        j["post_processor"] = {
            {"type", "TemplateProcessing"},
            {"single", {{{"SpecialToken", {{"id", "<s>"}}}}, {{"Sequence", {{"id", "A"}}}}}},
            {"special_tokens", json::object()}};
      }),
      AllOf(HasSubstr("post_processor.single[0]"), HasSubstr("'<s>'")));
}

TEST_F(TokLoadErrorTest, GarbageSentencePieceModel) {
  test::write_file(dir_.path() / "tokenizer.model", "definitely not a protobuf \x01\x02\x03");
  EXPECT_THAT(load_error(dir_.path()), HasSubstr("tokenizer.model"));
}

class TokModelInfoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::copy_file(test::fixture_model("llama-tiny") / "tokenizer.json",
                               dir_.path() / "tokenizer.json");
  }
  test::TempDir dir_{"model_info"};
};

TEST_F(TokModelInfoTest, EosIdsFromGenerationConfigIntOrList) {
  test::write_file(dir_.path() / "config.json",
                   R"({"eos_token_id": 510, "max_position_embeddings": 64})");
  auto t = Tokenizer::load(dir_.path());
  EXPECT_EQ(t->eos_ids(), (std::vector<std::int32_t>{510}));
  EXPECT_EQ(t->context_length(), 64u);
  test::write_file(dir_.path() / "generation_config.json", R"({"eos_token_id": [510, 511]})");
  t = Tokenizer::load(dir_.path());
  EXPECT_EQ(t->eos_ids(), (std::vector<std::int32_t>{510, 511}));
  EXPECT_EQ(t->eos_id(), 510);
}

TEST_F(TokModelInfoTest, EosFromTokenizerConfigWhenConfigsAreSilent) {
  test::write_file(dir_.path() / "tokenizer_config.json",
                   R"({"eos_token": {"content": "<|pad|>"}, "bos_token": "<|end_of_text|>"})");
  const auto t = Tokenizer::load(dir_.path());
  EXPECT_EQ(t->eos_ids(), (std::vector<std::int32_t>{511}));
  EXPECT_EQ(t->bos_id(), 510);
  EXPECT_FALSE(t->context_length().has_value());
}

TEST_F(TokModelInfoTest, BadConfigsAreLoadErrorsNamingFileAndField) {
  test::write_file(dir_.path() / "generation_config.json", R"({"eos_token_id": "two"})");
  EXPECT_THAT(load_error(dir_.path()),
              AllOf(HasSubstr("generation_config.json"), HasSubstr("eos_token_id")));
  test::write_file(dir_.path() / "generation_config.json", R"({"eos_token_id": [1, 99999]})");
  EXPECT_THAT(load_error(dir_.path()),
              AllOf(HasSubstr("generation_config.json"), HasSubstr("99999")));
  test::write_file(dir_.path() / "generation_config.json", R"({"eos_token_id": )");
  EXPECT_THAT(load_error(dir_.path()),
              AllOf(HasSubstr("generation_config.json"), HasSubstr("not valid JSON")));
}

}  // namespace
}  // namespace huddle
