#include "jinja/parser.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace huddle::jinja {
namespace {

using Type = Token::Type;

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : t_(tokens) {}

  std::vector<Node> parse_template() {
    std::vector<Node> body = parse_body({});
    if (peek().type != Type::kEof) fail(fmt::format("unexpected '{}'", peek().text));
    return body;
  }

 private:
  // Depth guard for recursion.
  struct Nest {
    explicit Nest(Parser& p) : p_(p) {
      if (++p_.depth_ > kMaxNesting) {
        throw TemplateError(TemplateError::Kind::kLimit,
                            fmt::format("the template nests deeper than {} levels", kMaxNesting),
                            p_.peek().at);
      }
    }
    ~Nest() { --p_.depth_; }
    Parser& p_;
  };

  static Node node(Node::Kind kind, Position at, std::string text = "") {
    Node n;
    n.kind = kind;
    n.at = at;
    n.text = std::move(text);
    return n;
  }

  const Token& peek(std::size_t ahead = 0) const { return t_[std::min(i_ + ahead, t_.size() - 1)]; }
  const Token& next() {
    const Token& t = peek();
    if (i_ < t_.size() - 1) ++i_;
    return t;
  }
  [[noreturn]] void fail(const std::string& message) const { fail_at(message, peek().at); }
  [[noreturn]] static void fail_at(const std::string& message, Position at) {
    throw TemplateError(TemplateError::Kind::kSyntax, message, at);
  }
  static std::string describe(const Token& t) {
    switch (t.type) {
      case Type::kEof:
        return "end of template";
      case Type::kBlockEnd:
        return "'%}'";
      case Type::kVarEnd:
        return "'}}'";
      case Type::kString:
        return "a string";
      case Type::kText:
        return "text";
      default:
        return fmt::format("'{}'", t.text);
    }
  }
  bool at_op(const char* op) const { return peek().type == Type::kOp && peek().text == op; }
  bool at_name(const char* name) const { return peek().type == Type::kName && peek().text == name; }
  void expect_op(const char* op) {
    if (!at_op(op)) fail(fmt::format("expected '{}', found {}", op, describe(peek())));
    next();
  }
  std::string expect_name() {
    if (peek().type != Type::kName)
      fail(fmt::format("expected a name, found {}", describe(peek())));
    return next().text;
  }
  void expect_block_end() {
    if (peek().type != Type::kBlockEnd)
      fail(fmt::format("expected '%}}', found {}", describe(peek())));
    next();
  }

  // Statements up to (not including) a block tag whose name is in `ends`; the caller consumes it.
  std::vector<Node> parse_body(const std::set<std::string>& ends) {
    Nest nest(*this);
    std::vector<Node> body;
    while (true) {
      const Token& t = peek();
      if (t.type == Type::kEof) {
        if (!ends.empty()) {
          fail(fmt::format("unexpected end of template: expected {{% {} %}}", *ends.rbegin()));
        }
        return body;
      }
      if (t.type == Type::kText) {
        body.push_back(node(Node::Kind::kText, t.at, t.text));
        next();
      } else if (t.type == Type::kVarBegin) {
        next();
        Node n = node(Node::Kind::kOutput, t.at);
        n.expr = parse_expression();
        if (peek().type != Type::kVarEnd)
          fail(fmt::format("expected '}}}}', found {}", describe(peek())));
        next();
        body.push_back(std::move(n));
      } else if (t.type == Type::kBlockBegin) {
        if (peek(1).type == Type::kName && ends.count(peek(1).text)) return body;
        next();
        body.push_back(parse_statement(t.at));
      } else {
        fail(fmt::format("unexpected {}", describe(t)));
      }
    }
  }

  // After '{%' and at an end tag named `name`: consumes "{% name %}".
  void end_tag(const char* name) {
    next();  // {%
    if (!at_name(name)) fail(fmt::format("expected {{% {} %}}", name));
    next();
    expect_block_end();
  }

  Node parse_statement(Position at) {
    if (peek().type != Type::kName)
      fail(fmt::format("expected a tag name, found {}", describe(peek())));
    const std::string tag = next().text;
    if (tag == "if") return parse_if(at);
    if (tag == "for") return parse_for(at);
    if (tag == "set") return parse_set(at);
    if (tag == "macro") return parse_macro(at);
    if (tag == "break" || tag == "continue") {
      expect_block_end();
      return node(tag == "break" ? Node::Kind::kBreak : Node::Kind::kContinue, at);
    }
    if (tag == "generation") {
      expect_block_end();
      Node n = node(Node::Kind::kBlock, at);
      n.body = parse_body({"endgeneration"});
      end_tag("endgeneration");
      return n;
    }
    fail_at(fmt::format("unknown tag '{}'", tag), at);
  }

