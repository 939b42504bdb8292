#include "jinja/lexer.h"

#include "jinja/py_string.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace huddle::jinja {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_name_char(char c) {
  return is_name_start(c) || is_digit(c);
}

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

class Lexer {
 public:
  Lexer(std::string source, const LexerOptions& options)
      : src_(std::move(source)), options_(options) {
    for (std::size_t i = 0; i < src_.size(); ++i)
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
  }

  std::vector<Token> run() {
    bool line_starting = true;
    while (pos_ < src_.size()) {
      const std::size_t open = find_tag(pos_);
      if (open == std::string::npos) {
        emit_text(src_.substr(pos_), pos_);
        break;
      }
      const char type = src_[open + 1];
      const char sign = open + 2 < src_.size() && (src_[open + 2] == '-' || src_[open + 2] == '+')
                            ? src_[open + 2]
                            : '\0';
      std::string text = src_.substr(pos_, open - pos_);
      if (sign == '-') {
        text = py::strip(text, py::Side::kRight);
      } else if (sign != '+' && options_.lstrip_blocks && type != '{') {
        const std::size_t line_begin = text.rfind('\n') + 1;  // npos + 1 == 0
        if ((line_begin > 0 || line_starting) && line_begin < text.size() &&
            std::all_of(text.begin() + static_cast<std::ptrdiff_t>(line_begin), text.end(),
                        [](char c) { return is_space(c) && c != '\n'; })) {
          text.resize(line_begin);
        }
      }
      emit_text(text, pos_);
      pos_ = open + 2 + (sign ? 1 : 0);
      if (type == '#') {
        skip_comment(open);
      } else {
        lex_tag(open, type);
      }
      line_starting = src_[pos_ - 1] == '\n';
    }
    tokens_.push_back({Token::Type::kEof, "", 0, 0, position(src_.size())});
    return std::move(tokens_);
  }

