// Lexer: template source to tokens, with Jinja's whitespace control applied to the text tokens:
// `{%-`/`-%}` (and the same on `{{ }}`, `{# #}`) strip the whitespace beside the tag;
// trim_blocks drops the first newline after a block or comment tag; lstrip_blocks drops the
// spaces and tabs between a line's start and a block or comment tag (`{%+` keeps them).
// Newlines are normalised to "\n" and one trailing newline is dropped (Jinja's defaults).
// Comments produce no tokens.
#pragma once

#include "jinja/error.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace huddle::jinja {

struct Token {
  enum class Type {
    kText,        // literal output
    kVarBegin,    // {{
    kVarEnd,      // }}
    kBlockBegin,  // {%
    kBlockEnd,    // %}
    kName,        // identifiers and keywords (if, and, not, true, ...)
    kString,      // text: the literal's value, escapes resolved
    kInt,
    kFloat,
    kOp,  // text: one of + - * / // % ** ~ == != < <= > >= = ( ) [ ] { } | . : , ;
    kEof,
  };
  Type type;
  std::string text;
  std::int64_t int_value = 0;
  double float_value = 0;
  Position at;
};

struct LexerOptions {
  bool trim_blocks = true;  // Hugging Face's chat template environment sets both
  bool lstrip_blocks = true;
};

// Throws TemplateError (kSyntax) for an unterminated tag, comment or string and for characters
// that start no token.
std::vector<Token> tokenize(std::string_view source, const LexerOptions& options = {});

}  // namespace huddle::jinja
