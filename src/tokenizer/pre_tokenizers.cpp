#include "tokenizer/pre_tokenizers.h"

#include <algorithm>
#include <functional>

#include "core/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"

namespace huddle::tok {
namespace {

constexpr std::string_view kSupportedPreTokenizers =
    "ByteLevel, Split, BertPreTokenizer, Whitespace, WhitespaceSplit, Metaspace, Digits, "
    "Punctuation, Sequence";

// GPT-2's split pattern, which the ByteLevel pre-tokenizer uses when use_regex is true.
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

using Ranges = std::vector<std::pair<std::size_t, std::size_t>>;

// Segments of `text` from a list of non-overlapping matches.
std::vector<Segment> segments_from_matches(std::size_t size, const Ranges& matches, bool invert) {
  std::vector<Segment> segments;
  segments.reserve(matches.size() * 2 + 1);
  std::size_t last = 0;
  for (const auto& [begin, end] : matches) {
    if (begin > last) segments.push_back({last, begin, invert});
    segments.push_back({begin, end, !invert});
    last = end;
  }
  if (last < size) segments.push_back({last, size, invert});
  return segments;
}

// Segments where every character for which `pred` holds is its own delimiter.
std::vector<Segment> segments_from_chars(std::string_view text,
                                         const std::function<bool(char32_t)>& pred) {
  std::vector<Segment> segments;
  std::size_t gap_start = 0;
  for (std::size_t pos = 0; pos < text.size();) {
    const Utf8Step step = utf8_next(text, pos);
    if (step.valid && pred(step.cp)) {
      if (pos > gap_start) segments.push_back({gap_start, pos, false});
      segments.push_back({pos, pos + step.len, true});
      gap_start = pos + step.len;
    }
    pos += step.len;
  }
  if (gap_start < text.size()) segments.push_back({gap_start, text.size(), false});
  return segments;
}

// Replaces each piece by the pieces `ranges_of(piece)` cuts from it.
template <typename Fn>
void split_each(std::vector<Piece>& pieces, Fn&& ranges_of) {
  std::vector<Piece> out;
  out.reserve(pieces.size() * 2);
  for (Piece& piece : pieces) {
    const Ranges ranges = ranges_of(piece);
    for (const auto& [begin, end] : ranges) {
      if (end > begin) {
        out.push_back({piece.text.substr(begin, end - begin), piece.at_origin && begin == 0});
      }
    }
  }
  pieces = std::move(out);
}

SplitBehavior parse_behavior(const std::string& name, std::string_view where) {
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  throw LoadError(fmt::format(
      "{}.behavior: unknown split behavior '{}' (expected Removed, Isolated, MergedWithPrevious, "
      "MergedWithNext or Contiguous)",
      where, name));
}

class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex)
      : add_prefix_space_(add_prefix_space) {
    if (use_regex) regex_ = std::make_unique<Regex>(kGpt2Pattern);
  }

  void split(std::vector<Piece>& pieces) const override {
    if (add_prefix_space_) {
      for (Piece& piece : pieces) {
        if (piece.text.empty() || piece.text[0] != ' ') piece.text.insert(0, 1, ' ');
      }
    }
    if (regex_) {
      split_each(pieces, [&](const Piece& p) {
        // Isolated: text between matches (only ill-formed UTF-8 can be there) stays a piece.
        return apply_split_behavior(
            segments_from_matches(p.text.size(), regex_->find_all(p.text), false),
            SplitBehavior::kIsolated);
      });
    }
    for (Piece& piece : pieces) piece.text = bytes_to_unicode(piece.text);
  }
  bool is_byte_level() const override { return true; }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> regex_;
};

class SplitPreTokenizer final : public PreTokenizer {
 public:
  SplitPreTokenizer(std::string literal, std::unique_ptr<Regex> regex, SplitBehavior behavior,
                    bool invert)
      : literal_(std::move(literal)),
        regex_(std::move(regex)),
        behavior_(behavior),
        invert_(invert) {}

  void split(std::vector<Piece>& pieces) const override {
    split_each(pieces, [&](const Piece& p) {
      return apply_split_behavior(segments_from_matches(p.text.size(), matches(p.text), invert_),
                                  behavior_);
    });
  }

