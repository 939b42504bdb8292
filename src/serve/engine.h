// Engine: the loaded model behind the server. One StepRunner (a single-device Executor or a
// Cluster's runner) serves every request, one request at a time, in arrival order. While idle it
// resets the runner every `keepalive` so the workers of a cluster, which give up on a primary
// silent for their timeout, keep the session.
#pragma once

#include "runtime/step_runner.h"
#include "serve/completion_request.h"
#include "serve/fifo_mutex.h"
#include "serve/request_observer.h"
#include "tokenizer/tokenizer.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace huddle::serve {

struct CompletionResult {
  std::string text;
  std::string finish_reason;  // "stop" (end of sequence or a stop string) or "length"
  std::int64_t prompt_tokens = 0;
  std::int64_t completion_tokens = 0;
  bool cancelled = false;  // the consumer asked to stop (a client went away)
};

struct EngineOptions {
  std::int64_t context = 0;                 // positions a request may use (prompt + generated)
  std::vector<std::int32_t> stop_ids;       // end-of-sequence ids
  std::vector<std::int32_t> chat_stop_ids;  // also end chat replies (the template's end of turn)
  std::int32_t vocab_size = 0;              // token-id prompts are checked against it
  std::chrono::milliseconds keepalive{0};   // 0: no keep-alive
  RequestObserver* observer = nullptr;      // told of each request's turn (the dashboard's log)
  // Called after each request that ran, before the next one has the model (the session's
  // re-plan between requests). An exception from it makes the engine fail as a lost link does.
  std::function<void()> after_request;
};

class Engine {
 public:
  // `runner` and `tokenizer` must outlive the engine.
  Engine(StepRunner& runner, const Tokenizer& tokenizer, EngineOptions options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // The prompt's ids: text through the tokenizer (a chat prompt that begins with the BOS token
  // gets no second one), or ids checked against the vocabulary.
  // RequestError (400) when it is empty, has an unknown id, or leaves no room in the context.
  std::vector<std::int32_t> prompt_ids(const CompletionRequest& request) const;

  // Generates for `request` once the requests before it are done. `on_text` receives the text as
  // it becomes final (stop strings removed); returning false cancels the request.
  // `client_gone` (optional) is asked once the request has its turn and after every token (each
  // decode step): true cancels it, so a client that left frees the model for the next one
  // without being written to. A cancelled result has `cancelled` set. Runner errors (a worker
  // lost) propagate.
  using TextSink = std::function<bool(std::string_view)>;
  using GoneProbe = std::function<bool()>;
  CompletionResult complete(const CompletionRequest& request, const TextSink& on_text,
                            const GoneProbe& client_gone = {});

  std::int64_t context() const { return options_.context; }

  // Why the engine can no longer answer ("" while it can): a step failed on a link, so the
  // cluster session is gone (a worker died). Every later request gets a 503 with this reason.
  std::string failure() const;

 private:
  void keepalive_loop();

  StepRunner& runner_;
  const Tokenizer& tokenizer_;
  EngineOptions options_;
  FifoMutex model_mutex_;                            // one request on the model at a time
  std::chrono::steady_clock::time_point last_used_;  // guarded by model_mutex_
  std::mutex stop_mutex_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread keepalive_;
  mutable std::mutex failure_mutex_;
  std::string failure_;
};

}  // namespace huddle::serve
