#include "serve/stop_matcher.h"

#include <algorithm>

namespace huddle::serve {

std::string StopMatcher::push(std::string_view piece) {
  if (stopped_) return {};
  held_.append(piece);
  // The earliest complete stop sequence ends the text.
  std::size_t first = std::string::npos;
  for (const std::string& s : stops_) first = std::min(first, held_.find(s));
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, first);
    held_.clear();
    return out;
  }
  // Hold back the longest tail that is a proper prefix of some stop sequence. A stop sequence is
  // valid UTF-8, so such a tail starts on a character boundary.
  std::size_t keep = 0;
  for (const std::string& s : stops_) {
    for (std::size_t n = std::min(s.size() - 1, held_.size()); n > keep; --n) {
      if (held_.compare(held_.size() - n, n, s, 0, n) == 0) {
        keep = n;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopMatcher::finish() {
  std::string out = std::move(held_);
  held_.clear();
  return out;
}

}  // namespace huddle::serve
