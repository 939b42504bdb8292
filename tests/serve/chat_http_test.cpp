// POST /v1/chat/completions over real HTTP against `huddle serve` on a chat-capable copy of
// llama-tiny (tests/serve/chat_model.h): greedy chat equals /v1/completions on the rendered
// prompt, streamed deltas reassemble to the reply, malformed messages and templates that refuse
// the messages are 400s naming why.
#include "chat_model.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <csignal>
#include <set>
#include <thread>

namespace huddle {
namespace {

using nlohmann::json;

// `huddle serve` on model directory `model`, on a free port, ready when constructed.
class ChatServer {
 public:
  explicit ChatServer(const std::filesystem::path& model) {
    process_ = std::make_unique<testing::BackgroundHuddle>(
        std::vector<std::string>{"serve", "--model", model.string(), "--model-id", "chat-tiny",
                                 "--port", "0", "--threads", "1"});
    const std::string address = process_->worker_address(30);
    EXPECT_FALSE(address.empty()) << "no 'listening on' line";
    port_ = std::stoi(address.substr(address.rfind(':') + 1));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      const auto res = client().Get("/health");
      if (res && res->status == 200) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "the server never became healthy";
  }
  ~ChatServer() { process_->kill(SIGTERM); }
  ChatServer(const ChatServer&) = delete;
  ChatServer& operator=(const ChatServer&) = delete;

  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(std::chrono::seconds(60));
    return c;
  }
  std::pair<int, json> post(const std::string& route, const json& body) const {
    const auto res = client().Post(route, body.dump(), "application/json");
    if (!res) return {-1, json()};
    return {res->status, json::parse(res->body, nullptr, false)};
  }
  std::pair<int, json> chat(const json& body) const { return post("/v1/chat/completions", body); }

 private:
  std::unique_ptr<testing::BackgroundHuddle> process_;
  int port_ = 0;
};

std::vector<std::string> sse_payloads(const std::string& body) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while ((at = body.find("data: ", at)) != std::string::npos) {
    const std::size_t end = body.find("\n\n", at);
    out.push_back(body.substr(at + 6, end - at - 6));
    at = end;
  }
  return out;
}

const json kMessages = json::array({{{"role", "system"}, {"content", "Be brief."}},
                                    {{"role", "user"}, {"content", "Hello there"}}});

// The Llama 3 template's prompt for kMessages, written out by hand.
const std::string kRendered =
    "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
    "<|start_header_id|>user<|end_header_id|>\n\nHello there<|eot_id|>"
    "<|start_header_id|>assistant<|end_header_id|>\n\n";

class ChatHttp : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    testing::make_chat_model(dir_->path());
    server_ = new ChatServer(dir_->path());
  }
  static void TearDownTestSuite() {
    delete server_;
    delete dir_;
  }
  static testing::TempDir* dir_;
  static ChatServer* server_;
};
testing::TempDir* ChatHttp::dir_ = nullptr;
ChatServer* ChatHttp::server_ = nullptr;

