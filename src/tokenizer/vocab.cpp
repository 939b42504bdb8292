#include "core/error.h"
#include "tokenizer/model.h"

namespace huddle::tok {

Vocab Vocab::from_json(const Json& object, std::string_view where) {
  if (!object.is_object()) {
    throw LoadError(
        fmt::format("{}: expected an object of token: id, got {}", where, object.type_name()));
  }
  Vocab vocab;
  vocab.ids_.reserve(object.size());
  std::int32_t max_id = -1;
  for (const auto& [token, value] : object.items()) {
    const std::int32_t id = json_token_id(value, json_path(where, token));
    vocab.ids_.emplace(token, id);
    max_id = std::max(max_id, id);
  }
  const std::size_t bound = static_cast<std::size_t>(max_id) + 1;
  if (bound > 16 * vocab.ids_.size() + 4096) {
    throw LoadError(
        fmt::format("{}: ids up to {} for only {} tokens", where, max_id, vocab.ids_.size()));
  }
  vocab.tokens_.resize(bound);
  vocab.present_.resize(bound, false);
  for (const auto& [token, id] : vocab.ids_) {
    vocab.tokens_[static_cast<std::size_t>(id)] = token;
    vocab.present_[static_cast<std::size_t>(id)] = true;
  }
  return vocab;
}

}  // namespace huddle::tok
