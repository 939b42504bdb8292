#include "jinja/error.h"

#include <fmt/format.h>

namespace huddle::jinja {

TemplateError::TemplateError(Kind kind, std::string message, Position at)
    : InputError(fmt::format("template line {}, column {}: {}", at.line, at.column, message)),
      kind_(kind),
      message_(std::move(message)),
      at_(at) {}

}  // namespace huddle::jinja
