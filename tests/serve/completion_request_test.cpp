// The completions request body: accepted shapes and every refusal naming its field.
#include "serve/completion_request.h"
#include "serve/request_error.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace huddle::serve {
namespace {

using nlohmann::json;

// The param a body is refused for ("" when accepted).
std::string refused_param(const std::string& body) {
  try {
    parse_completion_request(parse_json_body(body));
  } catch (const RequestError& e) {
    EXPECT_EQ(e.status(), 400);
    return e.param().empty() ? "<body>" : e.param();
  }
  return "";
}

TEST(CompletionRequest, ParsesEveryField) {
  const CompletionRequest r = parse_completion_request(json::parse(R"({
    "model": "m", "prompt": "Hello", "max_tokens": 5, "temperature": 0.5, "top_p": 0.9,
    "seed": 7, "stop": ["a", "bc"], "stream": true, "stream_options": {"include_usage": true},
    "n": 1, "user": "ignored"})"));
  EXPECT_EQ(r.prompt_text, "Hello");
  EXPECT_TRUE(r.prompt_ids.empty());
  EXPECT_EQ(r.max_tokens, 5);
  EXPECT_FLOAT_EQ(r.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.top_p, 0.9f);
  EXPECT_EQ(r.seed, 7u);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"a", "bc"}));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
}

TEST(CompletionRequest, DefaultsAndTokenIds) {
  const CompletionRequest r =
      parse_completion_request(json::parse(R"({"prompt": [1, 2, 3], "stop": "x", "seed": null})"));
  EXPECT_FALSE(r.prompt_text);
  EXPECT_EQ(r.prompt_ids, (std::vector<std::int32_t>{1, 2, 3}));
  EXPECT_EQ(r.max_tokens, 16);
  EXPECT_FLOAT_EQ(r.temperature, 1.0f);
  EXPECT_FALSE(r.seed);
  EXPECT_EQ(r.stop, std::vector<std::string>{"x"});
  EXPECT_FALSE(r.stream);
}

TEST(CompletionRequest, RefusesBadBodiesNamingTheField) {
  EXPECT_EQ(refused_param("{"), "<body>");
  EXPECT_EQ(refused_param("[1]"), "<body>");
  EXPECT_EQ(refused_param(R"({})"), "prompt");
  EXPECT_EQ(refused_param(R"({"prompt": 3})"), "prompt");
  EXPECT_EQ(refused_param(R"({"prompt": ""})"), "prompt");
  EXPECT_EQ(refused_param(R"({"prompt": []})"), "prompt");
  EXPECT_EQ(refused_param(R"({"prompt": ["a", "b"]})"), "prompt");
  EXPECT_EQ(refused_param(R"({"prompt": [1, -2]})"), "prompt[1]");
  EXPECT_EQ(refused_param(R"({"prompt": [1, 2.5]})"), "prompt[1]");
  EXPECT_EQ(refused_param(R"({"prompt": [1, 99999999999]})"), "prompt[1]");
  EXPECT_EQ(refused_param(R"({"prompt": "a", "max_tokens": "5"})"), "max_tokens");
  EXPECT_EQ(refused_param(R"({"prompt": "a", "max_tokens": -1})"), "max_tokens");
  EXPECT_EQ(refused_param(R"({"prompt": "a", "temperature": 3})"), "temperature");
  EXPECT_EQ(refused_param(R"({"prompt": "a", "temperature": "hot"})"), "temperature");
  EXPECT_EQ(refused_param(R"({"prompt": "a", "top_p": 0})"), "top_p");
  EXPECT_EQ(refused_param(R"({"prompt": "a", "seed": 1.5})"), "seed");
  EXPECT_EQ(refused_param(R"({"prompt": "a", "stop": 1})"), "stop");
  EXPECT_EQ(refused_param(R"({"prompt": "a", "stop": [""]})"), "stop");
  EXPECT_EQ(refused_param(R"({"prompt": "a", "stop": ["a","b","c","d","e"]})"), "stop");
  EXPECT_EQ(refused_param(R"({"prompt": "a", "stream": "yes"})"), "stream");
  EXPECT_EQ(refused_param(R"({"prompt": "a", "stream_options": {"include_usage": 1}})"),
            "stream_options.include_usage");
  EXPECT_EQ(refused_param(R"({"prompt": "a", "n": 2})"), "n");
  EXPECT_EQ(refused_param(R"({"prompt": "a", "model": 1})"), "model");
  EXPECT_EQ(refused_param(R"({"prompt": "a", "max_tokens": null})"), "");
}

TEST(CompletionRequest, RefusesUnsupportedFeaturesButAcceptsTheirDefaults) {
  EXPECT_EQ(refused_param(R"({"prompt": "a", "echo": true})"), "echo");
  EXPECT_EQ(refused_param(R"({"prompt": "a", "logprobs": 5})"), "logprobs");
  EXPECT_EQ(refused_param(R"({"prompt": "a", "best_of": 2})"), "best_of");
  EXPECT_EQ(refused_param(R"({"prompt": "a", "suffix": "x"})"), "suffix");
  EXPECT_EQ(refused_param(R"({"prompt": "a", "presence_penalty": 0.5})"), "presence_penalty");
  EXPECT_EQ(refused_param(R"({"prompt": "a", "frequency_penalty": 1})"), "frequency_penalty");
  EXPECT_EQ(refused_param(R"({"prompt": "a", "logit_bias": {"5": 1}})"), "logit_bias");
  EXPECT_EQ(refused_param(R"({"prompt": "a", "echo": false, "logprobs": null, "best_of": 1,
    "suffix": null, "presence_penalty": 0, "frequency_penalty": 0.0, "logit_bias": {}})"),
            "");
}

}  // namespace
}  // namespace huddle::serve
