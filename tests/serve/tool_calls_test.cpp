// Tool calls in chat replies: the format chosen from the template, the parser on sample replies
// of each format (one call, several, text before, malformed JSON and other near misses as plain
// text), the streamed split agreeing with the whole one, and the OpenAI JSON built from a given
// reply (the seam that stands in for a model that emits calls: the fixture models are random).
#include "serve/tool_calls.h"
#include "chat_model.h"
#include "serve/chat_json.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <set>

namespace huddle::serve {
namespace {

using nlohmann::json;

const ToolCallSyntax kHermes{ToolCallFormat::kHermes, {"get_weather", "get_time"}, true};
const ToolCallSyntax kLlama{ToolCallFormat::kLlama3, {"get_weather", "get_time"}, true};
const ToolCallSyntax kGeneric{ToolCallFormat::kGeneric, {"get_weather", "get_time"}, true};

std::string template_source(const std::string& file) {
  return testing::read_text(testing::fixture("chat_templates/" + file));
}

void expect_plain(const std::string& text, const ToolCallSyntax& syntax) {
  const ParsedReply r = parse_tool_calls(text, syntax);
  EXPECT_TRUE(r.calls.empty()) << text;
  EXPECT_EQ(r.content.value_or("<none>"), text);
}

TEST(ToolCallFormat, ChosenFromTheTemplate) {
  EXPECT_EQ(tool_call_format(template_source("qwen2.5.jinja")), ToolCallFormat::kHermes);
  EXPECT_EQ(tool_call_format(template_source("llama-3.1.jinja")), ToolCallFormat::kLlama3);
  EXPECT_EQ(tool_call_format(template_source("llama-3.2.jinja")), ToolCallFormat::kLlama3);
  EXPECT_EQ(tool_call_format(template_source("llama-3.jinja")), ToolCallFormat::kGeneric);
  EXPECT_EQ(tool_call_format(template_source("phi-3-mini.jinja")), ToolCallFormat::kGeneric);
}

TEST(ToolCallParser, HermesOneCall) {
  const ParsedReply r = parse_tool_calls(
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\", "
      "\"unit\": \"celsius\"}}\n</tool_call>",
      kHermes);
  EXPECT_FALSE(r.content);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  // Serialised compactly, in the model's key order.
  EXPECT_EQ(r.calls[0].arguments, R"({"location":"Paris","unit":"celsius"})");
  EXPECT_TRUE(r.calls[0].id.starts_with("call_")) << r.calls[0].id;
  EXPECT_EQ(r.calls[0].id.size(), 21u);
}

TEST(ToolCallParser, HermesSeveralCallsAfterText) {
  const ParsedReply r = parse_tool_calls(
      "Let me look that up.\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"z\": 1, "
      "\"a\": [2]}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": "
      "{}}\n</tool_call>\n",
      kHermes);
  EXPECT_EQ(r.content.value_or("<none>"), "Let me look that up.");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments, R"({"z":1,"a":[2]})");
  EXPECT_EQ(r.calls[1].name, "get_time");
  EXPECT_EQ(r.calls[1].arguments, "{}");
  EXPECT_NE(r.calls[0].id, r.calls[1].id);
  // parallel_tool_calls false keeps the first.
  ToolCallSyntax one = kHermes;
  one.parallel = false;
  EXPECT_EQ(parse_tool_calls("<tool_call>{\"name\": \"get_time\"}</tool_call><tool_call>{\"name\": "
                             "\"get_weather\"}</tool_call>",
                             one)
                .calls.size(),
            1u);
}

TEST(ToolCallParser, HermesLenientForms) {
  // The turn ended before the closing tag; arguments as a JSON string; no arguments.
  ParsedReply r = parse_tool_calls(
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": \"{\\\"location\\\": "
      "\\\"Oslo\\\"}\"}",
      kHermes);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, R"({"location":"Oslo"})");
  r = parse_tool_calls("<tool_call>{\"name\": \"get_time\"}</tool_call>", kHermes);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, "{}");
}

