// Tool calls end to end over HTTP, in process: the Server and Engine as `huddle serve` runs them,
// with the real Qwen2.5 and Llama 3.1 templates, over a scripted StepRunner whose "model" writes
// a given reply (the fixture models are random and never call a tool). The reply comes back as
// message.tool_calls, streamed as tool_calls deltas, and as plain text with tool_choice "none".
#include "chat_model.h"
#include "serve/chat_template.h"
#include "serve/server.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <thread>

namespace huddle::serve {
namespace {

using nlohmann::json;

constexpr std::int32_t kVocab = 512;
constexpr std::int32_t kEndOfText = 510;  // llama-tiny's eos: ends every scripted reply

// Answers every request with `script` (token ids) then kEndOfText: each step's logits are one-hot
// on the next id, so greedy and sampled decoding alike pick it.
class ScriptedRunner final : public StepRunner {
 public:
  explicit ScriptedRunner(std::vector<std::int32_t> script) : script_(std::move(script)) {}
  Tensor forward(std::span<const std::int32_t> ids, bool all_rows) override {
    const std::int32_t next = step_ < script_.size() ? script_[step_] : kEndOfText;
    ++step_;
    position_ += static_cast<std::int64_t>(ids.size());
    const std::size_t rows = all_rows ? ids.size() : 1;
    std::vector<float> logits(rows * kVocab, -30.0f);
    logits[(rows - 1) * kVocab + static_cast<std::size_t>(next)] = 30.0f;
    return Tensor::from_f32({static_cast<std::int64_t>(rows), kVocab}, logits);
  }
  void reset() override {
    step_ = 0;
    position_ = 0;
  }
  std::int64_t position() const override { return position_; }
  std::int64_t max_positions() const override { return 8192; }

 private:
  std::vector<std::int32_t> script_;
  std::size_t step_ = 0;
  std::int64_t position_ = 0;
};

// The chat model with `template_file`'s template, served in process; the model replies `reply`.
class ScriptedChat {
 public:
  ScriptedChat(const std::string& template_file, const std::string& reply) {
    testing::make_chat_model(
        dir_.path(), testing::read_text(testing::fixture("chat_templates/" + template_file)));
    tokenizer_ = Tokenizer::load(dir_.path());
    chat_ = ChatTemplate::load(dir_.path());
    const std::vector<std::int32_t> ids = tokenizer_->encode(reply, /*add_special=*/false);
    EXPECT_EQ(tokenizer_->decode(ids, true), reply) << "the tokenizer must spell the reply back";
    runner_ = std::make_unique<ScriptedRunner>(ids);
    EngineOptions options;
    options.context = 8192;
    options.vocab_size = kVocab;
    options.stop_ids = {kEndOfText};
    options.chat_stop_ids = end_of_turn_ids(*chat_, *tokenizer_);
    engine_ = std::make_unique<Engine>(*runner_, *tokenizer_, options);
    ServerOptions server_options;
    server_options.port = 0;
    server_options.model_id = "scripted";
    server_options.has_chat_template = true;
    server_options.chat_template = &*chat_;
    server_ = std::make_unique<Server>(server_options);
    port_ = server_->bind();
    server_->set_engine(engine_.get());
    http_ = std::thread([this] { server_->listen(); });
  }
  ~ScriptedChat() {
    server_->stop();
    http_.join();
  }
  ScriptedChat(const ScriptedChat&) = delete;
  ScriptedChat& operator=(const ScriptedChat&) = delete;

  // The response's status and body (the raw body for streams).
  std::pair<int, std::string> post(const json& body) {
    httplib::Client client("127.0.0.1", port_);
    client.set_read_timeout(std::chrono::seconds(60));
    for (int i = 0; i < 100; ++i) {  // listen() may not have started yet
      const auto res = client.Post("/v1/chat/completions", body.dump(), "application/json");
      if (res) return {res->status, res->body};
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return {-1, ""};
  }

 private:
  testing::TempDir dir_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::optional<ChatTemplate> chat_;
  std::unique_ptr<ScriptedRunner> runner_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<Server> server_;
  std::thread http_;
  int port_ = 0;
};

const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Current weather.",
    "parameters": {"type": "object", "properties": {"location": {"type": "string"}},
                   "required": ["location"]}}}])");

json request(bool stream, const char* tool_choice = "auto") {
  return {{"messages", {{{"role", "user"}, {"content", "Weather in Paris?"}}}},
          {"tools", kTools},
          {"tool_choice", tool_choice},
          {"temperature", 0},
          {"stream", stream}};
}

