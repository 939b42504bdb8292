#include "serve/openai_json.h"

#include <fmt/format.h>

#include <random>

namespace huddle::serve {
namespace {

using nlohmann::json;

json null_if_empty(const std::string& s) {
  return s.empty() ? json(nullptr) : json(s);
}

}  // namespace

json response_base(const ResponseHeader& h, const char* object) {
  return {{"id", h.id}, {"object", object}, {"created", h.created}, {"model", h.model}};
}

json usage_json(const CompletionResult& r) {
  return {{"prompt_tokens", r.prompt_tokens},
          {"completion_tokens", r.completion_tokens},
          {"total_tokens", r.prompt_tokens + r.completion_tokens}};
}

std::string new_completion_id() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("cmpl-{:016x}", rng());
}

json completion_json(const ResponseHeader& header, const CompletionResult& result) {
  json j = response_base(header, "text_completion");
  j["choices"] = json::array({{{"text", result.text},
                               {"index", 0},
                               {"logprobs", nullptr},
                               {"finish_reason", result.finish_reason}}});
  j["usage"] = usage_json(result);
  return j;
}

json completion_chunk_json(const ResponseHeader& header, const std::string& text,
                           const std::string& finish_reason) {
  json j = response_base(header, "text_completion");
  j["choices"] = json::array({{{"text", text},
                               {"index", 0},
                               {"logprobs", nullptr},
                               {"finish_reason", null_if_empty(finish_reason)}}});
  return j;
}

json usage_chunk_json(const ResponseHeader& header, const CompletionResult& result) {
  json j = response_base(header, "text_completion");
  j["choices"] = json::array();
  j["usage"] = usage_json(result);
  return j;
}

json models_json(const std::string& model, std::int64_t created) {
  return {
      {"object", "list"},
      {"data",
       json::array(
           {{{"id", model}, {"object", "model"}, {"created", created}, {"owned_by", "huddle"}}})}};
}

json error_json(const std::string& message, const std::string& type, const std::string& param,
                const std::string& code) {
  return {{"error",
           {{"message", message},
            {"type", type},
            {"param", null_if_empty(param)},
            {"code", null_if_empty(code)}}}};
}

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace huddle::serve