TEST(ToolCallParser, HermesNearMissesArePlainText) {
  expect_plain("The weather is fine.", kHermes);
  expect_plain("", kHermes);
  // Malformed JSON, a function not offered, arguments not an object, text after the calls, a
  // call object without a name.
  expect_plain(
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": }\n</tool_call>",
      kHermes);
  expect_plain("<tool_call>{\"name\": \"rm_rf\", \"arguments\": {}}</tool_call>", kHermes);
  expect_plain("<tool_call>{\"name\": \"get_time\", \"arguments\": [1]}</tool_call>", kHermes);
  expect_plain("<tool_call>{\"name\": \"get_time\"}</tool_call> and more text", kHermes);
  expect_plain("<tool_call>{\"arguments\": {}}</tool_call>", kHermes);
  expect_plain("<tool_call></tool_call>", kHermes);
  // Llama's form is not a call for a Hermes model.
  expect_plain("{\"name\": \"get_time\", \"parameters\": {}}", kHermes);
}

TEST(ToolCallParser, LlamaJson) {
  ParsedReply r = parse_tool_calls(
      "{\"name\": \"get_weather\", \"parameters\": {\"location\": \"Paris\"}}", kLlama);
  EXPECT_FALSE(r.content);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments, R"({"location":"Paris"})");
  // After <|python_tag|>, with text before it; several separated by ';'; "arguments" too;
  // braces inside strings.
  r = parse_tool_calls(
      "Checking.<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"location\": \"}{\"}}; "
      "{\"name\": \"get_time\", \"arguments\": {}}",
      kLlama);
  EXPECT_EQ(r.content.value_or("<none>"), "Checking.");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].arguments, R"({"location":"}{"})");
  EXPECT_EQ(r.calls[1].name, "get_time");
  r = parse_tool_calls("  \n{\"type\": \"function\", \"name\": \"get_time\", \"parameters\": {}}\n",
                       kLlama);
  EXPECT_EQ(r.calls.size(), 1u);
}

TEST(ToolCallParser, LlamaNearMissesArePlainText) {
  expect_plain("Paris is sunny today.", kLlama);
  // A call after prose without the python tag is prose; malformed or unclosed JSON; an unknown
  // function; trailing text.
  expect_plain("Sure: {\"name\": \"get_time\", \"parameters\": {}}", kLlama);
  expect_plain("{\"name\": \"get_weather\", \"parameters\": {\"location\": \"Paris\"}", kLlama);
  expect_plain("{\"name\": \"get_weather\", \"parameters\": {\"location\": Paris}}", kLlama);
  expect_plain("{\"name\": \"launch\", \"parameters\": {}}", kLlama);
  expect_plain("{\"name\": \"get_time\", \"parameters\": {}} is what I would call", kLlama);
  expect_plain("{\"answer\": 42}", kLlama);
}

TEST(ToolCallParser, GenericTakesEitherForm) {
  EXPECT_EQ(parse_tool_calls("<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>",
                             kGeneric)
                .calls.size(),
            1u);
  EXPECT_EQ(parse_tool_calls("{\"name\": \"get_time\", \"parameters\": {}}", kGeneric).calls.size(),
            1u);
  expect_plain("Nothing to call.", kGeneric);
}

// The reply streamed in pieces of `step` bytes: what push() let out as it came, and finish().
struct Streamed {
  std::string early;  // content sent before the end
  ParsedReply rest;
};

Streamed stream_in_pieces(const std::string& text, const ToolCallSyntax& syntax, std::size_t step) {
  ToolCallStream stream(syntax);
  Streamed out;
  for (std::size_t at = 0; at < text.size(); at += step)
    out.early += stream.push(std::string_view(text).substr(at, step));
  out.rest = stream.finish();
  return out;
}

