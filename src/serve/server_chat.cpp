// POST /v1/chat/completions: the messages through the model's chat template, then generation as
// for /v1/completions (ending also at the template's end-of-turn tokens).
#include "serve/chat_json.h"
#include "serve/chat_request.h"
#include "serve/chat_template.h"
#include "serve/http_helpers.h"
#include "serve/server.h"

#include <fmt/format.h>
#include <httplib.h>

namespace huddle::serve {
namespace {

using nlohmann::json;

// The prompt the template makes of `messages`; 400 (code chat_template_error) when the template
// refuses them (e.g. Mistral's "Conversation roles must alternate ...") or fails on them.
std::string render_prompt(const ChatTemplate& chat, const std::vector<ChatMessage>& messages) {
  try {
    return chat.render(messages, /*add_generation_prompt=*/true);
  } catch (const jinja::TemplateError& e) {
    const std::string message = e.kind() == jinja::TemplateError::Kind::kRaised
                                    ? e.message()
                                    : fmt::format("the chat template failed: {}", e.what());
    throw RequestError(400, message, "invalid_request_error", "messages", "chat_template_error");
  }
}

// Streams one chat reply as Server-Sent Events: the role, the content as it comes, the finish
// reason, the usage (when asked), [DONE].
void stream_chat(httplib::Response& res, Engine& engine, CompletionRequest request,
                 const ResponseHeader& header) {
  stream_events(
      res, engine, std::move(request),
      {.first = chat_chunk_json(header, {{"role", "assistant"}, {"content", ""}}, ""),
       .piece =
           [header](const std::string& text) {
             return chat_chunk_json(header, {{"content", text}}, "");
           },
       .finish =
           [header](const std::string& reason) {
             return chat_chunk_json(header, json::object(), reason);
           },
       .usage = [header](const CompletionResult& r) { return chat_usage_chunk_json(header, r); }});
}

}  // namespace

void Server::add_chat_route() {
  http_->Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    Engine* engine = engine_.load();
    if (engine == nullptr) {
      throw RequestError(503, "the model is still loading", "unavailable_error", "", "loading");
    }
    ChatRequest chat = parse_chat_request(parse_json_body(req.body));
    if (options_.chat_template == nullptr) {
      if (!options_.chat_template_error.empty()) {
        throw RequestError(400,
                           fmt::format("the chat template of {} is not supported: {}",
                                       options_.model_id, options_.chat_template_error),
                           "invalid_request_error", "messages", "chat_template_unsupported");
      }
      throw RequestError(400,
                         fmt::format("{} has no chat template (tokenizer_config.json "
                                     "chat_template); use /v1/completions",
                                     options_.model_id),
                         "invalid_request_error", "messages", "no_chat_template");
    }
    CompletionRequest request = std::move(chat.generation);
    request.prompt_text = render_prompt(*options_.chat_template, chat.messages);
    engine->prompt_ids(request);  // 400 before any stream starts
    ResponseHeader header{new_chat_completion_id(), unix_now(), options_.model_id};
    if (request.stream) {
      stream_chat(res, *engine, std::move(request), std::move(header));
      return;
    }
    const CompletionResult result =
        engine->complete(request, [](std::string_view) { return true; });
    send_json(res, 200, chat_completion_json(header, result));
  });
}

}  // namespace huddle::serve
