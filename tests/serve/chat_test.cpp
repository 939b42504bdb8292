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
  EXPECT_EQ(param_of({{"messages", {user}}, {"tools", {{{"type", "function"}}}}}),
            "tools[0].function");
  EXPECT_EQ(param_of({{"messages", {user}}, {"response_format", {{"type", "json_object"}}}}),
            "response_format");
  EXPECT_EQ(param_of({{"messages", {user}}, {"max_completion_tokens", -1}}),
            "max_completion_tokens");
  EXPECT_EQ(param_of({{"messages", {user}}, {"temperature", "hot"}}), "temperature");
  EXPECT_EQ(param_of({{"messages", {user}}, {"n", 2}}), "n");
  EXPECT_EQ(param_of({{"messages", {user}}, {"logprobs", true}}), "logprobs");
  EXPECT_EQ(param_of({{"messages", {user}}}), "");
}

// A weather tool, and an assistant's call of it with the OpenAI client's JSON-string arguments
// answered by a tool message.
const char* const kToolRequest = R"({
  "tools": [
    {"type": "function", "function": {"name": "get_weather", "description": "Current weather.",
      "parameters": {"type": "object", "properties": {"location": {"type": "string"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["location"]}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}],
  "messages": [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Weather in Paris, in celsius?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"location\": \"Paris\", \"unit\": \"celsius\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "{\"temperature\": 18}"}]})";

TEST(ChatRequest, ParsesToolsToolChoiceAndToolMessages) {
  const ChatRequest r = parse_chat_request(nlohmann::ordered_json::parse(kToolRequest));
  ASSERT_EQ(r.tools.size(), 2u);
  EXPECT_EQ(r.tool_names(), (std::vector<std::string>{"get_weather", "get_time"}));
  EXPECT_TRUE(r.offers_tools());
  EXPECT_EQ(r.tool_choice, ToolChoice::kAuto);
  // The tools keep the client's key order (the template prints them).
  EXPECT_EQ(
      r.tools[0]["function"]["parameters"].dump(),
      R"({"type":"object","properties":{"location":{"type":"string"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["location"]})");
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[2].content, "");
  // The arguments' JSON string becomes the object the templates print with tojson.
  EXPECT_EQ(
      r.messages[2].tool_calls.dump(),
      R"([{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":{"location":"Paris","unit":"celsius"}}}])");
  EXPECT_EQ(r.messages[3].tool_call_id.value_or(""), "call_1");
  EXPECT_TRUE(r.messages[1].tool_calls.is_null());
  auto with = [](const char* field, const nlohmann::ordered_json& value) {
    nlohmann::ordered_json body = nlohmann::ordered_json::parse(kToolRequest);
    body[field] = value;
    return parse_chat_request(body);
  };
  EXPECT_FALSE(with("tool_choice", "none").offers_tools());
  EXPECT_EQ(with("tool_choice", "required").tool_choice, ToolChoice::kRequired);
  const ChatRequest named =
      with("tool_choice", {{"type", "function"}, {"function", {{"name", "get_time"}}}});
  EXPECT_EQ(named.tool_choice, ToolChoice::kFunction);
  EXPECT_EQ(named.tool_choice_name, "get_time");
  EXPECT_FALSE(with("parallel_tool_calls", false).parallel_tool_calls);
  // No tools, or none: nothing offered.
  EXPECT_FALSE(with("tools", nlohmann::ordered_json::array()).offers_tools());
}