TEST(ToolCallStream, AgreesWithTheWholeParseInAnyPieces) {
  const std::vector<std::pair<std::string, ToolCallSyntax>> samples = {
      {"Let me look.\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>",
       kHermes},
      {"<tool_call>{\"name\": \"get_time\"}</tool_call><tool_call>{\"name\": \"get_weather\", "
       "\"arguments\": {\"location\": \"Rome\"}}</tool_call>",
       kHermes},
      {"No call, just text with a < and <tool and <tool_cal in it.  ", kHermes},
      {"<tool_call>{\"name\": broken}</tool_call>", kHermes},
      {"\n {\"name\": \"get_weather\", \"parameters\": {\"location\": \"Paris\"}}", kLlama},
      {"Hmm.<|python_tag|>{\"name\": \"get_time\", \"parameters\": {}}", kLlama},
      {"{\"not\": \"a call\"} but text", kLlama},
      {"Plain <|python answer", kLlama},
      {"Either <tool_call>{\"name\": \"get_time\"}</tool_call>", kGeneric},
  };
  for (const auto& [text, syntax] : samples) {
    const ParsedReply whole = parse_tool_calls(text, syntax);
    for (const std::size_t step : {1u, 2u, 3u, 7u, 1000u}) {
      SCOPED_TRACE(text + " in pieces of " + std::to_string(step));
      const Streamed s = stream_in_pieces(text, syntax, step);
      EXPECT_EQ(s.early + s.rest.content.value_or(""), whole.content.value_or(""));
      ASSERT_EQ(s.rest.calls.size(), whole.calls.size());
      for (std::size_t i = 0; i < whole.calls.size(); ++i) {
        EXPECT_EQ(s.rest.calls[i].name, whole.calls[i].name);
        EXPECT_EQ(s.rest.calls[i].arguments, whole.calls[i].arguments);
      }
      if (!whole.calls.empty()) {
        EXPECT_FALSE(testing::contains(s.early, "<tool_call")) << "part of a call sent as text";
      }
    }
  }
}

// Every prefix of a call (a reply cut off by max_tokens) and bytes that are not text: never a
// throw, and the streamed split still agrees with the whole one.
TEST(ToolCallStream, TruncatedAndHostileRepliesAgree) {
  const std::string call =
      "Ok.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"q\": \"a\\\"}{\"}}"
      "\n</tool_call><|python_tag|>{\"name\": \"get_time\", \"parameters\": {}};";
  std::string junk = "{{{\"\\";
  for (int i = 0; i < 64; ++i) junk += static_cast<char>(i * 37 % 256);
  for (const std::string& text : {call, junk}) {
    for (const ToolCallSyntax& syntax : {kHermes, kLlama, kGeneric}) {
      for (std::size_t n = 0; n <= text.size(); ++n) {
        const std::string prefix = text.substr(0, n);
        SCOPED_TRACE(prefix);
        const ParsedReply whole = parse_tool_calls(prefix, syntax);
        const Streamed s = stream_in_pieces(prefix, syntax, 3);
        EXPECT_EQ(s.early + s.rest.content.value_or(""), whole.content.value_or(""));
        EXPECT_EQ(s.rest.calls.size(), whole.calls.size());
      }
    }
  }
}

TEST(ToolCallStream, PlainTextStreamsAsItComes) {
  ToolCallStream hermes(kHermes);
  EXPECT_EQ(hermes.push("Hello"), "Hello");
  EXPECT_EQ(hermes.push(" there <tool"), " there");  // may begin a call: held
  EXPECT_EQ(hermes.push("box>"), " <toolbox>");
  EXPECT_FALSE(hermes.finish().content);
  // Llama: a reply that opens with '{' may be a call as a whole, so it waits for the end.
  ToolCallStream llama(kLlama);
  EXPECT_EQ(llama.push("{\"a\""), "");
  EXPECT_EQ(llama.push(": 1}"), "");
  EXPECT_EQ(llama.finish().content.value_or(""), "{\"a\": 1}");
}

const ResponseHeader kHeader{"chatcmpl-1", 1700000000, "m"};

