// TemplateError: a chat template that cannot be parsed or rendered, with the position at fault.
#pragma once

#include "core/error.h"

#include <string>

namespace huddle::jinja {

// Where in the template source (1-based; column counts bytes).
struct Position {
  int line = 1;
  int column = 1;
};

class TemplateError : public InputError {
 public:
  enum class Kind {
    kSyntax,  // the template does not parse (unterminated tag, unknown tag, bad expression)
    kRender,  // an expression fails while rendering (unknown filter, wrong types, undefined)
    kRaised,  // the template called raise_exception(message)
    kLimit,   // a bound on output, work or nesting was exceeded (a hostile template)
  };

  // what(): "template line L, column C: MESSAGE"; message(): MESSAGE alone (for raise_exception,
  // exactly the template's text).
  TemplateError(Kind kind, std::string message, Position at);

  Kind kind() const { return kind_; }
  const std::string& message() const { return message_; }
  Position position() const { return at_; }

 private:
  Kind kind_;
  std::string message_;
  Position at_;
};

}  // namespace huddle::jinja
