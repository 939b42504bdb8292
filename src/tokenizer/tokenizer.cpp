#include "tokenizer/tokenizer.h"

#include <fstream>

#include "core/error.h"
#include "io/gguf.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/model_info.h"
#include "tokenizer/sentencepiece_tokenizer.h"

namespace huddle {
namespace {

// tokenizer_config.json's add_bos_token / add_eos_token, for SentencePiece models.
tok::SentencePieceOptions read_sentencepiece_options(const std::filesystem::path& model_dir) {
  tok::SentencePieceOptions options;
  const auto file = model_dir / "tokenizer_config.json";
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return options;
  std::ifstream in(file, std::ios::binary);
  tok::Json config;
  try {
    config = tok::Json::parse(in);
  } catch (const tok::Json::exception& e) {
    throw LoadError(fmt::format("{}: not valid JSON: {}", file.string(), e.what()));
  }
  try {
    options.add_bos = tok::json_bool_or(config, "add_bos_token", options.add_bos, "");
    options.add_eos = tok::json_bool_or(config, "add_eos_token", options.add_eos, "");
  } catch (const LoadError& e) {
    throw LoadError(fmt::format("{}: {}", file.string(), e.what()));
  }
  return options;
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::load(const std::filesystem::path& model_dir) {
  if (io::is_gguf_path(model_dir)) return tok::load_gguf_tokenizer(model_dir);
  std::error_code ec;
  if (!std::filesystem::is_directory(model_dir, ec)) {
    throw LoadError(fmt::format("model directory '{}' does not exist or is not a directory",
                                model_dir.string()));
  }
  const auto json_file = model_dir / "tokenizer.json";
  const auto sp_file = model_dir / "tokenizer.model";
  std::unique_ptr<Tokenizer> tokenizer;
  tok::TokenizerDefaults defaults;
  if (std::filesystem::exists(json_file, ec)) {
    tokenizer = tok::load_tokenizer_json(json_file);
  } else if (std::filesystem::exists(sp_file, ec)) {
    tok::SentencePieceTokenizer sp =
        tok::load_sentencepiece_model(sp_file, read_sentencepiece_options(model_dir));
    defaults.bos_id = sp.bos_id;
    defaults.eos_id = sp.eos_id;
    tokenizer = std::move(sp.tokenizer);
  } else {
    throw LoadError(fmt::format(
        "model directory '{}' has no tokenizer: neither tokenizer.json nor tokenizer.model exists",
        model_dir.string()));
  }
  tokenizer->set_model_info(tok::read_model_info(model_dir, *tokenizer, defaults));
  return tokenizer;
}

std::vector<std::int32_t> Tokenizer::encode(std::string_view text, bool add_special) const {
  std::vector<std::int32_t> ids = do_encode_ordinary(text);
  if (add_special) do_add_special_tokens(ids);
  return ids;
}

std::vector<std::int32_t> Tokenizer::encode_for_context(std::string_view text,
                                                        std::size_t max_tokens,
                                                        Truncation truncation,
                                                        bool add_special) const {
  const std::size_t specials = add_special ? do_num_special_tokens_to_add() : 0;
  if (max_tokens < specials) {
    throw InputError(fmt::format("a context of {} tokens cannot hold the {} special tokens",
                                 max_tokens, specials));
  }
  std::vector<std::int32_t> ids = do_encode_ordinary(text);
  const std::size_t room = max_tokens - specials;
  if (ids.size() > room) {
    switch (truncation) {
      case Truncation::kError:
        throw InputError(fmt::format(
            "the text is {} tokens ({} with special tokens), longer than the context of {} tokens; "
            "shorten it or ask for truncation",
            ids.size(), ids.size() + specials, max_tokens));
      case Truncation::kKeepStart:
        ids.resize(room);
        break;
      case Truncation::kKeepEnd:
        ids.erase(ids.begin(), ids.end() - static_cast<std::ptrdiff_t>(room));
        break;
    }
  }
  if (add_special) do_add_special_tokens(ids);
  return ids;
}

std::string Tokenizer::decode(std::span<const std::int32_t> ids, bool skip_special) const {
  const std::size_t bound = do_vocab_size();
  for (const std::int32_t id : ids) {
    if (id < 0 || static_cast<std::size_t>(id) >= bound) {
      throw InputError(fmt::format("token id {} is outside the vocabulary (0..{})", id,
                                   bound == 0 ? 0 : bound - 1));
    }
  }
  return do_decode(ids, skip_special);
}

std::optional<std::int32_t> Tokenizer::token_to_id(std::string_view token) const {
  return do_token_to_id(token);
}

std::optional<std::string> Tokenizer::id_to_token(std::int32_t id) const {
  return do_id_to_token(id);
}

bool Tokenizer::is_special(std::int32_t id) const {
  return do_is_special(id);
}
std::size_t Tokenizer::vocab_size() const {
  return do_vocab_size();
}
std::size_t Tokenizer::num_special_tokens_to_add() const {
  return do_num_special_tokens_to_add();
}
std::string_view Tokenizer::kind() const {
  return do_kind();
}

std::optional<std::int32_t> Tokenizer::eos_id() const {
  if (info_.eos_ids.empty()) return std::nullopt;
  return info_.eos_ids.front();
}

std::vector<std::int32_t> Tokenizer::encode_ordinary(std::string_view text) const {
  return do_encode_ordinary(text);
}

void Tokenizer::add_special_tokens(std::vector<std::int32_t>& ids) const {
  do_add_special_tokens(ids);
}

}  // namespace huddle
