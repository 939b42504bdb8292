#include "tokenizer/wordpiece_model.h"

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace huddle::tok {

WordPieceModel::WordPieceModel(Vocab vocab, std::string unk_token,
                               std::string continuing_subword_prefix,
                               std::size_t max_input_chars_per_word)
    : vocab_(std::move(vocab)),
      prefix_(std::move(continuing_subword_prefix)),
      max_chars_(max_input_chars_per_word),
      unk_id_(0) {
  const auto unk = vocab_.find(unk_token);
  if (!unk) {
    throw LoadError(fmt::format("model.unk_token: '{}' is not in the vocabulary", unk_token));
  }
  unk_id_ = *unk;
}

void WordPieceModel::tokenize(std::string_view word, std::vector<std::int32_t>& out) const {
  if (word.empty()) return;
  if (utf8_length(word) > max_chars_) {
    out.push_back(unk_id_);
    return;
  }
  const std::size_t first_out = out.size();
  thread_local std::string candidate;
  std::size_t start = 0;
  while (start < word.size()) {
    std::size_t end = word.size();
    std::optional<std::int32_t> found;
    while (start < end) {
      const std::string_view part = word.substr(start, end - start);
      if (start == 0) {
        found = vocab_.find(part);
      } else {
        candidate.assign(prefix_);
        candidate.append(part);
        found = vocab_.find(candidate);
      }
      if (found) break;
      // Drop the last character of the candidate.
      std::size_t cut = end - 1;
      while (cut > start && (static_cast<unsigned char>(word[cut]) & 0xC0) == 0x80) --cut;
      end = cut;
    }
    if (!found) {
      out.resize(first_out);
      out.push_back(unk_id_);
      return;
    }
    out.push_back(*found);
    start = end;
  }
}

std::unique_ptr<WordPieceModel> WordPieceModel::from_json(const Json& spec,
                                                          std::string_view where) {
  Vocab vocab = Vocab::from_json(json_object(spec, "vocab", where), json_path(where, "vocab"));
  const std::int64_t max_chars = json_int_or(spec, "max_input_chars_per_word", 100, where);
  if (max_chars < 0) {
    throw LoadError(fmt::format("{}.max_input_chars_per_word: {} is negative", where, max_chars));
  }
  return std::make_unique<WordPieceModel>(
      std::move(vocab), json_string_or(spec, "unk_token", "[UNK]", where),
      json_string_or(spec, "continuing_subword_prefix", "##", where),
      static_cast<std::size_t>(max_chars));
}

}  // namespace huddle::tok
