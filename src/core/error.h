// Typed errors for failures that a file, a flag or a peer can cause.
//
// Contract: code throws one of these for anything that comes from outside the program (a model
// file, a plan, a command line, a network peer); the message names the file, tensor, field, or
// device at fault. Boundaries (CLI main, worker loop, thread tasks) catch huddle::Error and turn
// it into a message and an exit code. Programmer errors use HUDDLE_CHECK (aborts with location).
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace huddle {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A model directory, config.json, checkpoint or tensor is missing or malformed.
class LoadError : public Error {
 public:
  using Error::Error;
};

// The user asked for something the command line or inputs cannot give (bad ids, too long prompt).
class InputError : public Error {
 public:
  using Error::Error;
};

// A graph, plan or program is malformed or does not fit the model.
class PlanError : public Error {
 public:
  using Error::Error;
};

// A peer misbehaved, timed out, disconnected, or failed authentication.
class TransportError : public Error {
 public:
  using Error::Error;
};

// Command-line usage error (exit code 2).
class UsageError : public Error {
 public:
  using Error::Error;
};

[[noreturn]] void check_failed(const char* expr, const char* file, int line,
                               const std::string& msg);

}  // namespace huddle

// Internal invariant; never for data from outside the program.
#define HUDDLE_CHECK(cond, ...)                                                                  \
  do {                                                                                           \
    if (!(cond)) ::huddle::check_failed(#cond, __FILE__, __LINE__, fmt::format("" __VA_ARGS__)); \
  } while (0)
