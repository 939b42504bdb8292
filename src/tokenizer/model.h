// Tokenizer models: turn one pre-tokenized word into ids (BPE, WordPiece).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/json_fields.h"

namespace huddle::tok {

// Hash that lets unordered_map<std::string, ...> be queried with a string_view without a copy.
struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using StringIdMap = std::unordered_map<std::string, std::int32_t, StringHash, std::equal_to<>>;

// Token strings by id and ids by string. Ids may have gaps.
class Vocab {
 public:
  Vocab() = default;
  // Reads a {"token": id, ...} object. Throws LoadError naming `where` for bad ids, or when the
  // ids are so sparse that the id table would be absurdly large compared with the token count.
  static Vocab from_json(const Json& object, std::string_view where);

  std::optional<std::int32_t> find(std::string_view token) const {
    const auto it = ids_.find(token);
    if (it == ids_.end()) return std::nullopt;
    return it->second;
  }
  // nullptr for an id with no token.
  const std::string* token(std::int32_t id) const {
    if (id < 0 || static_cast<std::size_t>(id) >= tokens_.size() || !present_[id]) return nullptr;
    return &tokens_[static_cast<std::size_t>(id)];
  }
  // One more than the largest id.
  std::size_t id_bound() const { return tokens_.size(); }
  std::size_t size() const { return ids_.size(); }

 private:
  StringIdMap ids_;
  std::vector<std::string> tokens_;
  std::vector<bool> present_;
};

class Model {
 public:
  virtual ~Model() = default;
  // Appends the ids of `word` (one piece from the pre-tokenizer) to `out`.
  virtual void tokenize(std::string_view word, std::vector<std::int32_t>& out) const = 0;
  virtual const Vocab& vocab() const = 0;
  // True if the model can encode any byte sequence on its own (BPE with byte_fallback).
  virtual bool encodes_bytes() const { return false; }
  virtual std::string_view kind() const = 0;
};

}  // namespace huddle::tok
