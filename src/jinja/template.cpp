#include "jinja/template.h"

#include "jinja/evaluator.h"
#include "jinja/parser.h"

#include <fmt/format.h>

namespace huddle::jinja {
namespace {

Value first_arg(const std::vector<Value>& args, const KeywordArgs& kwargs, const char* name) {
  if (!args.empty()) return args[0];
  for (const auto& [k, v] : kwargs)
    if (k == name) return v;
  return Value();
}

Map globals(const RenderOptions& options) {
  Map g;
  g.set("raise_exception",
        Value(Function([](const std::vector<Value>& args, const KeywordArgs& kwargs) -> Value {
          throw TemplateError(TemplateError::Kind::kRaised,
                              first_arg(args, kwargs, "message").str(), Position{0, 0});
        })));
  g.set("namespace", Value(Function([](const std::vector<Value>& args, const KeywordArgs& kwargs) {
          Map ns;
          ns.is_namespace = true;
          if (!args.empty()) {
            if (!args[0].is_map()) throw InputError("namespace() takes a mapping or keywords");
            for (const auto& [k, v] : args[0].as_map().items()) ns.set(k, v);
          }
          for (const auto& [k, v] : kwargs) ns.set(k, v);
          return Value::map(std::move(ns));
        })));
  g.set("dict", Value(Function([](const std::vector<Value>& args, const KeywordArgs& kwargs) {
          Map m;
          if (!args.empty() && args[0].is_map())
            for (const auto& [k, v] : args[0].as_map().items()) m.set(k, v);
          for (const auto& [k, v] : kwargs) m.set(k, v);
          return Value::map(std::move(m));
        })));
  const std::int64_t max_items = options.limits.max_iterations;
  g.set("range", Value(Function([max_items](const std::vector<Value>& args, const KeywordArgs&) {
          std::int64_t bounds[3] = {0, 0, 1};
          if (args.empty() || args.size() > 3) throw InputError("range() takes 1 to 3 integers");
          for (std::size_t i = 0; i < args.size(); ++i)
            if (!args[i].is_int()) throw InputError("range() takes integers");
          if (args.size() == 1) {
            bounds[1] = args[0].as_int();
          } else {
            bounds[0] = args[0].as_int();
            bounds[1] = args[1].as_int();
            if (args.size() == 3) bounds[2] = args[2].as_int();
          }
          if (bounds[2] == 0) throw InputError("range() step must not be zero");
          const long double count = (static_cast<long double>(bounds[1]) - bounds[0]) / bounds[2];
          if (count > static_cast<long double>(max_items))
            throw InputError(fmt::format("range() of more than {} items", max_items));
          List out;
          for (std::int64_t i = bounds[0]; bounds[2] > 0 ? i < bounds[1] : i > bounds[1];
               i += bounds[2])
            out.emplace_back(i);
          return Value(std::move(out));
        })));
  std::function<std::time_t()> now = options.now;
  if (!now) now = [] { return std::time(nullptr); };
  g.set("strftime_now",
        Value(Function([now](const std::vector<Value>& args, const KeywordArgs& kwargs) {
          const Value format = first_arg(args, kwargs, "format");
          if (!format.is_string()) throw InputError("strftime_now() takes a format string");
          const std::time_t t = now();
          std::tm local{};
          localtime_r(&t, &local);
          char buf[256];
          const std::size_t n = std::strftime(buf, sizeof buf, format.as_string().c_str(), &local);
          return Value(std::string(buf, n));
        })));
  return g;
}

}  // namespace

Template::Template(std::string_view source, const LexerOptions& lexer)
    : body_(parse(tokenize(source, lexer))) {}

std::string Template::render(const Map& variables, const RenderOptions& options) const {
  Evaluator evaluator(globals(options), variables, options.limits);
  try {
    return evaluator.render(body_);
  } catch (const TemplateError&) {
    throw;
  } catch (const InputError& e) {
    throw TemplateError(TemplateError::Kind::kRender, e.what(), Position{});
  }
}

}  // namespace huddle::jinja
