#include "jinja/evaluator.h"

#include "jinja/builtins.h"

#include <fmt/format.h>

namespace huddle::jinja {
namespace {

Map loop_info(std::size_t i, const std::vector<Value>& items) {
  const auto n = static_cast<std::int64_t>(items.size());
  const auto index = static_cast<std::int64_t>(i);
  Map loop;
  loop.set("index0", Value(index));
  loop.set("index", Value(index + 1));
  loop.set("revindex0", Value(n - index - 1));
  loop.set("revindex", Value(n - index));
  loop.set("first", Value(i == 0));
  loop.set("last", Value(index == n - 1));
  loop.set("length", Value(n));
  if (i > 0) loop.set("previtem", items[i - 1]);
  if (index + 1 < n) loop.set("nextitem", items[i + 1]);
  return loop;
}

}  // namespace

Evaluator::Evaluator(const Map& globals, const Map& variables, const RenderLimits& limits)
    : budget_(limits) {
  frames_.emplace_back(globals.items());
  frames_.emplace_back(variables.items());
  frames_.emplace_back();  // the template's own `set`s
}

std::string Evaluator::render(const std::vector<Node>& body) {
  std::string out;
  out_ = &out;
  // break/continue outside a loop end the template, as they cannot be parsed there in Jinja.
  render_body(body);
  return out;
}

void Evaluator::emit(const std::string& text, Position at) {
  output_bytes_ += text.size();
  if (output_bytes_ > budget_.limits().max_output_bytes) {
    throw TemplateError(
        TemplateError::Kind::kLimit,
        fmt::format("the output is longer than {} bytes", budget_.limits().max_output_bytes), at);
  }
  out_->append(text);
}

Evaluator::Flow Evaluator::render_body(const std::vector<Node>& body) {
  for (const Node& node : body) {
    const Flow flow = render_node(node);
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Evaluator::Flow Evaluator::render_node(const Node& node) {
  switch (node.kind) {
    case Node::Kind::kText:
      emit(node.text, node.at);
      return Flow::kNormal;
    case Node::Kind::kOutput:
      emit(eval(*node.expr).str(), node.at);
      return Flow::kNormal;
    case Node::Kind::kIf:
      for (const auto& [condition, body] : node.branches)
        if (!condition || eval(*condition).truthy()) return render_body(body);
      return Flow::kNormal;
    case Node::Kind::kFor:
      return render_for(node);
    case Node::Kind::kSet:
      render_set(node);
      return Flow::kNormal;
    case Node::Kind::kSetBlock: {
      std::string captured;
      std::string* saved = out_;
      out_ = &captured;
      try {
        render_body(node.body);
      } catch (...) {
        out_ = saved;
        throw;
      }
      out_ = saved;
      assign(node.targets[0], Value(std::move(captured)));
      return Flow::kNormal;
    }
    case Node::Kind::kBreak:
      return Flow::kBreak;
    case Node::Kind::kContinue:
      return Flow::kContinue;
    case Node::Kind::kMacro:
      define_macro(node);
      return Flow::kNormal;
    case Node::Kind::kBlock:
      return render_body(node.body);
  }
  return Flow::kNormal;
}

Evaluator::Flow Evaluator::render_for(const Node& node) {
  std::vector<Value> items = iterate(eval(*node.expr), node.at);
  if (node.filter) {
    std::vector<Value> kept;
    for (const Value& item : items) {
      budget_.items(1, node.at);
      frames_.emplace_back();
      try {
        unpack(node.targets, item, node.at);
        if (eval(*node.filter).truthy()) kept.push_back(item);
      } catch (...) {
        frames_.pop_back();
        throw;
      }
      frames_.pop_back();
    }
    items = std::move(kept);
  }
  struct PopFrame {
    std::vector<Frame>& frames;
    ~PopFrame() { frames.pop_back(); }
  };
  if (items.empty()) {
    frames_.emplace_back();
    PopFrame pop{frames_};
    render_body(node.else_body);
    return Flow::kNormal;
  }
  for (std::size_t i = 0; i < items.size(); ++i) {
    budget_.items(1, node.at);
    frames_.emplace_back();
    PopFrame pop{frames_};
    frames_.back().emplace_back("loop", Value::map(loop_info(i, items)));
    unpack(node.targets, items[i], node.at);
    if (render_body(node.body) == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

void Evaluator::unpack(const std::vector<std::string>& targets, const Value& value, Position at) {
  if (targets.size() == 1) {
    assign(targets[0], value);
    return;
  }
  std::vector<Value> parts = iterate(value, at);
  if (parts.size() != targets.size()) {
    render_error(fmt::format("cannot unpack {} values into {} names", parts.size(), targets.size()),
                 at);
  }
  for (std::size_t i = 0; i < targets.size(); ++i) assign(targets[i], parts[i]);
}

void Evaluator::render_set(const Node& node) {
  Value value = eval(*node.expr);
  if (node.attr.empty()) {
    unpack(node.targets, value, node.at);
    return;
  }
  const Value target = lookup(node.targets[0]);
  if (!target.is_map() || !target.as_map().is_namespace) {
    render_error(fmt::format("cannot assign attribute '{}' on '{}': not a namespace", node.attr,
                             node.targets[0]),
                 node.at);
  }
  target.mutable_map().set(node.attr, std::move(value));
}

void Evaluator::define_macro(const Node& node) {
  const Node* macro = &node;
  assign(node.text,
         Value(Function([this, macro](const std::vector<Value>& args, const KeywordArgs& kwargs) {
           return call_macro(*macro, args, kwargs, macro->at);
         })));
}

Value Evaluator::call_macro(const Node& node, const std::vector<Value>& args,
                            const KeywordArgs& kwargs, Position at) {
  if (call_depth_ >= budget_.limits().max_call_depth) {
    throw TemplateError(
        TemplateError::Kind::kLimit,
        fmt::format("macro calls nest deeper than {}", budget_.limits().max_call_depth), at);
  }
  if (args.size() > node.targets.size())
    render_error(fmt::format("macro '{}' takes {} arguments, got {}", node.text,
                             node.targets.size(), args.size()),
                 at);
  // The macro sees the globals, the variables and the template's names, and its parameters.
  std::vector<Frame> saved = std::move(frames_);
  frames_.assign(saved.begin(), saved.begin() + 3);
  frames_.emplace_back();
  std::string captured;
  std::string* saved_out = out_;
  out_ = &captured;
  ++call_depth_;
  const auto restore = [&] {
    --call_depth_;
    out_ = saved_out;
    // Names the macro's body set at the template level stay in the macro (as in Jinja).
    frames_ = std::move(saved);
  };
  try {
    for (std::size_t i = 0; i < node.targets.size(); ++i) {
      Value v;
      if (i < args.size()) {
        v = args[i];
      } else {
        bool found = false;
        for (const auto& [k, kv] : kwargs) {
          if (k == node.targets[i]) {
            v = kv;
            found = true;
          }
        }
        if (!found && node.param_defaults[i]) v = eval(*node.param_defaults[i]);
      }
      frames_.back().emplace_back(node.targets[i], std::move(v));
    }
    render_body(node.body);
  } catch (...) {
    restore();
    throw;
  }
  restore();
  return Value(std::move(captured));
}

Value Evaluator::lookup(const std::string& name) const {
  for (auto frame = frames_.rbegin(); frame != frames_.rend(); ++frame) {
    for (auto it = frame->rbegin(); it != frame->rend(); ++it)
      if (it->first == name) return it->second;
  }
  return Value();
}

void Evaluator::assign(const std::string& name, Value value) {
  Frame& frame = frames_.back();
  for (auto& [k, v] : frame) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  frame.emplace_back(name, std::move(value));
}

void Evaluator::eval_arguments(const Expr& e, std::size_t first, std::vector<Value>& args,
                               KeywordArgs& kwargs) {
  for (std::size_t i = first; i < e.args.size(); ++i) args.push_back(eval(*e.args[i]));
  for (const auto& [k, v] : e.kwargs) kwargs.emplace_back(k, eval(*v));
}

Value Evaluator::eval_call(const Expr& e) {
  const Expr& callee = *e.args[0];
  std::vector<Value> args;
  KeywordArgs kwargs;
  if (callee.kind == Expr::Kind::kGetAttr) {
    const Value object = eval(*callee.args[0]);
    eval_arguments(e, 1, args, kwargs);
    if (auto result = call_method(object, callee.name, args, kwargs, e.at, budget_))
      return *std::move(result);
    const Value member = get_attr(object, callee.name, callee.at);
    if (!member.is_function()) {
      render_error(fmt::format("'{}' object has no method '{}'", object.type_name(), callee.name),
                   e.at);
    }
    return member.as_function()(args, kwargs);
  }
  const Value f = eval(callee);
  if (!f.is_function()) {
    if (callee.kind == Expr::Kind::kName && f.is_undefined())
      render_error(fmt::format("'{}' is undefined", callee.name), e.at);
    render_error(fmt::format("'{}' object is not callable", f.type_name()), e.at);
  }
  eval_arguments(e, 1, args, kwargs);
  try {
    Value result = f.as_function()(args, kwargs);
    // What a global made (range's list, a macro's text) counts against the budget.
    if (result.is_list()) budget_.items(result.as_list().size(), e.at);
    if (result.is_string()) budget_.bytes(result.as_string().size(), e.at);
    return result;
  } catch (const TemplateError& error) {
    // raise_exception() does not know where it was called from.
    if (error.position().line == 0) throw TemplateError(error.kind(), error.message(), e.at);
    throw;
  } catch (const InputError& error) {
    render_error(error.what(), e.at);
  }
}

Value Evaluator::eval(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::kLiteral:
      return e.value;
    case Expr::Kind::kName:
      return lookup(e.name);
    case Expr::Kind::kList: {
      List items;
      for (const ExprPtr& item : e.args) items.push_back(eval(*item));
      budget_.items(items.size(), e.at);
      return Value(std::move(items));
    }
    case Expr::Kind::kDict: {
      Map m;
      for (std::size_t i = 0; i + 1 < e.args.size(); i += 2) {
        const Value key = eval(*e.args[i]);
        if (!key.is_string()) render_error("dict keys must be strings", e.args[i]->at);
        m.set(key.as_string(), eval(*e.args[i + 1]));
      }
      budget_.items(m.size(), e.at);
      return Value::map(std::move(m));
    }
    case Expr::Kind::kGetAttr:
      return get_attr(eval(*e.args[0]), e.name, e.at);
    case Expr::Kind::kGetItem:
      return get_item(eval(*e.args[0]), eval(*e.args[1]), e.at);
    case Expr::Kind::kSlice: {
      const Value target = eval(*e.args[0]);
      Value parts[3];
      for (int i = 0; i < 3; ++i)
        if (e.args[static_cast<std::size_t>(i) + 1])
          parts[i] = eval(*e.args[static_cast<std::size_t>(i) + 1]);
      return slice(target, parts[0], parts[1], parts[2], e.at, budget_);
    }
    case Expr::Kind::kCall:
      return eval_call(e);
    case Expr::Kind::kFilter: {
      const Value value = eval(*e.args[0]);
      std::vector<Value> args;
      KeywordArgs kwargs;
      eval_arguments(e, 1, args, kwargs);
      return call_filter(e.name, value, args, kwargs, e.at, budget_);
    }
    case Expr::Kind::kTest: {
      const Value value = eval(*e.args[0]);
      std::vector<Value> args;
      KeywordArgs kwargs;
      eval_arguments(e, 1, args, kwargs);
      return Value(call_test(e.name, value, args, e.at) != e.negated);
    }
    case Expr::Kind::kUnary: {
      const Value v = eval(*e.args[0]);
      if (e.name == "not") return Value(!v.truthy());
      if (v.is_int() && e.name == "-" && v.as_int() != INT64_MIN) return Value(-v.as_int());
      if (v.is_int() || v.is_bool())
        return Value(e.name == "-" ? -static_cast<std::int64_t>(v.as_number())
                                   : static_cast<std::int64_t>(v.as_number()));
      if (v.is_float()) return Value(e.name == "-" ? -v.as_float() : v.as_float());
      render_error(fmt::format("bad operand type for unary {}: '{}'", e.name, v.type_name()), e.at);
    }
    case Expr::Kind::kBinary:
      return binary(e.name, eval(*e.args[0]), eval(*e.args[1]), e.at, budget_);
    case Expr::Kind::kAnd: {
      Value a = eval(*e.args[0]);
      return a.truthy() ? eval(*e.args[1]) : a;
    }
    case Expr::Kind::kOr: {
      Value a = eval(*e.args[0]);
      return a.truthy() ? a : eval(*e.args[1]);
    }
    case Expr::Kind::kCondition:
      if (eval(*e.args[1]).truthy()) return eval(*e.args[0]);
      return e.args[2] ? eval(*e.args[2]) : Value();
  }
  return Value();
}

}  // namespace huddle::jinja
