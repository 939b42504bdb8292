#include "tokenizer/decoders.h"

#include "core/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/regex.h"
#include "tokenizer/utf8.h"

namespace huddle::tok {
namespace {

constexpr std::string_view kSupportedDecoders =
    "ByteLevel, WordPiece, Metaspace, Replace, ByteFallback, Fuse, Strip, BPEDecoder, Sequence";

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  if (from.empty()) return;
  for (std::size_t pos = s.find(from); pos != std::string::npos;
       pos = s.find(from, pos + to.size())) {
    s.replace(pos, from.size(), to);
  }
}

// Maps byte-alphabet characters back to bytes and joins everything into one token, repairing
// invalid UTF-8 (a sequence cut between tokens) with U+FFFD.
class ByteLevelDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const std::string& token : tokens) {
      if (auto raw = unicode_to_bytes(token)) {
        bytes.append(*raw);
      } else {
        bytes.append(token);  // not a byte-level token (an added token with other characters)
      }
    }
    tokens.assign(1, repair_utf8(bytes));
  }
};

class WordPieceDecoder final : public Decoder {
 public:
  WordPieceDecoder(std::string prefix, bool cleanup)
      : prefix_(std::move(prefix)), cleanup_(cleanup) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      std::string& token = tokens[i];
      if (i != 0) {
        if (!prefix_.empty() && token.compare(0, prefix_.size(), prefix_) == 0) {
          token.erase(0, prefix_.size());
        } else {
          token.insert(0, 1, ' ');
        }
      }
      if (cleanup_) cleanup(token);
    }
  }

 private:
  // Hugging Face's clean_up_tokenization, applied to each token.
  static void cleanup(std::string& s) {
    replace_all(s, " .", ".");
    replace_all(s, " ?", "?");
    replace_all(s, " !", "!");
    replace_all(s, " ,", ",");
    replace_all(s, " ' ", "'");
    replace_all(s, " n't", "n't");
    replace_all(s, " 'm", "'m");
    replace_all(s, " do not", " don't");
    replace_all(s, " 's", "'s");
    replace_all(s, " 've", "'ve");
    replace_all(s, " 're", "'re");
  }

  std::string prefix_;
  bool cleanup_;
};

class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(char32_t replacement, bool strip_first) : strip_first_(strip_first) {
    append_utf8(replacement_, replacement);
  }
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      replace_all(tokens[i], replacement_, i == 0 && strip_first_ ? "" : " ");
    }
  }

 private:
  std::string replacement_;
  bool strip_first_;
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(std::string literal, std::unique_ptr<Regex> regex, std::string content)
      : literal_(std::move(literal)), regex_(std::move(regex)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& token : tokens) {
      if (!regex_) {
        replace_all(token, literal_, content_);
        continue;
      }
      std::string out;
      std::size_t last = 0;
      for (const auto& [begin, end] : regex_->find_all(token)) {
        out.append(token, last, begin - last);
        out.append(content_);
        last = end;
      }
      out.append(token, last);
      token = std::move(out);
    }
  }

 private:
  std::string literal_;
  std::unique_ptr<Regex> regex_;
  std::string content_;
};

// Runs of <0xXX> tokens become the text they encode, character by character; each byte that does
// not begin a well-formed character becomes one U+FFFD. This is SentencePiece's rule (the decoder
// Llama 2's authors use). Hugging Face's ByteFallback instead turns every byte of a run into U+FFFD
// when the run as a whole is not UTF-8; the two agree on valid text, and only the per-character
// rule lets a streamed decode equal the full one (StreamDecoder).
class ByteFallbackDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    out.reserve(tokens.size());
    std::string run;
    auto flush = [&] {
      if (run.empty()) return;
      std::string text;
      for (std::size_t pos = 0; pos < run.size();) {
        const Utf8Step step = utf8_next(run, pos);
        if (step.valid) {
          text.append(run, pos, step.len);
          pos += step.len;
        } else {
          text.append(kReplacementUtf8);
          ++pos;
        }
      }
      out.push_back(std::move(text));
      run.clear();
    };
    for (std::string& token : tokens) {
      int byte = -1;
      if (token.size() == 6 && token.compare(0, 3, "<0x") == 0 && token[5] == '>') {
        byte = parse_hex_byte(token[3], token[4]);
      }
      if (byte >= 0) {
        run.push_back(static_cast<char>(byte));
      } else {
        flush();
        out.push_back(std::move(token));
      }
    }
    flush();
    tokens = std::move(out);
  }

 private:
  static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  static int parse_hex_byte(char hi, char lo) {
    const int h = hex_digit(hi);
    const int l = hex_digit(lo);
    return (h < 0 || l < 0) ? -1 : h * 16 + l;
  }
};

class FuseDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const std::string& t : tokens) all.append(t);
    tokens.assign(1, std::move(all));
  }
};

// Removes up to `start` leading and `stop` trailing copies of one character from each token.
class StripDecoder final : public Decoder {
 public:
  StripDecoder(char32_t content, std::size_t start, std::size_t stop) : start_(start), stop_(stop) {
    append_utf8(content_, content);
  }
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& token : tokens) {
      std::size_t begin = 0;
      for (std::size_t i = 0; i < start_ && token.compare(begin, content_.size(), content_) == 0;
           ++i) {
        begin += content_.size();
      }
      std::size_t end = token.size();
      for (std::size_t i = 0; i < stop_ && end >= begin + content_.size() &&
                              token.compare(end - content_.size(), content_.size(), content_) == 0;
           ++i) {
        end -= content_.size();
      }
      token = token.substr(begin, end - begin);
    }
  }

 private:
  std::string content_;
  std::size_t start_;
  std::size_t stop_;
};

// Classic BPE end-of-word suffix: "</w>" becomes a space, except on the last token.
class BpeSuffixDecoder final : public Decoder {
 public:
  explicit BpeSuffixDecoder(std::string suffix) : suffix_(std::move(suffix)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      replace_all(tokens[i], suffix_, i + 1 == tokens.size() ? "" : " ");
    }
  }

 private:
  std::string suffix_;
};

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> parts)
      : parts_(std::move(parts)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& part : parts_) part->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

bool metaspace_strips_first(const Json& spec, std::string_view where) {
  if (json_find(spec, "prepend_scheme") == nullptr) {
    return json_bool_or(spec, "add_prefix_space", true, where);
  }
  const std::string scheme = json_string(spec, "prepend_scheme", where);
  if (scheme != "always" && scheme != "first" && scheme != "never") {
    throw LoadError(fmt::format(
        "{}.prepend_scheme: unknown scheme '{}' (expected always, first or never)", where, scheme));
  }
  return scheme != "never";
}

std::size_t non_negative(const Json& spec, std::string_view key, std::string_view where) {
  const std::int64_t v = json_int_or(spec, key, 0, where);
  if (v < 0) throw LoadError(fmt::format("{}: {} is negative", json_path(where, key), v));
  return static_cast<std::size_t>(v);
}

}  // namespace

std::unique_ptr<Decoder> make_decoder(const Json& spec, std::string_view where) {
  const std::string type = json_type(spec, where);
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "WordPiece") {
    return std::make_unique<WordPieceDecoder>(json_string_or(spec, "prefix", "##", where),
                                              json_bool_or(spec, "cleanup", true, where));
  }
  if (type == "Metaspace") {
    return std::make_unique<MetaspaceDecoder>(json_char(spec, "replacement", where),
                                              metaspace_strips_first(spec, where));
  }
  if (type == "Replace") {
    const Json& pattern = json_object(spec, "pattern", where);
    const std::string pattern_where = json_path(where, "pattern");
    std::string content = json_string(spec, "content", where);
    if (json_find(pattern, "Regex") != nullptr) {
      return std::make_unique<ReplaceDecoder>(
          "", std::make_unique<Regex>(json_string(pattern, "Regex", pattern_where)),
          std::move(content));
    }
    return std::make_unique<ReplaceDecoder>(json_string(pattern, "String", pattern_where), nullptr,
                                            std::move(content));
  }
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip") {
    return std::make_unique<StripDecoder>(json_char(spec, "content", where),
                                          non_negative(spec, "start", where),
                                          non_negative(spec, "stop", where));
  }
  if (type == "BPEDecoder") {
    return std::make_unique<BpeSuffixDecoder>(json_string_or(spec, "suffix", "</w>", where));
  }
  if (type == "Sequence") {
    const Json& list = json_array(spec, "decoders", where);
    std::vector<std::unique_ptr<Decoder>> parts;
    for (std::size_t i = 0; i < list.size(); ++i) {
      parts.push_back(make_decoder(list[i], json_path(json_path(where, "decoders"), i)));
    }
    return std::make_unique<SequenceDecoder>(std::move(parts));
  }
  throw_unsupported(where, type, kSupportedDecoders);
}

}  // namespace huddle::tok
