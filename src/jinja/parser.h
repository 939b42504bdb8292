// Parser: tokens to statements, Jinja's grammar and operator precedence (loosest first):
// `x if c else y`, or, and, not, comparisons and `in`, + -, ~, * / // %, **, unary - +, then
// postfix `.attr`, `[i]`, `[a:b:c]`, `(args)`, `| filter`, `is test`.
#pragma once

#include "jinja/ast.h"
#include "jinja/lexer.h"

#include <vector>

namespace huddle::jinja {

// Nesting deeper than this (blocks inside blocks, or parentheses, brackets and operators inside
// one another) is refused: a hostile template cannot exhaust the stack.
inline constexpr int kMaxNesting = 100;
// Expression trees deeper than this (`a + b + c + ...`, `x | f | g | ...`, `x.a.b.c...`) are
// refused too: evaluating and freeing them recurses once per level.
inline constexpr int kMaxExpressionDepth = 256;

// Throws TemplateError (kSyntax, or kLimit for nesting) at the offending token.
std::vector<Node> parse(const std::vector<Token>& tokens);

}  // namespace huddle::jinja