  Node parse_if(Position at) {
    Node n = node(Node::Kind::kIf, at);
    ExprPtr condition = parse_expression();
    expect_block_end();
    while (true) {
      std::vector<Node> body = parse_body({"elif", "else", "endif"});
      n.branches.emplace_back(std::move(condition), std::move(body));
      next();  // {%
      const std::string tag = next().text;
      if (tag == "endif") {
        expect_block_end();
        return n;
      }
      if (tag == "else") {
        expect_block_end();
        n.branches.emplace_back(nullptr, parse_body({"endif"}));
        end_tag("endif");
        return n;
      }
      condition = parse_expression();  // elif
      expect_block_end();
    }
  }

  std::vector<std::string> parse_targets() {
    std::vector<std::string> targets;
    const bool paren = at_op("(");
    if (paren) next();
    targets.push_back(expect_name());
    while (at_op(",")) {
      next();
      targets.push_back(expect_name());
    }
    if (paren) expect_op(")");
    return targets;
  }

  Node parse_for(Position at) {
    Node n = node(Node::Kind::kFor, at);
    n.targets = parse_targets();
    if (!at_name("in")) fail(fmt::format("expected 'in', found {}", describe(peek())));
    next();
    n.expr = parse_or();  // no `if ... else`: a trailing `if` filters the items
    if (at_name("if")) {
      next();
      n.filter = parse_expression();
    }
    if (at_name("recursive")) fail("recursive loops are not supported");
    expect_block_end();
    n.body = parse_body({"else", "endfor"});
    next();  // {%
    if (next().text == "else") {
      expect_block_end();
      n.else_body = parse_body({"endfor"});
      end_tag("endfor");
    } else {
      expect_block_end();
    }
    return n;
  }

  Node parse_set(Position at) {
    Node n = node(Node::Kind::kSet, at);
    if (peek().type == Type::kName && at_op_ahead(1, ".")) {
      n.targets.push_back(next().text);
      next();
      n.attr = expect_name();
    } else {
      n.targets = parse_targets();
    }
    if (peek().type == Type::kBlockEnd && n.attr.empty() && n.targets.size() == 1) {
      next();
      n.kind = Node::Kind::kSetBlock;
      n.body = parse_body({"endset"});
      end_tag("endset");
      return n;
    }
    expect_op("=");
    n.expr = parse_expression();
    // `set a = 1, 2` makes a tuple.
    if (at_op(",")) n.expr = parse_tuple_rest(std::move(n.expr));
    expect_block_end();
    return n;
  }

  Node parse_macro(Position at) {
    Node n = node(Node::Kind::kMacro, at);
    n.text = expect_name();
    expect_op("(");
    while (!at_op(")")) {
      n.targets.push_back(expect_name());
      if (at_op("=")) {
        next();
        n.param_defaults.push_back(parse_expression());
      } else {
        n.param_defaults.push_back(nullptr);
      }
      if (!at_op(",")) break;
      next();
    }
    expect_op(")");
    expect_block_end();
    n.body = parse_body({"endmacro"});
    end_tag("endmacro");
    return n;
  }

  bool at_op_ahead(std::size_t ahead, const char* op) const {
    return peek(ahead).type == Type::kOp && peek(ahead).text == op;
  }

