// POST /v1/chat/completions: the messages (and tools) through the model's chat template, then
// generation as for /v1/completions (ending also at the template's end-of-turn tokens), the reply
// split into content and tool calls when tools were offered (tool_calls.h).
#include "serve/chat_json.h"
#include "serve/chat_request.h"
#include "serve/chat_template.h"
#include "serve/http_helpers.h"
#include "serve/server.h"
#include "serve/tool_calls.h"

#include <fmt/format.h>
#include <httplib.h>

namespace huddle::serve {
namespace {

using nlohmann::json;

// The prompt the template makes of `messages`; 400 (code chat_template_error) when the template
// refuses them (e.g. Mistral's "Conversation roles must alternate ...") or fails on them.
std::string render_prompt(const ChatTemplate& chat, const std::vector<ChatMessage>& messages,
                          const nlohmann::ordered_json& tools = nullptr) {
  try {
    return chat.render(messages, /*add_generation_prompt=*/true, tools);
  } catch (const jinja::TemplateError& e) {
    const std::string message = e.kind() == jinja::TemplateError::Kind::kRaised
                                    ? e.message()
                                    : fmt::format("the chat template failed: {}", e.what());
    throw RequestError(400, message, "invalid_request_error", "messages", "chat_template_error");
  }
}

// The prompt with the tools offered; 400 (code tools_unsupported) when the template ignores
// them (it renders the same without them): the model would not know of them.
std::string render_with_tools(const ChatTemplate& chat, const ChatRequest& request,
                              const std::string& model_id) {
  std::string prompt = render_prompt(chat, request.messages, request.tools);
  if (prompt == render_prompt(chat, request.messages)) {
    throw RequestError(400,
                       fmt::format("the chat template of {} does not support tools (it renders "
                                   "the same without them)",
                                   model_id),
                       "invalid_request_error", "tools", "tools_unsupported");
  }
  return prompt;
}

// Streams one chat reply as Server-Sent Events: the role, the content as it comes, with
// `tools` the calls once the reply is complete, the finish reason, the usage (when asked),
// [DONE]. Text that may begin a call is held back until the end (ToolCallStream).
void stream_chat(httplib::Response& res, Engine& engine, CompletionRequest request,
                 const ResponseHeader& header, std::optional<ToolCallSyntax> tools,
                 ClientConnection connection) {
  auto content = [header](const std::string& text) {
    return chat_chunk_json(header, {{"content", text}}, "");
  };
  StreamEvents events{
      .first = chat_chunk_json(header, {{"role", "assistant"}, {"content", ""}}, ""),
      .piece = [content](const std::string& text) { return std::vector<json>{content(text)}; },
      .finish =
          [header](const std::string& reason) {
            return std::vector<json>{chat_chunk_json(header, json::object(), reason)};
          },
      .usage = [header](const CompletionResult& r) { return chat_usage_chunk_json(header, r); }};
  if (tools) {
    // Both callbacks share the stream (std::function needs copyable callables) and run on the
    // one thread that streams this response.
    auto stream = std::make_shared<ToolCallStream>(std::move(*tools));
    events.piece = [stream, content](const std::string& text) {
      const std::string sure = stream->push(text);
      return sure.empty() ? std::vector<json>{} : std::vector<json>{content(sure)};
    };
    events.finish = [stream, header](const std::string& reason) {
      return chat_finish_chunks(header, stream->finish(), reason);
    };
  }
  stream_events(res, engine, std::move(request), std::move(events), connection);
}

}  // namespace

void Server::add_chat_route() {
  http_->Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    Engine* engine = engine_.load();
    if (engine == nullptr) {
      throw RequestError(503, "the model is still loading", "unavailable_error", "", "loading");
    }
    ChatRequest chat = parse_chat_request(parse_ordered_json_body(req.body));
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
    const ChatTemplate& chat_template = *options_.chat_template;
    CompletionRequest request = std::move(chat.generation);
    std::optional<ToolCallSyntax> tools;
    if (chat.offers_tools()) {
      request.prompt_text = render_with_tools(chat_template, chat, options_.model_id);
      tools = ToolCallSyntax{tool_call_format(chat_template.source()), chat.tool_names(),
                             chat.parallel_tool_calls};
    } else {
      request.prompt_text = render_prompt(chat_template, chat.messages);
    }
    engine->prompt_ids(request);  // 400 before any stream starts
    ResponseHeader header{new_chat_completion_id(), unix_now(), options_.model_id};
    const ClientConnection connection(req);
    if (request.stream) {
      stream_chat(res, *engine, std::move(request), std::move(header), std::move(tools),
                  connection);
      return;
    }
    const std::optional<CompletionResult> result = complete_for(*engine, request, connection);
    if (!result) return;  // the client left: nothing to send it
    send_json(res, 200,
              chat_completion_json(
                  header, *result,
                  tools ? parse_tool_calls(result->text, *tools) : ParsedReply{result->text, {}}));
  });
}

}  // namespace huddle::serve