TEST(ChatRequest, MalformedToolFieldsNameTheField) {
  const json base = json::parse(kToolRequest);
  const auto with = [&](const std::string& pointer, const json& value) {
    json body = base;
    body[json::json_pointer(pointer)] = value;
    return param_of(body);
  };
  const auto without = [&](const std::string& pointer) {
    json body = base;
    const json::json_pointer p(pointer);
    body[p.parent_pointer()].erase(p.back());
    return param_of(body);
  };
  EXPECT_EQ(param_of(base), "");
  EXPECT_EQ(with("/tools", "get_weather"), "tools");
  EXPECT_EQ(with("/tools/0", 1), "tools[0]");
  EXPECT_EQ(with("/tools/0/type", "retrieval"), "tools[0].type");
  EXPECT_EQ(without("/tools/1/function"), "tools[1].function");
  EXPECT_EQ(with("/tools/1/function/name", "get time"), "tools[1].function.name");
  EXPECT_EQ(with("/tools/1/function/name", std::string(65, 'a')), "tools[1].function.name");
  EXPECT_EQ(with("/tools/1/function/name", "get_weather"), "tools[1].function.name");  // twice
  EXPECT_EQ(with("/tools/0/function/parameters", "{}"), "tools[0].function.parameters");
  EXPECT_EQ(with("/tools/0/function/description", 5), "tools[0].function.description");
  EXPECT_EQ(with("/tool_choice", "always"), "tool_choice");
  EXPECT_EQ(with("/tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}),
            "tool_choice.function.name");
  EXPECT_EQ(with("/tool_choice", {{"type", "function"}}), "tool_choice.function.name");
  EXPECT_EQ(with("/tool_choice", {{"type", "code"}}), "tool_choice.type");
  EXPECT_EQ(with("/parallel_tool_calls", "yes"), "parallel_tool_calls");
  EXPECT_EQ(with("/functions", json::array({{{"name", "f"}}})), "functions");
  EXPECT_EQ(with("/messages/2/tool_calls", "get_weather"), "messages[2].tool_calls");
  EXPECT_EQ(without("/messages/2/tool_calls/0/id"), "messages[2].tool_calls[0].id");
  EXPECT_EQ(with("/messages/2/tool_calls/0/type", "code"), "messages[2].tool_calls[0].type");
  EXPECT_EQ(without("/messages/2/tool_calls/0/function/name"),
            "messages[2].tool_calls[0].function.name");
  EXPECT_EQ(with("/messages/2/tool_calls/0/function/arguments", 5),
            "messages[2].tool_calls[0].function.arguments");
  EXPECT_EQ(with("/messages/1/tool_calls", base["messages"][2]["tool_calls"]),
            "messages[1].tool_calls");  // only an assistant calls
  EXPECT_EQ(without("/messages/3/tool_call_id"), "messages[3].tool_call_id");
  EXPECT_EQ(without("/messages/3/content"), "messages[3].content");
  // "required" or a named function without tools.
  json no_tools = base;
  no_tools.erase("tools");
  no_tools["tool_choice"] = "required";
  EXPECT_EQ(param_of(no_tools), "tool_choice");
  no_tools["tool_choice"] = "auto";
  EXPECT_EQ(param_of(no_tools), "");
}

// The request above through the server's parser and ChatTemplate::render gives what Python's
// jinja2 renders for the "openai_tools" case of tests/fixtures/chat_templates (cases.json holds
// the messages as the parser hands them to the template).
TEST(ChatTemplate, ToolsRenderAsJinja2Does) {
  const nlohmann::ordered_json expected = nlohmann::ordered_json::parse(
      testing::read_text(testing::fixture("chat_templates/expected.json")));
  const ChatRequest r = parse_chat_request(nlohmann::ordered_json::parse(kToolRequest));
  const struct {
    const char* name;
    const char* bos;
    const char* eos;
  } templates[] = {{"llama-3.1", "<|begin_of_text|>", "<|eot_id|>"},
                   {"qwen2.5", "", "<|im_end|>"},
                   {"llama-3", "<|begin_of_text|>", "<|eot_id|>"}};
  for (const auto& t : templates) {
    SCOPED_TRACE(t.name);
    const ChatTemplate chat(
        testing::read_text(testing::fixture(std::string("chat_templates/") + t.name + ".jinja")),
        t.bos, t.eos);
    for (const bool gen : {false, true}) {
      const std::string key = std::string(t.name) + "/openai_tools/" + (gen ? "gen" : "nogen");
      ASSERT_TRUE(expected.contains(key)) << key;
      EXPECT_EQ(chat.render(r.messages, gen, r.tools), expected[key]["output"].get<std::string>());
    }
  }
}

ChatMessage user_hi() {
  ChatMessage m;
  m.role = "user";
  m.content = "hi";
  return m;
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
  EXPECT_EQ(chat->render({user_hi()}, true), "<s>hi</s>");
  write_config(dir.path(),
               {{"chat_template",
                 {{{"name", "tool_use"}, {"template", "T"}},
                  {{"name", "default"}, {"template", "D{{ add_generation_prompt }}"}}}}});
  chat = ChatTemplate::load(dir.path());
  ASSERT_TRUE(chat);
  EXPECT_EQ(chat->render({user_hi()}, false), "DFalse");
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
  const auto accept_every_piece = [](std::string_view) { return true; };
  const CompletionResult plain = engine.complete(r, accept_every_piece);
  EXPECT_EQ(plain.completion_tokens, 3);
  EXPECT_EQ(plain.finish_reason, "length");
  r.from_chat_template = true;
  const CompletionResult chat = engine.complete(r, accept_every_piece);
  EXPECT_EQ(chat.completion_tokens, 2);
  EXPECT_EQ(chat.finish_reason, "stop");
  EXPECT_EQ(chat.text, f.tokenizer->decode(std::vector<std::int32_t>{greedy[0]}, true));
}

}  // namespace
}  // namespace huddle::serve
