#include "tokenizer/model_info.h"

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "tokenizer/json_fields.h"

namespace huddle::tok {
namespace {

// The parsed file, or null JSON when it does not exist.
Json read_optional_json(const std::filesystem::path& file) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return Json();
  std::ifstream in(file, std::ios::binary);
  if (!in) throw LoadError(fmt::format("{}: cannot open the file", file.string()));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  try {
    Json j = Json::parse(buffer.str());
    if (!j.is_object()) {
      throw LoadError(
          fmt::format("{}: expected a JSON object, got {}", file.string(), j.type_name()));
    }
    return j;
  } catch (const Json::exception& e) {
    throw LoadError(fmt::format("{}: not valid JSON: {}", file.string(), e.what()));
  }
}

void check_id(std::int32_t id, const Tokenizer& tokenizer, const std::filesystem::path& file,
              std::string_view field) {
  if (static_cast<std::size_t>(id) >= tokenizer.vocab_size()) {
    throw LoadError(fmt::format("{}: {} {} is not a token id (the vocabulary has {} ids)",
                                file.string(), field, id, tokenizer.vocab_size()));
  }
}

// "eos_token_id": 2 or [1, 2]; empty when absent or null.
std::vector<std::int32_t> read_ids(const Json& config, std::string_view field,
                                   const std::filesystem::path& file, const Tokenizer& tokenizer) {
  std::vector<std::int32_t> ids;
  const Json* v = json_find(config, field);
  if (v == nullptr) return ids;
  try {
    if (v->is_array()) {
      for (std::size_t i = 0; i < v->size(); ++i) {
        ids.push_back(json_token_id((*v)[i], json_path(field, i)));
      }
    } else {
      ids.push_back(json_token_id(*v, field));
    }
  } catch (const LoadError& e) {
    throw LoadError(fmt::format("{}: {}", file.string(), e.what()));
  }
  for (const std::int32_t id : ids) check_id(id, tokenizer, file, field);
  return ids;
}

// tokenizer_config.json's "eos_token": "</s>" or {"content": "</s>", ...}.
std::optional<std::int32_t> read_token(const Json& config, std::string_view field,
                                       const Tokenizer& tokenizer) {
  const Json* v = json_find(config, field);
  if (v == nullptr) return std::nullopt;
  const Json* content = v->is_object() ? json_find(*v, "content") : v;
  if (content == nullptr || !content->is_string()) return std::nullopt;
  return tokenizer.token_to_id(content->get<std::string>());
}

std::optional<std::size_t> read_length(const Json& config, std::string_view field,
                                       const std::filesystem::path& file) {
  const Json* v = json_find(config, field);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number_integer() || v->get<std::int64_t>() <= 0) {
    throw LoadError(
        fmt::format("{}: {} must be a positive integer, got {}", file.string(), field, v->dump()));
  }
  return static_cast<std::size_t>(v->get<std::int64_t>());
}

}  // namespace

TokenizerModelInfo read_model_info(const std::filesystem::path& model_dir,
                                   const Tokenizer& tokenizer, const TokenizerDefaults& defaults) {
  const auto generation_file = model_dir / "generation_config.json";
  const auto config_file = model_dir / "config.json";
  const auto tokenizer_config_file = model_dir / "tokenizer_config.json";
  const Json generation = read_optional_json(generation_file);
  const Json config = read_optional_json(config_file);
  const Json tokenizer_config = read_optional_json(tokenizer_config_file);

  TokenizerModelInfo info;
  info.eos_ids = read_ids(generation, "eos_token_id", generation_file, tokenizer);
  if (info.eos_ids.empty()) info.eos_ids = read_ids(config, "eos_token_id", config_file, tokenizer);
  if (info.eos_ids.empty()) {
    if (const auto id = read_token(tokenizer_config, "eos_token", tokenizer)) {
      info.eos_ids.push_back(*id);
    } else if (defaults.eos_id) {
      info.eos_ids.push_back(*defaults.eos_id);
    }
  }

  auto bos = read_ids(generation, "bos_token_id", generation_file, tokenizer);
  if (bos.empty()) bos = read_ids(config, "bos_token_id", config_file, tokenizer);
  if (!bos.empty()) {
    info.bos_id = bos.front();
  } else if (const auto id = read_token(tokenizer_config, "bos_token", tokenizer)) {
    info.bos_id = id;
  } else {
    info.bos_id = defaults.bos_id;
  }

  for (const char* field : {"max_position_embeddings", "n_positions", "n_ctx"}) {
    if (const auto n = read_length(config, field, config_file)) {
      info.context_length = n;
      break;
    }
  }
  if (!info.context_length) {
    // Transformers writes a huge sentinel (1e30) when the tokenizer has no limit of its own.
    const Json* v = json_find(tokenizer_config, "model_max_length");
    if (v != nullptr && v->is_number_integer() && v->get<std::int64_t>() > 0 &&
        v->get<std::int64_t>() < (std::int64_t{1} << 31)) {
      info.context_length = static_cast<std::size_t>(v->get<std::int64_t>());
    }
  }
  return info;
}

}  // namespace huddle::tok
