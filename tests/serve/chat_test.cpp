// Chat completions in process: the request body, the template from tokenizer_config.json, the
// end-of-turn ids, and the engine's chat prompt (no doubled BOS) and end of turn.
#include "chat_model.h"
#include "model/model.h"
#include "runtime/executor.h"
#include "runtime/generate.h"
#include "serve/chat_request.h"
#include "serve/chat_template.h"
#include "serve/engine.h"
#include "serve/request_error.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace huddle::serve {
namespace {

using nlohmann::json;

// The request error's param for `body` ("" when it parses).
std::string param_of(const json& body) {
  try {
    parse_chat_request(body);
  } catch (const RequestError& e) {
    EXPECT_EQ(e.status(), 400);
    return e.param();
  }
  return "";
}

TEST(ChatRequest, ParsesMessagesAndGenerationFields) {
  const ChatRequest r = parse_chat_request(json::parse(R"({
    "model": "x", "temperature": 0, "seed": 7, "stop": ["\n\n"], "stream": true,
    "logprobs": false, "max_completion_tokens": 5, "tools": [], "response_format": {"type": "text"},
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "Hello"}, {"type": "text", "text": "there"}], "name": "ann"},
      {"role": "assistant", "content": null}]})"));
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[0].content, "Be brief.");
  EXPECT_EQ(r.messages[1].content, "Hello\nthere");
  EXPECT_EQ(r.messages[1].name.value_or(""), "ann");
  EXPECT_EQ(r.messages[2].content, "");
  EXPECT_EQ(r.generation.max_tokens, 5);
  EXPECT_EQ(r.generation.temperature, 0);
  EXPECT_EQ(r.generation.seed.value_or(0), 7u);
  EXPECT_EQ(r.generation.stop, std::vector<std::string>{"\n\n"});
  EXPECT_TRUE(r.generation.stream);
  EXPECT_TRUE(r.generation.from_chat_template);
  EXPECT_FALSE(r.generation.prompt_text);
  // Without a limit a reply runs to the end of its turn or of the context.
  const ChatRequest open =
      parse_chat_request(json::parse(R"({"messages": [{"role": "user", "content": "x"}]})"));
  EXPECT_GT(open.generation.max_tokens, 1000000);
  EXPECT_EQ(parse_chat_request(
                json::parse(R"({"max_tokens": 9, "messages": [{"role": "user", "content": "x"}]})"))
                .generation.max_tokens,
            9);
}

