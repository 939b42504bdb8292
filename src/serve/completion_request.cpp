#include "serve/completion_request.h"

#include "serve/request_error.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <limits>

namespace huddle::serve {
namespace {

using nlohmann::json;

RequestError bad_field(const std::string& field, const std::string& what) {
  return RequestError(400, fmt::format("'{}': {}", field, what), "invalid_request_error", field);
}

// The field's value, or nullptr when absent or null (OpenAI treats null as "not given").
const json* field(const json& body, const char* name) {
  const auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

double number(const json& value, const std::string& name, double lo, double hi) {
  if (!value.is_number()) throw bad_field(name, "expected a number");
  const double v = value.get<double>();
  if (!(v >= lo && v <= hi))
    throw bad_field(name, fmt::format("{} is outside [{}, {}]", v, lo, hi));
  return v;
}

std::int64_t integer(const json& value, const std::string& name, std::int64_t lo, std::int64_t hi) {
  if (!value.is_number_integer()) throw bad_field(name, "expected an integer");
  if (value.is_number_unsigned() && value.get<std::uint64_t>() > static_cast<std::uint64_t>(hi)) {
    throw bad_field(name, fmt::format("{} is larger than {}", value.get<std::uint64_t>(), hi));
  }
  const auto v = value.get<std::int64_t>();
  if (v < lo || v > hi) throw bad_field(name, fmt::format("{} is outside [{}, {}]", v, lo, hi));
  return v;
}

void parse_prompt(const json& body, CompletionRequest& r) {
  const json* prompt = field(body, "prompt");
  if (!prompt) throw bad_field("prompt", "required");
  if (prompt->is_string()) {
    r.prompt_text = prompt->get<std::string>();
    if (r.prompt_text->empty()) throw bad_field("prompt", "empty");
    return;
  }
  if (!prompt->is_array()) throw bad_field("prompt", "expected a string or a list of token ids");
  if (prompt->empty()) throw bad_field("prompt", "empty");
  if ((*prompt)[0].is_string() || (*prompt)[0].is_array())
    throw bad_field("prompt", "several prompts in one request are not supported; send one each");
  for (std::size_t i = 0; i < prompt->size(); ++i) {
    r.prompt_ids.push_back(static_cast<std::int32_t>(integer(
        (*prompt)[i], fmt::format("prompt[{}]", i), 0, std::numeric_limits<std::int32_t>::max())));
  }
}

// OpenAI fields whose non-default values would change the answer in ways this server does not
// implement: refused rather than silently ignored.
void refuse_unsupported(const json& body) {
  const auto refuse = [](const std::string& name) {
    throw bad_field(name, "this value is not supported by this server");
  };
  if (const json* v = field(body, "echo"); v && *v != false) refuse("echo");
  // A number in completions, a boolean in chat completions.
  if (const json* v = field(body, "logprobs"); v && *v != 0 && *v != false) refuse("logprobs");
  if (const json* v = field(body, "best_of"); v && *v != 1) refuse("best_of");
  if (const json* v = field(body, "suffix"); v && *v != "") refuse("suffix");
  if (const json* v = field(body, "presence_penalty"); v && *v != 0) refuse("presence_penalty");
  if (const json* v = field(body, "frequency_penalty"); v && *v != 0) refuse("frequency_penalty");
  if (const json* v = field(body, "logit_bias"); v && !(v->is_object() && v->empty()))
    refuse("logit_bias");
}

template <typename Json>
Json parse_body(const std::string& body) {
  Json parsed = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) throw RequestError(400, "the request body is not valid JSON");
  if (!parsed.is_object()) throw RequestError(400, "the request body must be a JSON object");
  return parsed;
}

}  // namespace

json parse_json_body(const std::string& body) {
  return parse_body<json>(body);
}

nlohmann::ordered_json parse_ordered_json_body(const std::string& body) {
  return parse_body<nlohmann::ordered_json>(body);
}

CompletionRequest parse_completion_request(const json& body) {
  CompletionRequest r;
  parse_prompt(body, r);
  parse_generation_fields(body, r);
  return r;
}

void parse_generation_fields(const json& body, CompletionRequest& r) {
  if (const json* v = field(body, "model"); v && !v->is_string())
    throw bad_field("model", "expected a string");
  if (const json* v = field(body, "max_tokens"))
    r.max_tokens = static_cast<int>(integer(*v, "max_tokens", 0, 1 << 24));
  if (const json* v = field(body, "temperature"))
    r.temperature = static_cast<float>(number(*v, "temperature", 0, 2));
  if (const json* v = field(body, "top_p")) {
    r.top_p = static_cast<float>(number(*v, "top_p", 0, 1));
    if (r.top_p <= 0) throw bad_field("top_p", "must be greater than 0");
  }
  if (const json* v = field(body, "seed")) {
    if (!v->is_number_integer()) throw bad_field("seed", "expected an integer");
    r.seed = v->is_number_unsigned() ? v->get<std::uint64_t>()
                                     : static_cast<std::uint64_t>(v->get<std::int64_t>());
  }
  if (const json* v = field(body, "n"); v && integer(*v, "n", 1, 1) != 1)
    throw bad_field("n", "only 1 is supported");
  refuse_unsupported(body);
  if (const json* v = field(body, "stop")) {
    if (v->is_string()) {
      r.stop.push_back(v->get<std::string>());
    } else if (v->is_array()) {
      if (v->size() > 4) throw bad_field("stop", "at most 4 stop sequences");
      for (const json& s : *v) {
        if (!s.is_string()) throw bad_field("stop", "expected a string or a list of strings");
        r.stop.push_back(s.get<std::string>());
      }
    } else {
      throw bad_field("stop", "expected a string or a list of strings");
    }
    for (const std::string& s : r.stop)
      if (s.empty()) throw bad_field("stop", "a stop sequence is empty");
  }
  if (const json* v = field(body, "stream")) {
    if (!v->is_boolean()) throw bad_field("stream", "expected true or false");
    r.stream = v->get<bool>();
  }
  if (const json* v = field(body, "stream_options")) {
    if (!v->is_object()) throw bad_field("stream_options", "expected an object");
    if (const json* u = field(*v, "include_usage")) {
      if (!u->is_boolean())
        throw bad_field("stream_options.include_usage", "expected true or false");
      r.include_usage = u->get<bool>();
    }
  }
}

}  // namespace huddle::serve
