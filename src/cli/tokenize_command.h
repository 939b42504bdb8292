// `huddle tokenize` and `huddle detokenize`: text to token ids and back with a model directory's
// own tokenizer (tokenizer.json or tokenizer.model).
//
//   huddle tokenize --model DIR --text TEXT [--json] [--no-special] [--max-tokens N]
//                   [--truncate none|left|right]
//     prints the ids, comma-separated (or a JSON list with --json). Text of any length
//     tokenizes (only running a model is bounded by its context). With --max-tokens N, more than
//     N ids is an error unless --truncate says which end to cut ("right" keeps the start, "left"
//     keeps the end; special tokens are kept); --truncate alone cuts to the model's context.
//   huddle detokenize --model DIR --ids 1,2,3 [--skip-special]
//     prints the text, followed by a newline.
//
// The functions below do the work and are what the command callbacks call, so tests can reach
// everything without spawning the binary.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace CLI {
class App;
}

namespace huddle::cli {

struct TokenizeOptions {
  std::string model_dir;
  std::string text;
  bool json = false;
  bool no_special = false;
  std::optional<std::size_t> max_tokens;  // default: none (with a truncation: the context)
  std::string truncate = "none";          // none | left | right
};

struct DetokenizeOptions {
  std::string model_dir;
  std::string ids;  // "1,2,3"
  bool skip_special = false;
};

// The line `huddle tokenize` prints (with its trailing newline). Throws LoadError for a bad model
// directory, InputError for more ids than max_tokens (without a truncation), UsageError for bad
// option values.
std::string tokenize_to_string(const TokenizeOptions& options);

// The text `huddle detokenize` prints (with a trailing newline). Throws UsageError for a malformed
// id list and InputError for ids outside the vocabulary.
std::string detokenize_to_string(const DetokenizeOptions& options);

// Registers both subcommands; their callbacks print to stdout and throw huddle::Error subclasses.
void add_tokenize_commands(CLI::App& app);

}  // namespace huddle::cli