 private:
  Ranges matches(std::string_view text) const {
    if (regex_) return regex_->find_all(text);
    Ranges out;
    if (literal_.empty()) return out;
    for (std::size_t hit = text.find(literal_); hit != std::string_view::npos;
         hit = text.find(literal_, hit + literal_.size())) {
      out.emplace_back(hit, hit + literal_.size());
    }
    return out;
  }

  std::string literal_;
  std::unique_ptr<Regex> regex_;
  SplitBehavior behavior_;
  bool invert_;
};

// Splits on characters matching a predicate (whitespace, punctuation, digits).
class CharSplitPreTokenizer final : public PreTokenizer {
 public:
  CharSplitPreTokenizer(std::function<bool(char32_t)> pred, SplitBehavior behavior)
      : pred_(std::move(pred)), behavior_(behavior) {}
  void split(std::vector<Piece>& pieces) const override {
    split_each(pieces, [&](const Piece& p) {
      return apply_split_behavior(segments_from_chars(p.text, pred_), behavior_);
    });
  }

 private:
  std::function<bool(char32_t)> pred_;
  SplitBehavior behavior_;
};

// Keeps the matches of a pattern and drops the rest (Hugging Face's Whitespace: \w+|[^\w\s]+).
class RegexKeepPreTokenizer final : public PreTokenizer {
 public:
  explicit RegexKeepPreTokenizer(std::string_view pattern) : regex_(pattern) {}
  void split(std::vector<Piece>& pieces) const override {
    split_each(pieces, [&](const Piece& p) { return regex_.find_all(p.text); });
  }

 private:
  Regex regex_;
};

enum class PrependScheme { kAlways, kFirst, kNever };

class MetaspacePreTokenizer final : public PreTokenizer {
 public:
  MetaspacePreTokenizer(char32_t replacement, PrependScheme scheme, bool split_words)
      : scheme_(scheme), split_(split_words) {
    append_utf8(replacement_, replacement);
  }

  void split(std::vector<Piece>& pieces) const override {
    for (Piece& piece : pieces) {
      std::string replaced;
      replaced.reserve(piece.text.size() + replacement_.size());
      for (const char c : piece.text) {
        if (c == ' ') {
          replaced.append(replacement_);
        } else {
          replaced.push_back(c);
        }
      }
      const bool prepend = scheme_ == PrependScheme::kAlways ||
                           (scheme_ == PrependScheme::kFirst && piece.at_origin);
      if (prepend && replaced.compare(0, replacement_.size(), replacement_) != 0) {
        replaced.insert(0, replacement_);
      }
      piece.text = std::move(replaced);
    }
    if (!split_) return;
    split_each(pieces, [&](const Piece& p) {
      Ranges hits;
      for (std::size_t hit = p.text.find(replacement_); hit != std::string::npos;
           hit = p.text.find(replacement_, hit + replacement_.size())) {
        hits.emplace_back(hit, hit + replacement_.size());
      }
      return apply_split_behavior(segments_from_matches(p.text.size(), hits, false),
                                  SplitBehavior::kMergedWithNext);
    });
  }

 private:
  std::string replacement_;
  PrependScheme scheme_;
  bool split_;
};

class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> parts)
      : parts_(std::move(parts)) {}
  void split(std::vector<Piece>& pieces) const override {
    for (const auto& part : parts_) part->split(pieces);
  }
  bool is_byte_level() const override {
    for (const auto& part : parts_) {
      if (part->is_byte_level()) return true;
    }
    return false;
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

PrependScheme parse_prepend_scheme(const Json& spec, std::string_view where) {
  if (json_find(spec, "prepend_scheme") == nullptr) {
    // Files written before tokenizers 0.14 spell it as a boolean.
    return json_bool_or(spec, "add_prefix_space", true, where) ? PrependScheme::kAlways
                                                               : PrependScheme::kNever;
  }
  const std::string scheme = json_string(spec, "prepend_scheme", where);
  if (scheme == "always") return PrependScheme::kAlways;
  if (scheme == "first") return PrependScheme::kFirst;
  if (scheme == "never") return PrependScheme::kNever;
  throw LoadError(fmt::format(
      "{}.prepend_scheme: unknown scheme '{}' (expected always, first or never)", where, scheme));
}

}  // namespace