// The call a reply should hold: get_weather({"location": "Paris"}).
void expect_weather_call(const json& call) {
  EXPECT_TRUE(call["id"].get<std::string>().starts_with("call_")) << call;
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(call["function"]["arguments"].get<std::string>()),
            json({{"location", "Paris"}}));
}

std::vector<json> sse_chunks(const std::string& body) {
  std::vector<json> out;
  std::size_t at = 0;
  while ((at = body.find("data: ", at)) != std::string::npos) {
    const std::size_t end = body.find("\n\n", at);
    const std::string payload = body.substr(at + 6, end - at - 6);
    if (payload != "[DONE]") out.push_back(json::parse(payload));
    at = end;
  }
  return out;
}

void expect_call_reply(ScriptedChat& chat, const std::string& content_before) {
  const auto [status, body] = chat.post(request(false));
  ASSERT_EQ(status, 200) << body;
  const json choice = json::parse(body)["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  if (content_before.empty()) {
    EXPECT_TRUE(choice["message"]["content"].is_null()) << choice;
  } else {
    EXPECT_EQ(choice["message"]["content"], content_before);
  }
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << choice;
  expect_weather_call(choice["message"]["tool_calls"][0]);

  const auto [sstatus, sbody] = chat.post(request(true));
  ASSERT_EQ(sstatus, 200) << sbody;
  std::string content;
  std::vector<json> calls;
  std::string finish;
  for (const json& chunk : sse_chunks(sbody)) {
    const json& c = chunk["choices"][0];
    if (c["delta"].contains("content")) content += c["delta"]["content"].get<std::string>();
    if (c["delta"].contains("tool_calls")) {
      for (const json& call : c["delta"]["tool_calls"]) {
        EXPECT_EQ(call["index"], calls.size());
        calls.push_back(call);
      }
    }
    if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
  }
  EXPECT_EQ(content, content_before);
  EXPECT_EQ(finish, "tool_calls");
  ASSERT_EQ(calls.size(), 1u) << sbody;
  expect_weather_call(calls[0]);
}

TEST(ToolCallsHttp, Qwen25HermesReplyIsAToolCall) {
  ScriptedChat chat("qwen2.5.jinja",
                    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": "
                    "\"Paris\"}}\n</tool_call>");
  expect_call_reply(chat, "");
  // tool_choice "none": no tools offered, nothing parsed: the reply is text.
  const auto [status, body] = chat.post(request(false, "none"));
  ASSERT_EQ(status, 200) << body;
  const json choice = json::parse(body)["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "stop");
  EXPECT_FALSE(choice["message"].contains("tool_calls"));
  EXPECT_TRUE(testing::contains(choice["message"]["content"].get<std::string>(), "<tool_call>"));
}

TEST(ToolCallsHttp, TextBeforeAHermesCallIsTheContent) {
  ScriptedChat chat("qwen2.5.jinja",
                    "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                    "{\"location\": \"Paris\"}}\n</tool_call>");
  expect_call_reply(chat, "Let me check.");
}

TEST(ToolCallsHttp, Llama31JsonReplyIsAToolCall) {
  ScriptedChat chat("llama-3.1.jinja",
                    "{\"name\": \"get_weather\", \"parameters\": {\"location\": \"Paris\"}}");
  expect_call_reply(chat, "");
}

TEST(ToolCallsHttp, AReplyThatIsNotACallIsText) {
  const std::string reply = "{\"name\": \"get_weather\", \"parameters\": {\"location\": Paris}}";
  ScriptedChat chat("llama-3.1.jinja", reply);
  const auto [status, body] = chat.post(request(false));
  ASSERT_EQ(status, 200) << body;
  const json choice = json::parse(body)["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "stop");
  EXPECT_EQ(choice["message"]["content"], reply);
  EXPECT_FALSE(choice["message"].contains("tool_calls"));
  // Streamed: held back as a possible call, then sent as text.
  std::string content;
  for (const json& chunk : sse_chunks(chat.post(request(true)).second)) {
    const json& delta = chunk["choices"][0]["delta"];
    EXPECT_FALSE(delta.contains("tool_calls"));
    if (delta.contains("content")) content += delta["content"].get<std::string>();
  }
  EXPECT_EQ(content, reply);
}

}  // namespace
}  // namespace huddle::serve
