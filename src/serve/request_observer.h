// RequestObserver: told when a request takes its turn on the model and when it leaves it, so the
// dashboard can log the steps in between (serve/step_log.h). Engine::complete calls it on the
// request's thread, while the request holds the model.
#pragma once

#include <cstdint>
#include <string>

namespace huddle::serve {

class RequestObserver {
 public:
  virtual ~RequestObserver() = default;
  virtual void request_started(std::int64_t prompt_tokens) = 0;
  // `finish_reason`: "stop", "length", "cancelled" (the client left) or "error" (a step threw).
  virtual void request_finished(std::int64_t completion_tokens,
                                const std::string& finish_reason) = 0;
};

// Reports one request to an observer (nullptr: none): started when constructed; finished by
// finish(), or as "error" when destroyed before (an exception left the request). Reads
// `completion_tokens`, which must outlive it, when it ends.
class ObservedRequest {
 public:
  ObservedRequest(RequestObserver* observer, std::int64_t prompt_tokens,
                  const std::int64_t& completion_tokens)
      : observer_(observer), completion_tokens_(completion_tokens) {
    if (observer_ != nullptr) observer_->request_started(prompt_tokens);
  }
  ~ObservedRequest() { finish("error"); }
  ObservedRequest(const ObservedRequest&) = delete;
  ObservedRequest& operator=(const ObservedRequest&) = delete;

  void finish(const std::string& finish_reason) {
    if (observer_ != nullptr) observer_->request_finished(completion_tokens_, finish_reason);
    observer_ = nullptr;
  }

 private:
  RequestObserver* observer_;
  const std::int64_t& completion_tokens_;
};

}  // namespace huddle::serve
