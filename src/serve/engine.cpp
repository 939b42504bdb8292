#include "serve/engine.h"

#include "runtime/generate.h"
#include "runtime/sampling.h"
#include "serve/request_error.h"
#include "serve/stop_matcher.h"
#include "tokenizer/stream_decoder.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>

namespace huddle::serve {
namespace {

// Thrown from the token callback to end generate() early (a stop string, a cancelled client).
struct EndGeneration {};

}  // namespace

Engine::Engine(StepRunner& runner, const Tokenizer& tokenizer, EngineOptions options)
    : runner_(runner),
      tokenizer_(tokenizer),
      options_(std::move(options)),
      last_used_(std::chrono::steady_clock::now()) {
  options_.context = std::min(options_.context, runner_.max_positions());
  if (options_.keepalive.count() > 0) keepalive_ = std::thread([this] { keepalive_loop(); });
}

Engine::~Engine() {
  {
    std::lock_guard guard(stop_mutex_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (keepalive_.joinable()) keepalive_.join();
}

std::string Engine::failure() const {
  std::lock_guard guard(failure_mutex_);
  return failure_;
}

void Engine::keepalive_loop() {
  std::unique_lock guard(stop_mutex_);
  while (!stop_cv_.wait_for(guard, options_.keepalive / 2, [this] { return stopping_; })) {
    std::lock_guard model(model_mutex_);
    if (std::chrono::steady_clock::now() - last_used_ < options_.keepalive / 2) continue;
    if (!failure().empty()) return;
    try {
      runner_.reset();  // a cheap message to every worker
    } catch (const TransportError& e) {
      std::lock_guard failed(failure_mutex_);
      failure_ = e.what();
      return;
    }
    last_used_ = std::chrono::steady_clock::now();
  }
}

std::vector<std::int32_t> Engine::prompt_ids(const CompletionRequest& request) const {
  std::vector<std::int32_t> ids = request.prompt_ids;
  if (request.prompt_text) ids = tokenizer_.encode(*request.prompt_text);
  // A chat template that writes bos_token itself, as Llama's do: the tokenizer's BOS is extra.
  if (request.from_chat_template && ids.size() >= 2 && tokenizer_.bos_id() &&
      ids[0] == *tokenizer_.bos_id() && ids[1] == ids[0]) {
    ids.erase(ids.begin());
  }
  if (ids.empty())
    throw RequestError(400, "the prompt has no tokens", "invalid_request_error", "prompt");
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= options_.vocab_size) {
      throw RequestError(
          400,
          fmt::format("token id {} at position {} is outside the vocabulary ({} ids)", ids[i], i,
                      options_.vocab_size),
          "invalid_request_error", "prompt");
    }
  }
  if (static_cast<std::int64_t>(ids.size()) > options_.context) {
    throw RequestError(
        400,
        fmt::format("the prompt has {} tokens; the context holds {}", ids.size(), options_.context),
        "invalid_request_error", "prompt", "context_length_exceeded");
  }
  return ids;
}

CompletionResult Engine::complete(const CompletionRequest& request, const TextSink& on_text,
                                  const GoneProbe& client_gone) {
  const std::vector<std::int32_t> prompt = prompt_ids(request);
  CompletionResult result;
  result.prompt_tokens = static_cast<std::int64_t>(prompt.size());
  // The last prompt position's logits give one token without a new position.
  const std::int64_t room = options_.context - result.prompt_tokens + 1;
  const int n_predict = static_cast<int>(std::min<std::int64_t>(request.max_tokens, room));

  SamplingOptions sampling;
  sampling.temperature = request.temperature;
  sampling.top_p = request.top_p;
  sampling.seed = request.seed ? *request.seed : std::random_device{}();
  Sampler sampler(sampling);
  StreamDecoder decoder(tokenizer_, /*skip_special=*/true);
  StopMatcher matcher(request.stop);
  bool saw_stop_id = false;
  std::vector<std::int32_t> stop_ids = options_.stop_ids;
  if (request.from_chat_template)
    stop_ids.insert(stop_ids.end(), options_.chat_stop_ids.begin(), options_.chat_stop_ids.end());

  auto deliver = [&](const std::string& text) {
    if (text.empty()) return;
    result.text += text;
    if (!on_text(text)) {
      result.cancelled = true;
      throw EndGeneration{};
    }
  };
  GenerationOptions options;
  options.n_predict = n_predict;
  options.stop_ids = stop_ids;
  options.pick = [&sampler](std::span<const float> logits, std::span<const std::int32_t> history) {
    return sampler.pick(logits, history);
  };
  const auto check_client = [&] {
    if (client_gone && client_gone()) {
      result.cancelled = true;
      throw EndGeneration{};
    }
  };
  options.on_token = [&](std::int32_t id) {
    ++result.completion_tokens;
    check_client();
    if (std::find(stop_ids.begin(), stop_ids.end(), id) != stop_ids.end()) {
      saw_stop_id = true;
      return;  // not part of the text (skip_special would drop it anyway)
    }
    deliver(matcher.push(decoder.push(id)));
    if (matcher.stopped()) throw EndGeneration{};
  };

  std::lock_guard turn(model_mutex_);
  if (const std::string why = failure(); !why.empty()) {
    throw RequestError(503, fmt::format("the model is unavailable: {}", why), "server_error", "",
                       "unavailable");
  }
  ObservedRequest observed(options_.observer, result.prompt_tokens, result.completion_tokens);
  try {
    check_client();  // it may have left while it waited for its turn
    generate(runner_, prompt, options);
    deliver(matcher.push(decoder.finish()));
    if (!matcher.stopped()) deliver(matcher.finish());
  } catch (const EndGeneration&) {
  } catch (const TransportError& e) {
    std::lock_guard guard(failure_mutex_);
    failure_ = e.what();
    throw;
  }
  if (options_.after_request) {
    try {
      options_.after_request();
    } catch (const std::exception& e) {
      std::lock_guard guard(failure_mutex_);
      failure_ = e.what();
    }
  }
  last_used_ = std::chrono::steady_clock::now();
  result.finish_reason = saw_stop_id || matcher.stopped() ? "stop" : "length";
  observed.finish(result.cancelled ? "cancelled" : result.finish_reason);
  return result;
}

}  // namespace huddle::serve