TEST_F(ChatHttp, GreedyChatEqualsCompletionOfTheRenderedPrompt) {
  const auto [status, chat] =
      server_->chat({{"messages", kMessages}, {"max_tokens", 8}, {"temperature", 0}});
  ASSERT_EQ(status, 200) << chat;
  EXPECT_EQ(chat["object"], "chat.completion");
  EXPECT_TRUE(chat["id"].get<std::string>().starts_with("chatcmpl-"));
  EXPECT_EQ(chat["model"], "chat-tiny");
  EXPECT_TRUE(chat["created"].is_number_integer());
  ASSERT_EQ(chat["choices"].size(), 1u);
  EXPECT_EQ(chat["choices"][0]["index"], 0);
  EXPECT_EQ(chat["choices"][0]["message"]["role"], "assistant");
  // The completion gets the tokenizer's BOS; the template's own BOS text is left out so that
  // both prompts are the same ids (the chat prompt does not double it).
  const std::string without_bos = kRendered.substr(std::string("<|begin_of_text|>").size());
  const auto [cstatus, completion] = server_->post(
      "/v1/completions", {{"prompt", without_bos}, {"max_tokens", 8}, {"temperature", 0}});
  ASSERT_EQ(cstatus, 200) << completion;
  EXPECT_EQ(chat["usage"]["prompt_tokens"], completion["usage"]["prompt_tokens"]);
  const std::string content = chat["choices"][0]["message"]["content"];
  const std::string text = completion["choices"][0]["text"];
  if (chat["usage"]["completion_tokens"] == completion["usage"]["completion_tokens"]) {
    EXPECT_EQ(content, text);
    EXPECT_EQ(chat["choices"][0]["finish_reason"], completion["choices"][0]["finish_reason"]);
  } else {
    // The chat reply ended at an end-of-turn token (<|eot_id|>) the completion went past.
    EXPECT_EQ(chat["choices"][0]["finish_reason"], "stop");
    EXPECT_TRUE(text.starts_with(content)) << content << " | " << text;
  }
  EXPECT_EQ(chat["usage"]["total_tokens"], chat["usage"]["prompt_tokens"].get<int>() +
                                               chat["usage"]["completion_tokens"].get<int>());
  // max_completion_tokens limits as max_tokens does.
  const auto [lstatus, limited] =
      server_->chat({{"messages", kMessages}, {"max_completion_tokens", 2}, {"temperature", 0}});
  ASSERT_EQ(lstatus, 200) << limited;
  EXPECT_LE(limited["usage"]["completion_tokens"].get<int>(), 2);
}

