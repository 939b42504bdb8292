#include "cli/command.h"
#include "core/error.h"

#include <fmt/format.h>

#include <charconv>
#include <sstream>

namespace huddle::cli {

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

std::vector<std::int32_t> parse_id_list(const std::string& text, const std::string& flag) {
  std::vector<std::int32_t> ids;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    std::size_t b = pos, e = comma;
    while (b < e && text[b] == ' ') ++b;
    while (e > b && text[e - 1] == ' ') --e;
    std::int32_t id = 0;
    const auto [ptr, ec] = std::from_chars(text.data() + b, text.data() + e, id);
    if (b == e || ec != std::errc() || ptr != text.data() + e || id < 0) {
      throw UsageError(fmt::format("{}: '{}' is not a non-negative integer (expected e.g. 1,2,3)",
                                   flag, text.substr(b, e - b)));
    }
    ids.push_back(id);
    pos = comma + 1;
  }
  return ids;
}

std::vector<double> parse_shares(const std::string& text) {
  std::vector<double> shares;
  for (const std::string& item : split_list(text)) {
    std::size_t used = 0;
    double value = 0;
    try {
      value = std::stod(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size()) {
      throw UsageError(fmt::format("--shares: '{}' is not a number (expected e.g. 5,3,1)", item));
    }
    shares.push_back(value);
  }
  return shares;
}

}  // namespace huddle::cli
