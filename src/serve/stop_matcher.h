// Stop sequences over streamed text. Text arrives in pieces; push() returns what can be shown now:
// everything except a tail that might be the start of a stop sequence. Once a stop sequence is
// complete, the text before it is returned, stopped() turns true and the rest is dropped.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace huddle::serve {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  // Returns the text that is now certain to be output (no stop sequence starts in it).
  std::string push(std::string_view piece);
  // The held-back tail, at the end of generation (empty once stopped).
  std::string finish();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;  // text that may begin a stop sequence
  bool stopped_ = false;
};

}  // namespace huddle::serve
