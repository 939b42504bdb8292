#include "serve/tool_calls.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>

namespace huddle::serve {
namespace {

using ordered_json = nlohmann::ordered_json;

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

std::string new_call_id() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("call_{:016x}", rng());
}

// `text` before a call: trailing whitespace removed, nullopt when nothing is left.
std::optional<std::string> content_before(std::string_view text) {
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  if (trim(text).empty()) return std::nullopt;
  return std::string(text);
}

// One call object, {"name", "arguments" | "parameters"} (arguments an object, or a string
// holding one; absent: {}), naming an offered function; nullopt otherwise.
std::optional<ToolCall> call_from_json(std::string_view text, const ToolCallSyntax& syntax) {
  const ordered_json j = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  const auto name = j.find("name");
  if (name == j.end() || !name->is_string()) return std::nullopt;
  const std::string n = name->get<std::string>();
  if (std::find(syntax.names.begin(), syntax.names.end(), n) == syntax.names.end())
    return std::nullopt;
  auto args = j.find("arguments");
  if (args == j.end()) args = j.find("parameters");
  ordered_json arguments = ordered_json::object();
  if (args != j.end()) {
    arguments =
        args->is_string() ? ordered_json::parse(args->get<std::string>(), nullptr, false) : *args;
    if (!arguments.is_object()) return std::nullopt;
  }
  return ToolCall{new_call_id(), n,
                  arguments.dump(-1, ' ', false, ordered_json::error_handler_t::replace)};
}

// The end (one past the closing brace) of the JSON object starting at text[at] == '{'; npos when
// it does not close. Strings and their escapes are skipped; the object is parsed afterwards.
std::size_t object_end(std::string_view text, std::size_t at) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = at; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{') {
      ++depth;
    } else if (c == '}' && --depth == 0) {
      return i + 1;
    }
  }
  return std::string_view::npos;
}

std::optional<std::vector<ToolCall>> hermes_calls(std::string_view text,
                                                  const ToolCallSyntax& syntax) {
  std::vector<ToolCall> calls;
  std::size_t at = 0;
  while (true) {
    while (at < text.size() && is_space(text[at])) ++at;
    if (at == text.size()) break;
    if (text.substr(at, kHermesOpen.size()) != kHermesOpen) return std::nullopt;
    at += kHermesOpen.size();
    const std::size_t close = text.find(kHermesClose, at);
    const std::size_t end = close == std::string_view::npos ? text.size() : close;
    std::optional<ToolCall> call = call_from_json(trim(text.substr(at, end - at)), syntax);
    if (!call) return std::nullopt;
    calls.push_back(std::move(*call));
    at = close == std::string_view::npos ? text.size() : close + kHermesClose.size();
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

std::optional<std::vector<ToolCall>> json_calls(std::string_view text,
                                                const ToolCallSyntax& syntax) {
  std::vector<ToolCall> calls;
  std::size_t at = 0;
  while (true) {
    while (at < text.size() && (is_space(text[at]) || text[at] == ';')) ++at;
    if (at == text.size()) break;
    if (text[at] != '{') return std::nullopt;
    const std::size_t end = object_end(text, at);
    if (end == std::string_view::npos) return std::nullopt;
    std::optional<ToolCall> call = call_from_json(text.substr(at, end - at), syntax);
    if (!call) return std::nullopt;
    calls.push_back(std::move(*call));
    at = end;
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

ParsedReply with_calls(std::string_view before, std::vector<ToolCall> calls, bool parallel) {
  if (!parallel) calls.resize(1);
  return {content_before(before), std::move(calls)};
}

// The longest suffix of `text` that is a proper prefix of `marker` (text that may begin it).
std::size_t partial_marker(std::string_view text, std::string_view marker) {
  for (std::size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n)
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  return 0;
}

// How far `text` is content whatever follows, as far as `marker` is concerned: up to the marker,
// or short of a suffix that may begin it.
std::size_t before_marker(std::string_view text, std::string_view marker) {
  const std::size_t at = text.find(marker);
  return at != std::string_view::npos ? at : text.size() - partial_marker(text, marker);
}

}  // namespace

ToolCallFormat tool_call_format(std::string_view source) {
  if (source.find(kHermesOpen) != std::string_view::npos) return ToolCallFormat::kHermes;
  if (source.find("<|start_header_id|>") != std::string_view::npos &&
      source.find("parameters") != std::string_view::npos)
    return ToolCallFormat::kLlama3;
  return ToolCallFormat::kGeneric;
}

ParsedReply parse_tool_calls(std::string_view text, const ToolCallSyntax& syntax) {
  const ParsedReply plain{std::string(text), {}};
  const bool hermes = syntax.format == ToolCallFormat::kHermes ||
                      (syntax.format == ToolCallFormat::kGeneric &&
                       text.find(kHermesOpen) != std::string_view::npos);
  if (hermes) {
    const std::size_t at = text.find(kHermesOpen);
    if (at == std::string_view::npos) return plain;
    auto calls = hermes_calls(text.substr(at), syntax);
    return calls ? with_calls(text.substr(0, at), std::move(*calls), syntax.parallel) : plain;
  }
  const std::size_t tag = text.find(kPythonTag);
  if (tag != std::string_view::npos) {
    auto calls = json_calls(text.substr(tag + kPythonTag.size()), syntax);
    return calls ? with_calls(text.substr(0, tag), std::move(*calls), syntax.parallel) : plain;
  }
  auto calls = json_calls(text, syntax);
  return calls ? with_calls("", std::move(*calls), syntax.parallel) : plain;
}

ToolCallStream::ToolCallStream(ToolCallSyntax syntax) : syntax_(std::move(syntax)) {}

std::size_t ToolCallStream::content_end() const {
  const std::string_view text = full_;
  std::size_t end = text.size();
  if (syntax_.format != ToolCallFormat::kLlama3)
    end = std::min(end, before_marker(text, kHermesOpen));
  if (syntax_.format != ToolCallFormat::kHermes) {
    end = std::min(end, before_marker(text, kPythonTag));
    // A reply whose first visible character opens an object may be a call as a whole.
    const std::string_view visible = trim(text);
    if (visible.empty() || visible.front() == '{') end = 0;
  }
  // Blank text may turn out to precede a call (and then is not content).
  while (end > 0 && is_space(text[end - 1])) --end;
  return std::max(end, emitted_);
}

std::string ToolCallStream::push(std::string_view piece) {
  full_ += piece;
  const std::size_t end = content_end();
  std::string out = full_.substr(emitted_, end - emitted_);
  emitted_ = end;
  return out;
}

ParsedReply ToolCallStream::finish() {
  ParsedReply reply = parse_tool_calls(full_, syntax_);
  const std::string content = reply.content.value_or("");
  if (content.size() > emitted_) {
    reply.content = content.substr(emitted_);
  } else {
    reply.content = std::nullopt;
  }
  emitted_ = full_.size();
  return reply;
}

nlohmann::json tool_calls_json(const std::vector<ToolCall>& calls, bool with_index) {
  nlohmann::json list = nlohmann::json::array();
  for (std::size_t i = 0; i < calls.size(); ++i) {
    nlohmann::json call = {
        {"id", calls[i].id},
        {"type", "function"},
        {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}};
    if (with_index) call["index"] = i;
    list.push_back(std::move(call));
  }
  return list;
}

}  // namespace huddle::serve
