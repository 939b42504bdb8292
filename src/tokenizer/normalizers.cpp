#include "tokenizer/normalizers.h"

#include <vector>

#include "core/error.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"

namespace huddle::tok {
namespace {

constexpr std::string_view kSupportedNormalizers =
    "BertNormalizer, Lowercase, NFC, NFD, NFKC, NFKD, StripAccents, Strip, Replace, Prepend, "
    "Sequence";

template <typename Fn>
std::string map_chars(std::string_view s, Fn&& fn) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t pos = 0; pos < s.size();) {
    const Utf8Step step = utf8_next(s, pos);
    fn(step.cp, s.substr(pos, step.len), out);
    pos += step.len;
  }
  return out;
}

std::string strip_nonspacing_marks(std::string_view s) {
  return map_chars(s, [](char32_t cp, std::string_view bytes, std::string& out) {
    if (!is_nonspacing_mark(cp)) out.append(bytes);
  });
}

class BertNormalizer final : public Normalizer {
 public:
  explicit BertNormalizer(BertNormalizerOptions options) : options_(options) {}
  std::string normalize(std::string_view text) const override {
    return bert_normalize(text, options_);
  }

 private:
  BertNormalizerOptions options_;
};

class LowercaseNormalizer final : public Normalizer {
 public:
  std::string normalize(std::string_view text) const override { return to_lower(text); }
};

class UnicodeFormNormalizer final : public Normalizer {
 public:
  explicit UnicodeFormNormalizer(NormalForm form) : form_(form) {}
  std::string normalize(std::string_view text) const override {
    return normalize_form(text, form_);
  }

 private:
  NormalForm form_;
};

class StripAccentsNormalizer final : public Normalizer {
 public:
  std::string normalize(std::string_view text) const override {
    return strip_nonspacing_marks(text);
  }
};

class StripNormalizer final : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  std::string normalize(std::string_view text) const override {
    std::size_t begin = 0;
    std::size_t end = text.size();
    if (left_) {
      while (begin < end) {
        const Utf8Step step = utf8_next(text, begin);
        if (!step.valid || !is_whitespace(step.cp)) break;
        begin += step.len;
      }
    }
    if (right_) {
      while (end > begin) {
        std::size_t start = end - 1;  // back up to the lead byte of the last character
        while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
        const Utf8Step step = utf8_next(text, start);
        if (!step.valid || start + step.len != end || !is_whitespace(step.cp)) break;
        end = start;
      }
    }
    return std::string(text.substr(begin, end - begin));
  }

 private:
  bool left_;
  bool right_;
};

// Replace every occurrence of a literal string or of a regex with `content`.
class ReplaceNormalizer final : public Normalizer {
 public:
  ReplaceNormalizer(std::string literal, std::unique_ptr<Regex> regex, std::string content)
      : literal_(std::move(literal)), regex_(std::move(regex)), content_(std::move(content)) {}

  std::string normalize(std::string_view text) const override {
    std::string out;
    out.reserve(text.size());
    std::size_t last = 0;
    if (regex_) {
      for (const auto& [begin, end] : regex_->find_all(text)) {
        out.append(text.substr(last, begin - last));
        out.append(content_);
        last = end;
      }
    } else if (!literal_.empty()) {
      for (std::size_t hit = text.find(literal_); hit != std::string_view::npos;
           hit = text.find(literal_, last)) {
        out.append(text.substr(last, hit - last));
        out.append(content_);
        last = hit + literal_.size();
      }
    }
    out.append(text.substr(last));
    return out;
  }
  bool needs_valid_utf8() const override { return false; }

 private:
  std::string literal_;
  std::unique_ptr<Regex> regex_;
  std::string content_;
};

