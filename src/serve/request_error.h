// RequestError: a client's mistake, answered as an OpenAI-style error
// {"error": {"message", "type", "param", "code"}} with an HTTP status.
#pragma once

#include "core/error.h"

#include <string>

namespace huddle::serve {

class RequestError : public InputError {
 public:
  RequestError(int status, std::string message, std::string type = "invalid_request_error",
               std::string param = "", std::string code = "")
      : InputError(message),
        status_(status),
        type_(std::move(type)),
        param_(std::move(param)),
        code_(std::move(code)) {}

  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::string& param() const { return param_; }  // the request field at fault, or ""
  const std::string& code() const { return code_; }

 private:
  int status_;
  std::string type_;
  std::string param_;
  std::string code_;
};

}  // namespace huddle::serve
