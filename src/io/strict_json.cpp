#include "io/strict_json.h"

#include "core/error.h"

#include <optional>
#include <set>
#include <vector>

namespace huddle::io {

nlohmann::json parse_strict_json(std::string_view text, std::string_view origin, int max_depth) {
  using Event = nlohmann::json::parse_event_t;
  std::vector<std::set<std::string>> open_objects;
  std::optional<std::string> duplicate;
  // `depth` counts the arrays and objects around the event's value.
  auto callback = [&](int depth, Event event, nlohmann::json& parsed) {
    switch (event) {
      case Event::object_start:
      case Event::array_start:
        if (depth >= max_depth) {
          throw LoadError(
              fmt::format("{}: JSON nested deeper than {} arrays and objects", origin, max_depth));
        }
        if (event == Event::object_start) open_objects.emplace_back();
        break;
      case Event::object_end:
        if (!open_objects.empty()) open_objects.pop_back();
        break;
      case Event::key:
        if (!open_objects.empty() && parsed.is_string() &&
            !open_objects.back().insert(parsed.get<std::string>()).second && !duplicate) {
          duplicate = parsed.get<std::string>();
        }
        break;
      default:
        break;
    }
    return true;
  };
  nlohmann::json result;
  try {
    result = nlohmann::json::parse(text.begin(), text.end(), callback);
  } catch (const nlohmann::json::exception& e) {
    throw LoadError(fmt::format("{}: malformed JSON: {}", origin, e.what()));
  }
  if (duplicate) throw LoadError(fmt::format("{}: duplicate key '{}'", origin, *duplicate));
  return result;
}

}  // namespace huddle::io
