#include "tokenizer/added_tokens.h"

#include <array>
#include <map>

#include "core/error.h"
#include "tokenizer/normalizers.h"
#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"

namespace huddle::tok {
namespace {

struct CharBefore {
  char32_t cp;
  std::size_t start;
};

// The well-formed character that ends at byte `end` of s, if any.
std::optional<CharBefore> char_before(std::string_view s, std::size_t end) {
  if (end == 0) return std::nullopt;
  std::size_t start = end - 1;
  while (start > 0 && end - start < 4 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) {
    --start;
  }
  const Utf8Step step = utf8_next(s, start);
  if (!step.valid || start + step.len != end) return std::nullopt;
  return CharBefore{step.cp, start};
}

std::optional<char32_t> char_at(std::string_view s, std::size_t pos) {
  if (pos >= s.size()) return std::nullopt;
  const Utf8Step step = utf8_next(s, pos);
  if (!step.valid) return std::nullopt;
  return step.cp;
}

std::size_t whitespace_run_after(std::string_view s, std::size_t pos) {
  while (pos < s.size()) {
    const Utf8Step step = utf8_next(s, pos);
    if (!step.valid || !is_whitespace(step.cp)) break;
    pos += step.len;
  }
  return pos;
}

std::size_t whitespace_run_before(std::string_view s, std::size_t end) {
  while (end > 0) {
    const auto c = char_before(s, end);
    if (!c || !is_whitespace(c->cp)) break;
    end = c->start;
  }
  return end;
}

}  // namespace

// Leftmost-longest matching of a set of strings with a byte trie.
class AddedVocabulary::Matcher {
 public:
  void add(std::string_view pattern, std::size_t token_index) {
    if (pattern.empty()) return;
    first_bytes_[static_cast<unsigned char>(pattern[0])] = true;
    std::size_t node = 0;
    for (const char c : pattern) {
      const auto key = std::make_pair(node, static_cast<unsigned char>(c));
      auto it = edges_.find(key);
      if (it == edges_.end()) {
        it = edges_.emplace(key, terminal_.size()).first;
        terminal_.push_back(kNone);
      }
      node = it->second;
    }
    if (terminal_[node] == kNone) terminal_[node] = token_index;  // first definition wins
  }
  bool empty() const { return edges_.empty(); }

  // The longest pattern starting at pos: {end, token index}, or nullopt.
  std::optional<std::pair<std::size_t, std::size_t>> longest_at(std::string_view s,
                                                                std::size_t pos) const {
    std::optional<std::pair<std::size_t, std::size_t>> best;
    std::size_t node = 0;
    for (std::size_t i = pos; i < s.size(); ++i) {
      const auto it = edges_.find({node, static_cast<unsigned char>(s[i])});
      if (it == edges_.end()) break;
      node = it->second;
      if (terminal_[node] != kNone) best = std::make_pair(i + 1, terminal_[node]);
    }
    return best;
  }
  // Bytes that can start a pattern, to skip most positions quickly.
  bool may_start(unsigned char c) const { return first_bytes_[c]; }

