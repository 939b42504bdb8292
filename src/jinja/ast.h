// The parsed template: statements (Node) holding expressions (Expr).
#pragma once

#include "jinja/error.h"
#include "jinja/value.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace huddle::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,    // value
    kName,       // name
    kList,       // args: items
    kDict,       // kwargs: key expressions are args[2i], values args[2i+1]
    kGetAttr,    // args[0].name
    kGetItem,    // args[0][args[1]]
    kSlice,      // args[0][args[1]:args[2]:args[3]] (null children where omitted)
    kCall,       // args[0](args[1..], kwargs)
    kFilter,     // args[0] | name(args[1..], kwargs)
    kTest,       // args[0] is [not] name(args[1..])
    kUnary,      // name: "-", "+", "not"; args[0]
    kBinary,     // name: + - * / // % ** ~ == != < <= > >= in "not in"; args[0], args[1]
    kAnd,        // args[0] and args[1]
    kOr,         // args[0] or args[1]
    kCondition,  // args[0] if args[1] else args[2] (args[2] null: undefined)
  };
  Kind kind;
  Position at;
  Value value;       // kLiteral
  std::string name;  // kName, kGetAttr, kCall (unused), kFilter, kTest, kUnary, kBinary
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  bool negated = false;  // kTest: `is not`
  int depth = 1;         // of this expression tree (bounded by the parser)
};

struct Node {
  enum class Kind {
    kText,      // text
    kOutput,    // {{ expr }}
    kIf,        // branches: (condition, body)...; a final else has a null condition
    kFor,       // for targets in expr [if filter]: body, else_body
    kSet,       // set targets = expr, or set target.attr = expr (attr non-empty)
    kSetBlock,  // set targets[0] %}body{% endset
    kBreak,
    kContinue,
    kMacro,  // macro name(params with defaults in param_defaults): body
    kBlock,  // a body rendered in place ({% generation %})
  };
  Kind kind = Kind::kText;
  Position at;
  std::string text;
  ExprPtr expr;
  ExprPtr filter;
  std::vector<std::string> targets;
  std::string attr;
  std::vector<std::pair<ExprPtr, std::vector<Node>>> branches;
  std::vector<Node> body;
  std::vector<Node> else_body;
  std::vector<ExprPtr> param_defaults;  // kMacro: one per target (null: required)
};

}  // namespace huddle::jinja