  ExprPtr make(Expr::Kind kind, Position at) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->at = at;
    return e;
  }
  // Sets e's depth from its children; TemplateError (kLimit) past kMaxExpressionDepth.
  static ExprPtr checked(ExprPtr e) {
    int depth = 0;
    for (const ExprPtr& a : e->args)
      if (a) depth = std::max(depth, a->depth);
    for (const auto& [k, v] : e->kwargs) depth = std::max(depth, v->depth);
    e->depth = depth + 1;
    if (e->depth > kMaxExpressionDepth) {
      throw TemplateError(
          TemplateError::Kind::kLimit,
          fmt::format("an expression nests deeper than {} levels", kMaxExpressionDepth), e->at);
    }
    return e;
  }
  ExprPtr binary(Expr::Kind kind, std::string op, ExprPtr a, ExprPtr b, Position at) {
    ExprPtr e = make(kind, at);
    e->name = std::move(op);
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return checked(std::move(e));
  }

  ExprPtr parse_tuple_rest(ExprPtr first) {
    ExprPtr list = make(Expr::Kind::kList, first->at);
    list->args.push_back(std::move(first));
    while (at_op(",")) {
      next();
      if (peek().type == Type::kBlockEnd || at_op(")")) break;
      list->args.push_back(parse_expression());
    }
    return checked(std::move(list));
  }

  ExprPtr parse_expression() {
    Nest nest(*this);
    ExprPtr e = parse_or();
    while (at_name("if")) {
      const Position at = next().at;
      ExprPtr condition = parse_or();
      ExprPtr otherwise;
      if (at_name("else")) {
        next();
        otherwise = parse_expression();  // `a if x else b if y else c` nests to the right
      }
      ExprPtr c = make(Expr::Kind::kCondition, at);
      c->args.push_back(std::move(e));
      c->args.push_back(std::move(condition));
      c->args.push_back(std::move(otherwise));
      e = checked(std::move(c));
    }
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr e = parse_and();
    while (at_name("or")) {
      const Position at = next().at;
      e = binary(Expr::Kind::kOr, "or", std::move(e), parse_and(), at);
    }
    return e;
  }

  ExprPtr parse_and() {
    ExprPtr e = parse_not();
    while (at_name("and")) {
      const Position at = next().at;
      e = binary(Expr::Kind::kAnd, "and", std::move(e), parse_not(), at);
    }
    return e;
  }

  ExprPtr parse_not() {
    if (at_name("not")) {
      Nest nest(*this);
      const Position at = next().at;
      ExprPtr e = make(Expr::Kind::kUnary, at);
      e->name = "not";
      e->args.push_back(parse_not());
      return checked(std::move(e));
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    ExprPtr e = parse_math1();
    while (true) {
      const Position at = peek().at;
      std::string op;
      if (peek().type == Type::kOp &&
          (peek().text == "==" || peek().text == "!=" || peek().text == "<" ||
           peek().text == "<=" || peek().text == ">" || peek().text == ">=")) {
        op = next().text;
      } else if (at_name("in")) {
        next();
        op = "in";
      } else if (at_name("not") && peek(1).type == Type::kName && peek(1).text == "in") {
        next();
        next();
        op = "not in";
      } else {
        return e;
      }
      e = binary(Expr::Kind::kBinary, op, std::move(e), parse_math1(), at);
    }
  }

  ExprPtr parse_math1() {
    ExprPtr e = parse_concat();
    while (at_op("+") || at_op("-")) {
      const Token& t = next();
      e = binary(Expr::Kind::kBinary, t.text, std::move(e), parse_concat(), t.at);
    }
    return e;
  }

  ExprPtr parse_concat() {
    ExprPtr e = parse_math2();
    while (at_op("~")) {
      const Token& t = next();
      e = binary(Expr::Kind::kBinary, "~", std::move(e), parse_math2(), t.at);
    }
    return e;
  }

  ExprPtr parse_math2() {
    ExprPtr e = parse_pow();
    while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
      const Token& t = next();
      e = binary(Expr::Kind::kBinary, t.text, std::move(e), parse_pow(), t.at);
    }
    return e;
  }

  ExprPtr parse_pow() {
    ExprPtr e = parse_unary(true);
    while (at_op("**")) {
      const Token& t = next();
      e = binary(Expr::Kind::kBinary, "**", std::move(e), parse_unary(true), t.at);
    }
    return e;
  }

  ExprPtr parse_unary(bool with_filter) {
    Nest nest(*this);
    ExprPtr e;
    if (at_op("-") || at_op("+")) {
      const Token& t = next();
      e = make(Expr::Kind::kUnary, t.at);
      e->name = t.text;
      e->args.push_back(parse_unary(false));
      e = checked(std::move(e));
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filters(std::move(e));
    return e;
  }

  ExprPtr parse_primary() {
    const Token& t = peek();
    switch (t.type) {
      case Type::kName: {
        next();
        if (t.text == "true" || t.text == "True") return literal(Value(true), t.at);
        if (t.text == "false" || t.text == "False") return literal(Value(false), t.at);
        if (t.text == "none" || t.text == "None") return literal(Value(nullptr), t.at);
        ExprPtr e = make(Expr::Kind::kName, t.at);
        e->name = t.text;
        return e;
      }
      case Type::kString: {
        std::string s = next().text;
        while (peek().type == Type::kString) s += next().text;  // "a" "b" is "ab"
        return literal(Value(std::move(s)), t.at);
      }
      case Type::kInt:
        next();
        return literal(Value(t.int_value), t.at);
      case Type::kFloat:
        next();
        return literal(Value(t.float_value), t.at);
      case Type::kOp:
        if (t.text == "(") {
          next();
          if (at_op(")")) {
            next();
            return make(Expr::Kind::kList, t.at);
          }
          ExprPtr e = parse_expression();
          if (at_op(",")) e = parse_tuple_rest(std::move(e));
          expect_op(")");
          return e;
        }
        if (t.text == "[") {
          next();
          ExprPtr e = make(Expr::Kind::kList, t.at);
          while (!at_op("]")) {
            e->args.push_back(parse_expression());
            if (!at_op(",")) break;
            next();
          }
          expect_op("]");
          return checked(std::move(e));
        }
        if (t.text == "{") {
          next();
          ExprPtr e = make(Expr::Kind::kDict, t.at);
          while (!at_op("}")) {
            e->args.push_back(parse_expression());
            expect_op(":");
            e->args.push_back(parse_expression());
            if (!at_op(",")) break;
            next();
          }
          expect_op("}");
          return checked(std::move(e));
        }
        break;
      default:
        break;
    }
    fail(fmt::format("expected an expression, found {}", describe(t)));
  }

  ExprPtr literal(Value v, Position at) {
    ExprPtr e = make(Expr::Kind::kLiteral, at);
    e->value = std::move(v);
    return e;
  }

  ExprPtr parse_postfix(ExprPtr e) {
    while (true) {
      Nest nest(*this);
      if (at_op(".")) {
        const Position at = next().at;
        ExprPtr g;
        if (peek().type == Type::kInt) {
          g = make(Expr::Kind::kGetItem, at);
          g->args.push_back(std::move(e));
          g->args.push_back(literal(Value(next().int_value), at));
        } else {
          g = make(Expr::Kind::kGetAttr, at);
          g->name = expect_name();
          g->args.push_back(std::move(e));
        }
        e = checked(std::move(g));
      } else if (at_op("[")) {
        e = parse_subscript(std::move(e));
      } else if (at_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr target) {
    const Position at = next().at;  // [
    ExprPtr parts[3];
    int colons = 0;
    for (int part = 0; part < 3; ++part) {
      if (!at_op(":") && !at_op("]")) parts[part] = parse_expression();
      if (at_op(":") && part < 2) {
        next();
        ++colons;
        continue;
      }
      break;
    }
    expect_op("]");
    ExprPtr e = make(colons == 0 ? Expr::Kind::kGetItem : Expr::Kind::kSlice, at);
    e->args.push_back(std::move(target));
    if (colons == 0) {
      if (!parts[0]) fail_at("empty subscript", at);
      e->args.push_back(std::move(parts[0]));
    } else {
      for (ExprPtr& p : parts) e->args.push_back(std::move(p));
    }
    return checked(std::move(e));
  }

  // (args, name=kwargs) into e->args (after whatever e already holds) and e->kwargs.
  void parse_arguments(Expr& e) {
    expect_op("(");
    while (!at_op(")")) {
      if (peek().type == Type::kName && at_op_ahead(1, "=")) {
        std::string key = next().text;
        next();
        e.kwargs.emplace_back(std::move(key), parse_expression());
      } else {
        if (!e.kwargs.empty()) fail("a positional argument follows a keyword argument");
        e.args.push_back(parse_expression());
      }
      if (!at_op(",")) break;
      next();
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr callee) {
    ExprPtr e = make(Expr::Kind::kCall, peek().at);
    e->args.push_back(std::move(callee));
    parse_arguments(*e);
    return checked(std::move(e));
  }

  ExprPtr parse_filters(ExprPtr e) {
    while (true) {
      Nest nest(*this);
      if (at_op("|")) {
        next();
        ExprPtr f = make(Expr::Kind::kFilter, peek().at);
        f->name = expect_name();
        while (at_op(".")) {  // dotted filter names
          next();
          f->name += "." + expect_name();
        }
        f->args.push_back(std::move(e));
        if (at_op("(")) parse_arguments(*f);
        e = checked(std::move(f));
      } else if (at_name("is")) {
        next();
        ExprPtr test = make(Expr::Kind::kTest, peek().at);
        if (at_name("not")) {
          next();
          test->negated = true;
        }
        test->name = expect_name();
        test->args.push_back(std::move(e));
        if (at_op("(")) {
          parse_arguments(*test);
        } else if (takes_bare_argument()) {
          test->args.push_back(parse_primary());
          test->args.back() = parse_postfix(std::move(test->args.back()));
        }
        e = checked(std::move(test));
      } else if (at_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  // `x is divisibleby 3`, `x is sameas none`: a test's single argument without parentheses.
  bool takes_bare_argument() const {
    const Token& t = peek();
    if (t.type == Type::kString || t.type == Type::kInt || t.type == Type::kFloat) return true;
    if (t.type == Type::kOp) return t.text == "[" || t.text == "{";
    if (t.type == Type::kName) {
      static const std::set<std::string> kStop = {"else", "or", "and", "if", "in", "is", "not"};
      return kStop.count(t.text) == 0;
    }
    return false;
  }

  const std::vector<Token>& t_;
  std::size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace

std::vector<Node> parse(const std::vector<Token>& tokens) {
  return Parser(tokens).parse_template();
}

}  // namespace huddle::jinja