 private:
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  std::map<std::pair<std::size_t, unsigned char>, std::size_t> edges_;
  std::vector<std::size_t> terminal_{kNone};  // node 0 is the root
  std::array<bool, 256> first_bytes_{};
};

namespace {

std::vector<TextSpan> split_with(std::string_view text, const std::vector<AddedToken>& tokens,
                                 const AddedVocabulary::Matcher* matcher);

}  // namespace

AddedVocabulary::AddedVocabulary()
    : raw_(std::make_unique<Matcher>()), normalized_(std::make_unique<Matcher>()) {}

AddedVocabulary::AddedVocabulary(std::vector<AddedToken> tokens, const Normalizer* normalizer)
    : tokens_(std::move(tokens)),
      raw_(std::make_unique<Matcher>()),
      normalized_(std::make_unique<Matcher>()) {
  for (std::size_t i = 0; i < tokens_.size(); ++i) {
    const AddedToken& t = tokens_[i];
    by_id_.emplace(t.id, i);
    if (t.normalized && normalizer != nullptr) {
      normalized_->add(normalizer->normalize(t.content), i);
    } else if (t.normalized) {
      normalized_->add(t.content, i);
    } else {
      raw_->add(t.content, i);
    }
  }
}

AddedVocabulary::~AddedVocabulary() = default;
AddedVocabulary::AddedVocabulary(AddedVocabulary&&) noexcept = default;
AddedVocabulary& AddedVocabulary::operator=(AddedVocabulary&&) noexcept = default;

std::vector<AddedToken> AddedVocabulary::parse(const Json& list, std::string_view where) {
  if (!list.is_array()) {
    throw LoadError(fmt::format("{}: expected an array, got {}", where, list.type_name()));
  }
  std::vector<AddedToken> tokens;
  tokens.reserve(list.size());
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string item = json_path(where, i);
    AddedToken t;
    t.content = json_string(list[i], "content", item);
    if (t.content.empty()) throw LoadError(fmt::format("{}.content: empty token", item));
    t.id = json_token_id(json_require(list[i], "id", item), json_path(item, "id"));
    t.special = json_bool_or(list[i], "special", false, item);
    t.normalized = json_bool_or(list[i], "normalized", !t.special, item);
    t.single_word = json_bool_or(list[i], "single_word", false, item);
    t.lstrip = json_bool_or(list[i], "lstrip", false, item);
    t.rstrip = json_bool_or(list[i], "rstrip", false, item);
    tokens.push_back(std::move(t));
  }
  return tokens;
}

std::vector<TextSpan> AddedVocabulary::split_raw(std::string_view text) const {
  return split_with(text, tokens_, raw_.get());
}

std::vector<TextSpan> AddedVocabulary::split_normalized(std::string_view text) const {
  return split_with(text, tokens_, normalized_.get());
}

bool AddedVocabulary::has_normalized_tokens() const {
  return !normalized_->empty();
}

std::optional<std::int32_t> AddedVocabulary::find(std::string_view content) const {
  for (const AddedToken& t : tokens_) {
    if (t.content == content) return t.id;
  }
  return std::nullopt;
}

const AddedToken* AddedVocabulary::by_id(std::int32_t id) const {
  const auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

namespace {

std::vector<TextSpan> split_with(std::string_view text, const std::vector<AddedToken>& tokens,
                                 const AddedVocabulary::Matcher* matcher) {
  std::vector<TextSpan> spans;
  if (matcher->empty()) {
    if (!text.empty()) spans.push_back({0, text.size(), -1});
    return spans;
  }
  std::size_t last_stop = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    if (!matcher->may_start(static_cast<unsigned char>(text[pos]))) {
      ++pos;
      continue;
    }
    const auto hit = matcher->longest_at(text, pos);
    if (!hit) {
      ++pos;
      continue;
    }
    const AddedToken& token = tokens[hit->second];
    std::size_t start = pos;
    std::size_t stop = hit->first;
    if (token.single_word) {
      const auto before = char_before(text, start);
      const auto after = char_at(text, stop);
      if ((before && is_word_char(before->cp)) || (after && is_word_char(*after))) {
        pos = stop;  // like Hugging Face, scanning resumes after the rejected match
        continue;
      }
    }
    if (token.lstrip) start = std::max(last_stop, whitespace_run_before(text, start));
    if (token.rstrip) stop = whitespace_run_after(text, stop);
    if (start > last_stop) spans.push_back({last_stop, start, -1});
    spans.push_back({start, stop, token.id});
    last_stop = stop;
    pos = stop;
  }
  if (last_stop < text.size()) spans.push_back({last_stop, text.size(), -1});
  return spans;
}

}  // namespace

}  // namespace huddle::tok