TEST_F(ChatHttp, StreamedDeltasReassembleToTheReply) {
  const json request = {{"messages", kMessages}, {"max_tokens", 10}, {"temperature", 0}};
  const auto [status, plain] = server_->chat(request);
  ASSERT_EQ(status, 200) << plain;
  json streamed = request;
  streamed["stream"] = true;
  streamed["stream_options"] = {{"include_usage", true}};
  const auto res =
      server_->client().Post("/v1/chat/completions", streamed.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_TRUE(testing::contains(res->get_header_value("Content-Type"), "text/event-stream"));
  const std::vector<std::string> payloads = sse_payloads(res->body);
  ASSERT_GE(payloads.size(), 4u) << res->body;
  EXPECT_EQ(payloads.back(), "[DONE]");
  const json first = json::parse(payloads[0]);
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  std::string content;
  std::string finish;
  std::set<std::string> ids;
  for (std::size_t i = 0; i + 2 < payloads.size(); ++i) {
    const json chunk = json::parse(payloads[i]);
    ids.insert(chunk["id"].get<std::string>());
    EXPECT_EQ(chunk["object"], "chat.completion.chunk");
    const json& choice = chunk["choices"][0];
    if (choice["delta"].contains("content"))
      content += choice["delta"]["content"].get<std::string>();
    if (!choice["finish_reason"].is_null()) {
      EXPECT_TRUE(finish.empty()) << "two finish reasons";
      finish = choice["finish_reason"].get<std::string>();
      EXPECT_EQ(i, payloads.size() - 3) << "the finish reason comes last";
    }
  }
  EXPECT_EQ(ids.size(), 1u);
  EXPECT_TRUE(ids.begin()->starts_with("chatcmpl-"));
  EXPECT_EQ(content, plain["choices"][0]["message"]["content"]);
  EXPECT_EQ(finish, plain["choices"][0]["finish_reason"]);
  const json usage = json::parse(payloads[payloads.size() - 2]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"], plain["usage"]);
}

TEST_F(ChatHttp, ContentPartsAreTheTextJoined) {
  const json parts = json::array(
      {{{"role", "user"},
        {"content",
         {{{"type", "text"}, {"text", "Hello"}}, {{"type", "text"}, {"text", "there"}}}}}});
  const json text = json::array({{{"role", "user"}, {"content", "Hello\nthere"}}});
  const auto a = server_->chat({{"messages", parts}, {"max_tokens", 6}, {"temperature", 0}});
  const auto b = server_->chat({{"messages", text}, {"max_tokens", 6}, {"temperature", 0}});
  ASSERT_EQ(a.first, 200) << a.second;
  ASSERT_EQ(b.first, 200) << b.second;
  EXPECT_EQ(a.second["choices"][0]["message"], b.second["choices"][0]["message"]);
  EXPECT_EQ(a.second["usage"], b.second["usage"]);
}

TEST_F(ChatHttp, MalformedMessagesAre400sNamingTheField) {
  const auto expect_param = [&](const json& body, const std::string& param) {
    const auto [status, error] = server_->chat(body);
    EXPECT_EQ(status, 400) << body;
    ASSERT_TRUE(error.contains("error")) << error;
    EXPECT_EQ(error["error"]["param"], param) << error;
    EXPECT_EQ(error["error"]["type"], "invalid_request_error");
    EXPECT_TRUE(testing::contains(error["error"]["message"].get<std::string>(), param)) << error;
  };
  expect_param({{"messages", {{{"content", "hi"}}}}}, "messages[0].role");
  expect_param({{"messages", {{{"role", "user"}, {"content", 42}}}}}, "messages[0].content");
  expect_param({{"messages", json::array()}}, "messages");
  expect_param(json::object(), "messages");
  expect_param({{"messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}}}}}}}},
               "messages[0].content[0].type");
  expect_param({{"messages", kMessages}, {"max_tokens", "many"}}, "max_tokens");
  const auto res =
      server_->client().Post("/v1/chat/completions", "{\"messages\": ", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  // A conversation longer than the context (128 positions).
  std::string long_text;
  for (int i = 0; i < 200; ++i) long_text += " word";
  const auto [status, too_long] =
      server_->chat({{"messages", {{{"role", "user"}, {"content", long_text}}}}});
  EXPECT_EQ(status, 400);
  EXPECT_EQ(too_long["error"]["code"], "context_length_exceeded") << too_long;
  // The server still answers.
  EXPECT_EQ(server_->chat({{"messages", kMessages}, {"max_tokens", 1}}).first, 200);
}

const json kTools =
    json::array({{{"type", "function"},
                  {"function",
                   {{"name", "get_time"},
                    {"description", "The time."},
                    {"parameters", {{"type", "object"}, {"properties", json::object()}}}}}}});

TEST_F(ChatHttp, ToolsForATemplateWithoutToolSupportAreA400) {
  // Llama 3's template ignores tools: the model would never hear of them.
  const auto [status, error] =
      server_->chat({{"messages", kMessages}, {"tools", kTools}, {"max_tokens", 2}});
  EXPECT_EQ(status, 400) << error;
  EXPECT_EQ(error["error"]["code"], "tools_unsupported") << error;
  EXPECT_EQ(error["error"]["param"], "tools") << error;
  // tool_choice "none" offers no tools, so the request is answered.
  const auto none = server_->chat(
      {{"messages", kMessages}, {"tools", kTools}, {"tool_choice", "none"}, {"max_tokens", 2}});
  EXPECT_EQ(none.first, 200) << none.second;
  // Malformed tool fields are 400s naming the field.
  json bad = kTools;
  bad[0]["function"]["name"] = "get time";
  const auto [bstatus, berror] = server_->chat({{"messages", kMessages}, {"tools", bad}});
  EXPECT_EQ(bstatus, 400);
  EXPECT_EQ(berror["error"]["param"], "tools[0].function.name") << berror;
  EXPECT_EQ(berror["error"]["type"], "invalid_request_error");
}

// A short template in the Hermes style (it names <tool_call>, here in a comment), so that a
// prompt with tools fits llama-tiny's 128 positions: the tools by name, the messages, the name
// of an assistant's call.
const char* const kToolTemplate =
    "{# calls: <tool_call> #}{% if tools %}T:{% for t in tools %}{{ t.function.name }}{% endfor %}"
    "\n{% endif %}{% for m in messages %}{{ m.role[:1] }}:{{ m.content }}"
    "{% if m.tool_calls %}{{ m.tool_calls[0].function.name }}(){% endif %}\n{% endfor %}"
    "{% if add_generation_prompt %}a:{% endif %}";

// The random fixture model does not call tools; the parsing of calls is tested on given replies
// (tool_calls_test.cpp). Here a request with tools must give a valid reply either way, streamed
// or not, alike.
TEST(ChatHttpTools, ARequestWithToolsGetsAValidReplyStreamedOrNot) {
  testing::TempDir dir;
  testing::make_chat_model(dir.path(), kToolTemplate);
  ChatServer server(dir.path());
  const json messages =
      json::array({{{"role", "user"}, {"content", "Time?"}},
                   {{"role", "assistant"},
                    {"content", nullptr},
                    {"tool_calls",
                     {{{"id", "call_1"},
                       {"type", "function"},
                       {"function", {{"name", "get_time"}, {"arguments", "{}"}}}}}}},
                   {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "noon"}}});
  const json request = {
      {"messages", messages}, {"tools", kTools}, {"max_tokens", 8}, {"temperature", 0}};
  const auto [status, reply] = server.chat(request);
  ASSERT_EQ(status, 200) << reply;
  const json& choice = reply["choices"][0];
  const json& message = choice["message"];
  EXPECT_EQ(message["role"], "assistant");
  const std::string finish = choice["finish_reason"];
  if (message.contains("tool_calls")) {
    EXPECT_EQ(finish, "tool_calls");
    for (const json& call : message["tool_calls"]) {
      EXPECT_EQ(call["type"], "function");
      EXPECT_EQ(call["function"]["name"], "get_time");
      EXPECT_TRUE(json::parse(call["function"]["arguments"].get<std::string>()).is_object());
    }
  } else {
    EXPECT_TRUE(message["content"].is_string()) << reply;
    EXPECT_TRUE(finish == "stop" || finish == "length") << finish;
  }
  // Streamed: the same content (and calls), ending with the same finish reason.
  json streamed = request;
  streamed["stream"] = true;
  const auto res =
      server.client().Post("/v1/chat/completions", streamed.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  const std::vector<std::string> payloads = sse_payloads(res->body);
  ASSERT_GE(payloads.size(), 3u) << res->body;
  EXPECT_EQ(payloads.back(), "[DONE]");
  std::string content;
  std::string streamed_finish;
  std::size_t calls = 0;
  for (std::size_t i = 0; i + 1 < payloads.size(); ++i) {
    const json chunk = json::parse(payloads[i]);
    ASSERT_TRUE(chunk.contains("choices")) << chunk;
    const json& delta = chunk["choices"][0]["delta"];
    if (delta.contains("content")) content += delta["content"].get<std::string>();
    if (delta.contains("tool_calls")) calls += delta["tool_calls"].size();
    if (!chunk["choices"][0]["finish_reason"].is_null())
      streamed_finish = chunk["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(streamed_finish, finish);
  EXPECT_EQ(content, message["content"].is_null() ? "" : message["content"].get<std::string>());
  EXPECT_EQ(calls, message.contains("tool_calls") ? message["tool_calls"].size() : 0u);
}

TEST(ChatHttpTemplates, ATemplateThatRefusesTheMessagesIsA400WithItsMessage) {
  testing::TempDir dir;
  testing::make_chat_model(
      dir.path(),
      testing::read_text(testing::fixture("chat_templates/mistral-7b-instruct-v0.2.jinja")));
  ChatServer server(dir.path());
  const auto [status, error] = server.chat({{"messages", kMessages}});
  EXPECT_EQ(status, 400) << error;
  EXPECT_EQ(error["error"]["code"], "chat_template_error") << error;
  EXPECT_EQ(error["error"]["message"],
            "Conversation roles must alternate user/assistant/user/assistant/...");
  const auto ok = server.chat({{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                               {"max_tokens", 2},
                               {"temperature", 0}});
  EXPECT_EQ(ok.first, 200) << ok.second;
}

TEST(ChatHttpTemplates, AnUnsupportedTemplateLeavesCompletionsWorking) {
  testing::TempDir dir;
  testing::make_chat_model(dir.path(), "{% for m in messages %}{{ m.content }}");  // no endfor
  ChatServer server(dir.path());
  const auto [status, error] = server.chat({{"messages", kMessages}});
  EXPECT_EQ(status, 400) << error;
  EXPECT_EQ(error["error"]["code"], "chat_template_unsupported") << error;
  EXPECT_TRUE(testing::contains(error["error"]["message"].get<std::string>(), "endfor")) << error;
  const auto completion =
      server.post("/v1/completions", {{"prompt", "Hello"}, {"max_tokens", 2}, {"temperature", 0}});
  EXPECT_EQ(completion.first, 200) << completion.second;
}

}  // namespace
}  // namespace huddle