TEST(ChatRequest, MalformedMessagesNameTheField) {
  const json user = {{"role", "user"}, {"content", "hi"}};
  EXPECT_EQ(param_of(json::object()), "messages");
  EXPECT_EQ(param_of({{"messages", json::array()}}), "messages");
  EXPECT_EQ(param_of({{"messages", "hi"}}), "messages");
  EXPECT_EQ(param_of({{"messages", {user, 5}}}), "messages[1]");
  EXPECT_EQ(param_of({{"messages", {{{"content", "hi"}}}}}), "messages[0].role");
  EXPECT_EQ(param_of({{"messages", {{{"role", 3}, {"content", "hi"}}}}}), "messages[0].role");
  EXPECT_EQ(param_of({{"messages", {{{"role", "wizard"}, {"content", "hi"}}}}}),
            "messages[0].role");
  EXPECT_EQ(param_of({{"messages", {{{"role", "user"}, {"content", 5}}}}}), "messages[0].content");
  EXPECT_EQ(param_of({{"messages", {{{"role", "user"}}}}}), "messages[0].content");
  EXPECT_EQ(param_of({{"messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}}}}}}}}),
            "messages[0].content[0].type");
  EXPECT_EQ(param_of({{"messages",
                       {{{"role", "user"}, {"content", {{{"type", "text"}, {"text", 1}}}}}}}}),
            "messages[0].content[0].text");
  EXPECT_EQ(param_of({{"messages", {{{"role", "user"}, {"content", {"x"}}}}}}),
            "messages[0].content[0]");
  EXPECT_EQ(param_of({{"messages", {user}}, {"tools", {{{"type", "function"}}}}}), "tools");
  EXPECT_EQ(param_of({{"messages", {user}}, {"response_format", {{"type", "json_object"}}}}),
            "response_format");
  EXPECT_EQ(param_of({{"messages", {user}}, {"max_completion_tokens", -1}}),
            "max_completion_tokens");
  EXPECT_EQ(param_of({{"messages", {user}}, {"temperature", "hot"}}), "temperature");
  EXPECT_EQ(param_of({{"messages", {user}}, {"n", 2}}), "n");
  EXPECT_EQ(param_of({{"messages", {user}}, {"logprobs", true}}), "logprobs");
  EXPECT_EQ(param_of({{"messages", {user}}}), "");
}

void write_config(const std::filesystem::path& dir, const json& config) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer_config.json") << config.dump();
}

TEST(ChatTemplate, LoadsTheStringOrTheDefaultOfNamedTemplates) {
  testing::TempDir dir;
  EXPECT_FALSE(ChatTemplate::load(dir.path()));  // no tokenizer_config.json
  write_config(dir.path(), {{"bos_token", "<s>"}});
  EXPECT_FALSE(ChatTemplate::load(dir.path()));  // no chat_template
  write_config(dir.path(),
               {{"bos_token", {{"content", "<s>"}, {"__type", "AddedToken"}}},
                {"eos_token", "</s>"},
                {"chat_template", "{{ bos_token }}{{ messages[0].content }}{{ eos_token }}"}});
  auto chat = ChatTemplate::load(dir.path());
  ASSERT_TRUE(chat);
  EXPECT_EQ(chat->bos_token(), "<s>");
  EXPECT_EQ(chat->render({{"user", "hi", std::nullopt}}, true), "<s>hi</s>");
  write_config(dir.path(),
               {{"chat_template",
                 {{{"name", "tool_use"}, {"template", "T"}},
                  {{"name", "default"}, {"template", "D{{ add_generation_prompt }}"}}}}});
  chat = ChatTemplate::load(dir.path());
  ASSERT_TRUE(chat);
  EXPECT_EQ(chat->render({{"user", "hi", std::nullopt}}, false), "DFalse");
  // Unset tokens are undefined in the template, as in Hugging Face's.
  write_config(dir.path(), {{"chat_template", "{{ bos_token is defined }}"}});
  EXPECT_EQ(ChatTemplate::load(dir.path())->render({}, true), "False");
}

TEST(ChatTemplate, MalformedTemplatesAreLoadErrorsNamingTheFile) {
  testing::TempDir dir;
  const auto load_error = [&](const json& config) -> std::string {
    write_config(dir.path(), config);
    try {
      ChatTemplate::load(dir.path());
    } catch (const LoadError& e) {
      return e.what();
    }
    return "";
  };
  std::string e = load_error({{"chat_template", "line one\n{% if x %}unclosed"}});
  EXPECT_TRUE(testing::contains(e, "tokenizer_config.json")) << e;
  EXPECT_TRUE(testing::contains(e, "line 2")) << e;
  e = load_error({{"chat_template", {{{"name", "tool_use"}, {"template", "T"}}}}});
  EXPECT_TRUE(testing::contains(e, "default")) << e;
  e = load_error({{"chat_template", 5}});
  EXPECT_TRUE(testing::contains(e, "chat_template")) << e;
  e = load_error({{"chat_template", "x"}, {"bos_token", 5}});
  EXPECT_TRUE(testing::contains(e, "bos_token")) << e;
  std::ofstream(dir.path() / "tokenizer_config.json") << "{not json";
  EXPECT_THROW(ChatTemplate::load(dir.path()), LoadError);
}

TEST(ChatTemplate, EndOfTurnIdsAreTheTemplatesMarkersTheTokenizerKnows) {
  testing::TempDir dir;
  testing::make_chat_model(dir.path());
  const auto tokenizer = Tokenizer::load(dir.path());
  const auto chat = ChatTemplate::load(dir.path());
  ASSERT_TRUE(chat);
  // <|eot_id|> (511) from the template, <|end_of_text|> (510) its eos_token.
  EXPECT_EQ(end_of_turn_ids(*chat, *tokenizer), (std::vector<std::int32_t>{510, 511}));
  // Markers the tokenizer does not have as one special token are not used.
  const ChatTemplate chatml(
      "{% for m in messages %}<|im_start|>{{ m.content }}<|im_end|>{% endfor %}", "", "");
  EXPECT_TRUE(end_of_turn_ids(chatml, *tokenizer).empty());
}

struct ChatEngine {
  testing::TempDir dir;
  Model model = (testing::make_chat_model(dir.path()), Model::load(dir.path()));
  std::unique_ptr<Tokenizer> tokenizer = Tokenizer::load(dir.path());
  Executor executor{model.graph(), model.weights(), model.config().max_positions};
};

TEST(ChatEngine, APromptThatBeginsWithBosGetsNoSecond) {
  ChatEngine f;
  EngineOptions options;
  options.context = 64;
  options.vocab_size = 512;
  Engine engine(f.executor, *f.tokenizer, options);
  CompletionRequest r;
  r.prompt_text = "<|begin_of_text|>Hello there";
  const std::vector<std::int32_t> plain = engine.prompt_ids(r);
  ASSERT_GE(plain.size(), 3u);
  EXPECT_EQ(plain[0], 509);
  EXPECT_EQ(plain[1], 509) << "the tokenizer adds BOS before the template's";
  r.from_chat_template = true;
  const std::vector<std::int32_t> chat = engine.prompt_ids(r);
  EXPECT_EQ(chat, std::vector<std::int32_t>(plain.begin() + 1, plain.end()));
  // A chat prompt without the BOS text gets the tokenizer's one BOS.
  r.prompt_text = "Hello there";
  EXPECT_EQ(engine.prompt_ids(r), chat);
}

TEST(ChatEngine, ChatRepliesEndAtTheEndOfTurnIds) {
  ChatEngine f;
  const std::vector<std::int32_t> prompt = {509, 20, 30, 40};
  Executor other(f.model.graph(), f.model.weights(), f.model.config().max_positions);
  GenerationOptions g;
  g.n_predict = 3;
  const std::vector<std::int32_t> greedy = generate(other, prompt, g).generated;
  ASSERT_EQ(greedy.size(), 3u);
  ASSERT_NE(greedy[0], 510) << "pick another prompt";
  ASSERT_NE(greedy[1], 510) << "pick another prompt";
  ASSERT_NE(greedy[0], greedy[1]) << "pick another prompt";
  EngineOptions options;
  options.context = 64;
  options.vocab_size = 512;
  options.stop_ids = {510};
  options.chat_stop_ids = {greedy[1]};  // as if the second token ended the turn
  Engine engine(f.executor, *f.tokenizer, options);
  CompletionRequest r;
  r.prompt_ids = prompt;
  r.max_tokens = 3;
  r.temperature = 0;
  const auto keep_going = [](std::string_view) { return true; };
  const CompletionResult plain = engine.complete(r, keep_going);
  EXPECT_EQ(plain.completion_tokens, 3);
  EXPECT_EQ(plain.finish_reason, "length");
  r.from_chat_template = true;
  const CompletionResult chat = engine.complete(r, keep_going);
  EXPECT_EQ(chat.completion_tokens, 2);
  EXPECT_EQ(chat.finish_reason, "stop");
  EXPECT_EQ(chat.text, f.tokenizer->decode(std::vector<std::int32_t>{greedy[0]}, true));
}

}  // namespace
}  // namespace huddle::serve
