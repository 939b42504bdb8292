// A Jinja template engine for chat templates (tokenizer_config.json's `chat_template`).
//
// Written by hand: no C++ Jinja library is packaged in Debian. It implements the subset that the
// chat templates of Llama 3/3.1/3.2, Qwen2/2.5, Mistral, Phi-3 and Gemma use, with the
// environment Hugging Face renders them in (transformers' apply_chat_template): trim_blocks and
// lstrip_blocks on, loop controls (break/continue), tojson without HTML escaping, and the globals
// raise_exception(message), strftime_now(format), namespace(...), range(...) and dict(...).
// docs/serving.md lists the supported subset; tests/jinja compare the output with Python's
// jinja2 byte for byte.
//
// Contract: parsing and rendering throw TemplateError (with the template line and column) and
// nothing else for any input; rendering is bounded by RenderLimits (output size, work, loop
// iterations, nesting), so a hostile template ends with an error rather than hanging.
#pragma once

#include "jinja/ast.h"
#include "jinja/lexer.h"
#include "jinja/operators.h"
#include "jinja/value.h"

#include <ctime>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace huddle::jinja {

struct RenderOptions {
  RenderLimits limits;
  // strftime_now's clock (local time); default: now.
  std::function<std::time_t()> now;
};

class Template {
 public:
  // Parses `source`; TemplateError (kSyntax or kLimit) when it does not parse.
  explicit Template(std::string_view source, const LexerOptions& lexer = {});

  // Renders with `variables` (messages, add_generation_prompt, bos_token, ...).
  std::string render(const Map& variables, const RenderOptions& options = {}) const;

 private:
  std::vector<Node> body_;
};

}  // namespace huddle::jinja