TEST(ToolCallJson, TheResponseForAReplyThatCallsTools) {
  CompletionResult result;
  result.text =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": "
      "\"Paris\"}}\n</tool_call>";
  result.finish_reason = "stop";
  result.prompt_tokens = 10;
  result.completion_tokens = 20;
  const json j = chat_completion_json(kHeader, result, parse_tool_calls(result.text, kHermes));
  const json& choice = j["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_EQ(choice["message"]["role"], "assistant");
  EXPECT_TRUE(choice["message"]["content"].is_null());
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
  const json& call = choice["message"]["tool_calls"][0];
  EXPECT_TRUE(call["id"].get<std::string>().starts_with("call_"));
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(call["function"]["arguments"].get<std::string>()),
            json({{"location", "Paris"}}));
  EXPECT_FALSE(call.contains("index"));
  EXPECT_EQ(j["usage"]["total_tokens"], 30);
  // Text before the call is the content; a reply without calls is content as before.
  result.text = "One moment. " + result.text;
  EXPECT_EQ(chat_completion_json(
                kHeader, result,
                parse_tool_calls(result.text, kHermes))["choices"][0]["message"]["content"],
            "One moment.");
  result.text = "Sunny.";
  result.finish_reason = "length";
  const json plain = chat_completion_json(kHeader, result, parse_tool_calls(result.text, kHermes));
  EXPECT_EQ(plain["choices"][0]["message"], json({{"role", "assistant"}, {"content", "Sunny."}}));
  EXPECT_EQ(plain["choices"][0]["finish_reason"], "length");
}

// Reassembles streamed chunks as the openai clients do (content concatenated, tool calls by
// index, arguments concatenated).
json reassemble(const std::vector<json>& chunks, std::string& finish) {
  std::string content;
  json calls = json::array();
  for (const json& chunk : chunks) {
    EXPECT_EQ(chunk["object"], "chat.completion.chunk");
    const json& choice = chunk["choices"][0];
    const json& delta = choice["delta"];
    if (delta.contains("content")) content += delta["content"].get<std::string>();
    if (delta.contains("tool_calls")) {
      for (const json& c : delta["tool_calls"]) {
        const std::size_t i = c["index"];
        if (calls.size() <= i) calls.push_back({{"function", {{"arguments", ""}}}});
        if (c.contains("id")) calls[i]["id"] = c["id"];
        if (c.contains("type")) calls[i]["type"] = c["type"];
        if (c["function"].contains("name")) calls[i]["function"]["name"] = c["function"]["name"];
        calls[i]["function"]["arguments"] = calls[i]["function"]["arguments"].get<std::string>() +
                                            c["function"].value("arguments", "");
      }
    }
    if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
  }
  return {{"content", content}, {"tool_calls", calls}};
}

TEST(ToolCallJson, StreamedChunksReassembleToTheResponse) {
  const std::string text =
      "Checking both.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": "
      "\"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": "
      "{\"tz\": \"CET\"}}\n</tool_call>";
  ToolCallStream stream(kHermes);
  std::vector<json> chunks;
  for (std::size_t at = 0; at < text.size(); at += 5) {
    const std::string sure = stream.push(std::string_view(text).substr(at, 5));
    if (!sure.empty()) chunks.push_back(chat_chunk_json(kHeader, {{"content", sure}}, ""));
  }
  const std::vector<json> last = chat_finish_chunks(kHeader, stream.finish(), "stop");
  chunks.insert(chunks.end(), last.begin(), last.end());
  EXPECT_TRUE(last.back()["choices"][0]["delta"].empty());
  std::string finish;
  const json got = reassemble(chunks, finish);
  EXPECT_EQ(finish, "tool_calls");
  CompletionResult result;
  result.text = text;
  result.finish_reason = "stop";
  const json whole =
      chat_completion_json(kHeader, result, parse_tool_calls(text, kHermes))["choices"][0];
  EXPECT_EQ(got["content"], whole["message"]["content"]);
  ASSERT_EQ(got["tool_calls"].size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(got["tool_calls"][i]["type"], "function");
    EXPECT_TRUE(got["tool_calls"][i]["id"].get<std::string>().starts_with("call_"));
    EXPECT_EQ(got["tool_calls"][i]["function"], whole["message"]["tool_calls"][i]["function"]);
  }
  // Without calls the finish chunk keeps the engine's reason.
  const std::vector<json> plain = chat_finish_chunks(kHeader, ParsedReply{"tail", {}}, "length");
  ASSERT_EQ(plain.size(), 2u);
  EXPECT_EQ(plain[0]["choices"][0]["delta"]["content"], "tail");
  EXPECT_EQ(plain[1]["choices"][0]["finish_reason"], "length");
}

}  // namespace
}  // namespace huddle::serve