 private:
  Position position(std::size_t offset) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    const auto line = static_cast<int>(it - line_starts_.begin());  // 1-based: line_starts_[0] = 0
    return {line, static_cast<int>(offset - *(it - 1)) + 1};
  }

  [[noreturn]] void fail(const std::string& message, std::size_t offset) const {
    throw TemplateError(TemplateError::Kind::kSyntax, message, position(offset));
  }

  std::size_t find_tag(std::size_t from) const {
    for (std::size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#'))
        return i;
    }
    return std::string::npos;
  }

  void emit_text(std::string text, std::size_t offset) {
    if (!text.empty())
      tokens_.push_back({Token::Type::kText, std::move(text), 0, 0, position(offset)});
  }

  // After a closing marker: `-` strips all following whitespace, trim_blocks one newline.
  void after_close(char sign, bool block) {
    if (sign == '-') {
      while (pos_ < src_.size() && is_space(src_[pos_])) ++pos_;
    } else if (sign != '+' && block && options_.trim_blocks && pos_ < src_.size() &&
               src_[pos_] == '\n') {
      ++pos_;
    }
  }

  void skip_comment(std::size_t open) {
    const std::size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) fail("missing end of comment tag '#}'", open);
    const char sign =
        end > pos_ && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : '\0';
    pos_ = end + 2;
    after_close(sign, /*block=*/true);
  }

  // Tokens of one {{ ... }} or {% ... %}, up to and including the closing marker.
  void lex_tag(std::size_t open, char type) {
    const bool block = type == '%';
    tokens_.push_back({block ? Token::Type::kBlockBegin : Token::Type::kVarBegin,
                       block ? "{%" : "{{", 0, 0, position(open)});
    const char close = block ? '%' : '}';
    int depth = 0;  // open brackets: a '}}' inside a dict literal does not end the tag
    while (true) {
      while (pos_ < src_.size() && is_space(src_[pos_])) ++pos_;
      if (pos_ >= src_.size()) {
        fail(fmt::format("unexpected end of template: the tag opened here has no '{}}}'",
                         block ? "%" : "}"),
             open);
      }
      if (depth == 0) {
        const char sign = src_[pos_] == '-' || src_[pos_] == '+' ? src_[pos_] : '\0';
        const std::size_t at = pos_ + (sign ? 1 : 0);
        if (!(sign == '+' && !block) && at + 1 < src_.size() && src_[at] == close &&
            src_[at + 1] == '}') {
          tokens_.push_back({block ? Token::Type::kBlockEnd : Token::Type::kVarEnd,
                             block ? "%}" : "}}", 0, 0, position(pos_)});
          pos_ = at + 2;
          after_close(sign, block);
          return;
        }
      }
      const std::size_t start = pos_;
      const char c = src_[pos_];
      if (is_digit(c)) {
        lex_number();
      } else if (is_name_start(c)) {
        while (pos_ < src_.size() && is_name_char(src_[pos_])) ++pos_;
        tokens_.push_back(
            {Token::Type::kName, src_.substr(start, pos_ - start), 0, 0, position(start)});
      } else if (c == '\'' || c == '"') {
        lex_string();
      } else {
        static const char* const kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
        std::string op;
        for (const char* two : kTwo)
          if (src_.compare(pos_, 2, two) == 0) op = two;
        if (op.empty()) {
          if (std::strchr("+-*/%~[](){}|.:,=<>;", c) == nullptr || c == '\0')
            fail(fmt::format("unexpected character '{}' in a tag", c), pos_);
          op = std::string(1, c);
        }
        if (op == "(" || op == "[" || op == "{") ++depth;
        if ((op == ")" || op == "]" || op == "}") && depth > 0) --depth;
        pos_ += op.size();
        tokens_.push_back({Token::Type::kOp, op, 0, 0, position(start)});
      }
    }
  }

  void lex_number() {
    const std::size_t start = pos_;
    const bool after_dot = start > 0 && src_[start - 1] == '.';
    auto digits = [&] {
      while (pos_ < src_.size() && (is_digit(src_[pos_]) || src_[pos_] == '_')) ++pos_;
    };
    digits();
    bool is_float = false;
    if (!after_dot && pos_ + 1 < src_.size() && src_[pos_] == '.' && is_digit(src_[pos_ + 1])) {
      ++pos_;
      digits();
      is_float = true;
    }
    if (!after_dot && pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      std::size_t at = pos_ + 1;
      if (at < src_.size() && (src_[at] == '+' || src_[at] == '-')) ++at;
      if (at < src_.size() && is_digit(src_[at])) {
        pos_ = at;
        digits();
        is_float = true;
      }
    }
    std::string text;
    for (std::size_t i = start; i < pos_; ++i)
      if (src_[i] != '_') text += src_[i];
    Token t{is_float ? Token::Type::kFloat : Token::Type::kInt, text, 0, 0, position(start)};
    try {
      if (is_float) {
        t.float_value = std::stod(text);
      } else {
        t.int_value = std::stoll(text);
      }
    } catch (const std::exception&) {
      fail(fmt::format("number '{}' is out of range", text), start);
    }
    tokens_.push_back(std::move(t));
  }

  // A quoted literal with Python's escapes (\n, \t, \\, \', \", \xhh, \uhhhh, \Uhhhhhhhh, octal).
  void lex_string() {
    const std::size_t start = pos_;
    const char quote = src_[pos_++];
    std::string value;
    while (true) {
      if (pos_ >= src_.size()) fail("unterminated string literal", start);
      const char c = src_[pos_++];
      if (c == quote) break;
      if (c != '\\') {
        value += c;
        continue;
      }
      if (pos_ >= src_.size()) fail("unterminated string literal", start);
      const char e = src_[pos_++];
      switch (e) {
        case 'n':
          value += '\n';
          break;
        case 't':
          value += '\t';
          break;
        case 'r':
          value += '\r';
          break;
        case 'a':
          value += '\a';
          break;
        case 'b':
          value += '\b';
          break;
        case 'f':
          value += '\f';
          break;
        case 'v':
          value += '\v';
          break;
        case '\\':
          value += '\\';
          break;
        case '\'':
          value += '\'';
          break;
        case '"':
          value += '"';
          break;
        case '\n':
          break;  // a line continuation
        case 'x':
        case 'u':
        case 'U': {
          const std::size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (pos_ + n > src_.size()) fail("truncated escape in a string literal", pos_ - 2);
          std::uint32_t cp = 0;
          for (std::size_t i = 0; i < n; ++i) {
            const char h = src_[pos_ + i];
            const int d = is_digit(h)              ? h - '0'
                          : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                          : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                                   : -1;
            if (d < 0) fail("bad hex escape in a string literal", pos_ - 2);
            cp = cp * 16 + static_cast<std::uint32_t>(d);
          }
          if (cp > 0x10ffff) fail("escape outside Unicode in a string literal", pos_ - 2);
          pos_ += n;
          append_utf8(value, cp);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            std::uint32_t cp = static_cast<std::uint32_t>(e - '0');
            for (int i = 0; i < 2 && pos_ < src_.size() && src_[pos_] >= '0' && src_[pos_] <= '7';
                 ++i)
              cp = cp * 8 + static_cast<std::uint32_t>(src_[pos_++] - '0');
            append_utf8(value, cp);
          } else {
            value += '\\';  // Python keeps unknown escapes as written
            value += e;
          }
      }
    }
    tokens_.push_back({Token::Type::kString, std::move(value), 0, 0, position(start)});
  }

  std::string src_;
  LexerOptions options_;
  std::vector<std::size_t> line_starts_{0};
  std::size_t pos_ = 0;
  std::vector<Token> tokens_;
};

std::string normalise_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (std::size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();  // keep_trailing_newline=False
  return out;
}

}  // namespace

std::vector<Token> tokenize(std::string_view source, const LexerOptions& options) {
  return Lexer(normalise_newlines(source), options).run();
}

}  // namespace huddle::jinja