class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  std::string normalize(std::string_view text) const override {
    if (text.empty()) return {};
    std::string out = prefix_;
    out.append(text);
    return out;
  }
  bool needs_valid_utf8() const override { return false; }

 private:
  std::string prefix_;
};

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> parts)
      : parts_(std::move(parts)) {}
  std::string normalize(std::string_view text) const override {
    std::string current(text);
    for (const auto& part : parts_) current = part->normalize(current);
    return current;
  }
  bool needs_valid_utf8() const override {
    for (const auto& part : parts_) {
      if (part->needs_valid_utf8()) return true;
    }
    return false;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

}  // namespace

std::string bert_normalize(std::string_view text, const BertNormalizerOptions& options) {
  std::string s = map_chars(text, [&](char32_t cp, std::string_view bytes, std::string& out) {
    if (options.clean_text) {
      if (cp == 0 || cp == kReplacementChar || is_bert_control(cp)) return;
      if (cp == '\t' || cp == '\n' || cp == '\r' || is_whitespace(cp)) {
        out.push_back(' ');
        return;
      }
    }
    if (options.handle_chinese_chars && is_cjk_ideograph(cp)) {
      out.push_back(' ');
      out.append(bytes);
      out.push_back(' ');
      return;
    }
    out.append(bytes);
  });
  if (options.strip_accents) s = strip_nonspacing_marks(normalize_form(s, NormalForm::kNfd));
  if (options.lowercase) s = to_lower(s);
  return s;
}

std::unique_ptr<Normalizer> make_normalizer(const Json& spec, std::string_view where) {
  const std::string type = json_type(spec, where);
  if (type == "BertNormalizer") {
    BertNormalizerOptions options;
    options.clean_text = json_bool_or(spec, "clean_text", true, where);
    options.handle_chinese_chars = json_bool_or(spec, "handle_chinese_chars", true, where);
    options.lowercase = json_bool_or(spec, "lowercase", true, where);
    options.strip_accents = json_bool_or(spec, "strip_accents", options.lowercase, where);
    return std::make_unique<BertNormalizer>(options);
  }
  if (type == "Lowercase") return std::make_unique<LowercaseNormalizer>();
  if (type == "NFC") return std::make_unique<UnicodeFormNormalizer>(NormalForm::kNfc);
  if (type == "NFD") return std::make_unique<UnicodeFormNormalizer>(NormalForm::kNfd);
  if (type == "NFKC") return std::make_unique<UnicodeFormNormalizer>(NormalForm::kNfkc);
  if (type == "NFKD") return std::make_unique<UnicodeFormNormalizer>(NormalForm::kNfkd);
  if (type == "StripAccents") return std::make_unique<StripAccentsNormalizer>();
  if (type == "Strip") {
    return std::make_unique<StripNormalizer>(json_bool_or(spec, "strip_left", true, where),
                                             json_bool_or(spec, "strip_right", true, where));
  }
  if (type == "Replace") {
    const Json& pattern = json_object(spec, "pattern", where);
    const std::string pattern_where = json_path(where, "pattern");
    std::string content = json_string(spec, "content", where);
    if (json_find(pattern, "Regex") != nullptr) {
      auto regex = std::make_unique<Regex>(json_string(pattern, "Regex", pattern_where));
      return std::make_unique<ReplaceNormalizer>("", std::move(regex), std::move(content));
    }
    return std::make_unique<ReplaceNormalizer>(json_string(pattern, "String", pattern_where),
                                               nullptr, std::move(content));
  }
  if (type == "Prepend")
    return std::make_unique<PrependNormalizer>(json_string(spec, "prepend", where));
  if (type == "Sequence") {
    const Json& list = json_array(spec, "normalizers", where);
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (std::size_t i = 0; i < list.size(); ++i) {
      parts.push_back(make_normalizer(list[i], json_path(json_path(where, "normalizers"), i)));
    }
    return std::make_unique<SequenceNormalizer>(std::move(parts));
  }
  throw_unsupported(where, type, kSupportedNormalizers);
}

}  // namespace huddle::tok
