// Evaluator: renders parsed statements against variables, within a Budget.
//
// Scopes follow Jinja: the globals, then the render's variables, then the template's own
// (top-level `set`); each loop iteration and each macro call opens a fresh scope that `set`
// writes to and that ends with it (a namespace() carries values out of a loop).
#pragma once

#include "jinja/ast.h"
#include "jinja/operators.h"

#include <string>
#include <vector>

namespace huddle::jinja {

class Evaluator {
 public:
  // `globals` and `variables` are looked up in that order of precedence: variables first.
  Evaluator(const Map& globals, const Map& variables, const RenderLimits& limits);
  std::string render(const std::vector<Node>& body);

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  using Frame = std::vector<std::pair<std::string, Value>>;

  Flow render_body(const std::vector<Node>& body);
  Flow render_node(const Node& node);
  Flow render_for(const Node& node);
  void render_set(const Node& node);
  void define_macro(const Node& node);
  Value call_macro(const Node& node, const std::vector<Value>& args, const KeywordArgs& kwargs,
                   Position at);
  void emit(const std::string& text, Position at);

  Value eval(const Expr& e);
  Value eval_call(const Expr& e);
  void eval_arguments(const Expr& e, std::size_t first, std::vector<Value>& args,
                      KeywordArgs& kwargs);
  Value lookup(const std::string& name) const;
  void assign(const std::string& name, Value value);
  void unpack(const std::vector<std::string>& targets, const Value& value, Position at);

  std::vector<Frame> frames_;
  std::string* out_ = nullptr;
  std::size_t output_bytes_ = 0;
  Budget budget_;
  int call_depth_ = 0;
};

}  // namespace huddle::jinja