Ranges apply_split_behavior(const std::vector<Segment>& segments, SplitBehavior behavior) {
  Ranges out;
  out.reserve(segments.size());
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kRemoved:
      for (const Segment& s : segments) {
        if (!s.is_match) out.emplace_back(s.begin, s.end);
      }
      break;
    case SplitBehavior::kIsolated:
      for (const Segment& s : segments) out.emplace_back(s.begin, s.end);
      break;
    case SplitBehavior::kContiguous:
      for (const Segment& s : segments) {
        if (s.is_match == previous_match && !out.empty()) {
          out.back().second = s.end;
        } else {
          out.emplace_back(s.begin, s.end);
        }
        previous_match = s.is_match;
      }
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const Segment& s : segments) {
        if (s.is_match && !previous_match && !out.empty()) {
          out.back().second = s.end;
        } else {
          out.emplace_back(s.begin, s.end);
        }
        previous_match = s.is_match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (auto it = segments.rbegin(); it != segments.rend(); ++it) {
        if (it->is_match && !previous_match && !out.empty()) {
          out.back().first = it->begin;
        } else {
          out.emplace_back(it->begin, it->end);
        }
        previous_match = it->is_match;
      }
      std::reverse(out.begin(), out.end());
      break;
  }
  return out;
}

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Json& spec, std::string_view where) {
  const std::string type = json_type(spec, where);
  if (type == "ByteLevel") {
    return std::make_unique<ByteLevelPreTokenizer>(
        json_bool_or(spec, "add_prefix_space", true, where),
        json_bool_or(spec, "use_regex", true, where));
  }
  if (type == "Split") {
    const Json& pattern = json_object(spec, "pattern", where);
    const std::string pattern_where = json_path(where, "pattern");
    const SplitBehavior behavior = parse_behavior(json_string(spec, "behavior", where), where);
    const bool invert = json_bool_or(spec, "invert", false, where);
    if (json_find(pattern, "Regex") != nullptr) {
      return std::make_unique<SplitPreTokenizer>(
          "", std::make_unique<Regex>(json_string(pattern, "Regex", pattern_where)), behavior,
          invert);
    }
    return std::make_unique<SplitPreTokenizer>(json_string(pattern, "String", pattern_where),
                                               nullptr, behavior, invert);
  }
  if (type == "BertPreTokenizer") {
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    parts.push_back(
        std::make_unique<CharSplitPreTokenizer>(is_whitespace, SplitBehavior::kRemoved));
    parts.push_back(
        std::make_unique<CharSplitPreTokenizer>(is_bert_punctuation, SplitBehavior::kIsolated));
    return std::make_unique<SequencePreTokenizer>(std::move(parts));
  }
  if (type == "Whitespace") return std::make_unique<RegexKeepPreTokenizer>(R"(\w+|[^\w\s]+)");
  if (type == "WhitespaceSplit") {
    return std::make_unique<CharSplitPreTokenizer>(is_whitespace, SplitBehavior::kRemoved);
  }
  if (type == "Metaspace") {
    return std::make_unique<MetaspacePreTokenizer>(json_char(spec, "replacement", where),
                                                   parse_prepend_scheme(spec, where),
                                                   json_bool_or(spec, "split", true, where));
  }
  if (type == "Digits") {
    const bool individual = json_bool_or(spec, "individual_digits", false, where);
    return std::make_unique<CharSplitPreTokenizer>(
        is_numeric, individual ? SplitBehavior::kIsolated : SplitBehavior::kContiguous);
  }
  if (type == "Punctuation") {
    const SplitBehavior behavior =
        parse_behavior(json_string_or(spec, "behavior", "Isolated", where), where);
    return std::make_unique<CharSplitPreTokenizer>(is_bert_punctuation, behavior);
  }
  if (type == "Sequence") {
    const Json& list = json_array(spec, "pretokenizers", where);
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    for (std::size_t i = 0; i < list.size(); ++i) {
      parts.push_back(make_pre_tokenizer(list[i], json_path(json_path(where, "pretokenizers"), i)));
    }
    return std::make_unique<SequencePreTokenizer>(std::move(parts));
  }
  throw_unsupported(where, type, kSupportedPreTokenizers);
}

}  // namespace huddle::tok
