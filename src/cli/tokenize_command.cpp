// `huddle tokenize` / `huddle detokenize` (see tokenize_command.h).
#include "cli/tokenize_command.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <memory>

#include "cli/command.h"
#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace huddle::cli {
namespace {

Truncation parse_truncation(const std::string& name) {
  if (name == "none") return Truncation::kError;
  if (name == "right") return Truncation::kKeepStart;
  if (name == "left") return Truncation::kKeepEnd;
  throw UsageError(fmt::format("--truncate: '{}' is not one of none, left, right", name));
}

}  // namespace

std::string tokenize_to_string(const TokenizeOptions& options) {
  const Truncation truncation = parse_truncation(options.truncate);
  if (options.max_tokens && *options.max_tokens == 0) {
    throw UsageError("--max-tokens: must be at least 1");
  }
  const auto tokenizer = Tokenizer::load(options.model_dir);
  const bool add_special = !options.no_special;
  // Any length tokenizes: only running a model is bounded by its context. A limit applies when
  // asked for: --max-tokens, or --truncate alone (cut to the model's context).
  const std::optional<std::size_t> limit = options.max_tokens ? options.max_tokens
                                           : truncation != Truncation::kError
                                               ? tokenizer->context_length()
                                               : std::nullopt;
  if (!limit && truncation != Truncation::kError) {
    throw UsageError(fmt::format(
        "--truncate: {} does not state a context length; give --max-tokens", options.model_dir));
  }
  const std::vector<std::int32_t> ids =
      limit ? tokenizer->encode_for_context(options.text, *limit, truncation, add_special)
            : tokenizer->encode(options.text, add_special);
  if (options.json) return nlohmann::json(ids).dump() + "\n";
  return fmt::format("{}\n", fmt::join(ids, ","));
}

std::string detokenize_to_string(const DetokenizeOptions& options) {
  const std::vector<std::int32_t> ids =
      options.ids.empty() ? std::vector<std::int32_t>{} : parse_id_list(options.ids, "--ids");
  const auto tokenizer = Tokenizer::load(options.model_dir);
  return tokenizer->decode(ids, options.skip_special) + "\n";
}

void add_tokenize_commands(CLI::App& app) {
  auto tok = std::make_shared<TokenizeOptions>();
  auto max_tokens = std::make_shared<std::size_t>(0);
  CLI::App* encode = app.add_subcommand("tokenize", "Print the token ids of a text");
  encode
      ->add_option("--model", tok->model_dir, "Model directory (tokenizer.json or tokenizer.model)")
      ->required();
  encode->add_option("--text", tok->text, "Text to tokenize (UTF-8)")->required();
  encode->add_flag("--json", tok->json, "Print a JSON list instead of comma-separated ids");
  encode->add_flag("--no-special", tok->no_special,
                   "Do not add the tokenizer's special tokens (BOS, [CLS] ... [SEP])");
  CLI::Option* max_opt =
      encode
          ->add_option(
              "--max-tokens", *max_tokens,
              "Most ids allowed, special tokens included (default: no limit; with --truncate, "
              "the context)")
          ->check(CLI::PositiveNumber);
  encode->add_option("--truncate", tok->truncate,
                     "Text longer than the limit: none (error), right (keep the start), left (keep "
                     "the end)");
  encode->callback([tok, max_tokens, max_opt] {
    TokenizeOptions options = *tok;
    if (max_opt->count() > 0) options.max_tokens = *max_tokens;
    const std::string out = tokenize_to_string(options);
    std::fwrite(out.data(), 1, out.size(), stdout);
  });

  auto detok = std::make_shared<DetokenizeOptions>();
  CLI::App* decode = app.add_subcommand("detokenize", "Print the text of token ids");
  decode
      ->add_option("--model", detok->model_dir,
                   "Model directory (tokenizer.json or tokenizer.model)")
      ->required();
  decode->add_option("--ids", detok->ids, "Token ids, comma-separated (e.g. 1,2,3)")->required();
  decode->add_flag("--skip-special", detok->skip_special,
                   "Leave out special tokens (BOS, EOS, ...)");
  decode->callback([detok] {
    const std::string out = detokenize_to_string(*detok);
    std::fwrite(out.data(), 1, out.size(), stdout);
  });
}

}  // namespace huddle::cli
