#include "tokenizer/hf_tokenizer.h"

#include <algorithm>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace huddle::tok {

HfTokenizer::HfTokenizer(HfPipeline pipeline)
    : pipeline_(std::move(pipeline)), added_(pipeline_.added_tokens, pipeline_.normalizer.get()) {
  HUDDLE_CHECK(pipeline_.model != nullptr, "a tokenizer pipeline needs a model");
  const bool model_takes_bytes =
      pipeline_.model->encodes_bytes() ||
      (pipeline_.pre_tokenizer != nullptr && pipeline_.pre_tokenizer->is_byte_level());
  raw_bytes_ = model_takes_bytes &&
               (pipeline_.normalizer == nullptr || !pipeline_.normalizer->needs_valid_utf8());
  vocab_size_ = pipeline_.model->vocab().id_bound();
  for (const AddedToken& t : pipeline_.added_tokens) {
    vocab_size_ = std::max(vocab_size_, static_cast<std::size_t>(t.id) + 1);
  }
}

void HfTokenizer::encode_segment(std::string_view text, bool at_origin,
                                 std::vector<std::int32_t>& ids) const {
  if (text.empty()) return;
  thread_local std::vector<Piece> pieces;
  pieces.clear();
  pieces.push_back({std::string(text), at_origin});
  if (pipeline_.pre_tokenizer) pipeline_.pre_tokenizer->split(pieces);
  for (const Piece& piece : pieces) pipeline_.model->tokenize(piece.text, ids);
}

std::vector<std::int32_t> HfTokenizer::do_encode_ordinary(std::string_view text) const {
  std::string repaired;
  std::string_view input = text;
  if (!raw_bytes_ && !is_valid_utf8(text)) {
    repaired = repair_utf8(text);
    input = repaired;
  }
  std::vector<std::int32_t> ids;
  ids.reserve(input.size() / 3 + 4);
  for (const TextSpan& span : added_.split_raw(input)) {
    if (span.id >= 0) {
      ids.push_back(span.id);
      continue;
    }
    const std::string_view segment = input.substr(span.begin, span.end - span.begin);
    const bool at_origin = span.begin == 0;
    std::string normalized;
    std::string_view current = segment;
    if (pipeline_.normalizer) {
      normalized = pipeline_.normalizer->normalize(segment);
      current = normalized;
    }
    if (!added_.has_normalized_tokens()) {
      encode_segment(current, at_origin, ids);
      continue;
    }
    for (const TextSpan& sub : added_.split_normalized(current)) {
      if (sub.id >= 0) {
        ids.push_back(sub.id);
      } else {
        encode_segment(current.substr(sub.begin, sub.end - sub.begin), at_origin && sub.begin == 0,
                       ids);
      }
    }
  }
  return ids;
}

void HfTokenizer::do_add_special_tokens(std::vector<std::int32_t>& ids) const {
  if (pipeline_.post_processor) pipeline_.post_processor->apply(ids);
}

std::size_t HfTokenizer::do_num_special_tokens_to_add() const {
  return pipeline_.post_processor ? pipeline_.post_processor->added_count() : 0;
}

std::string HfTokenizer::do_decode(std::span<const std::int32_t> ids, bool skip_special) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const std::int32_t id : ids) {
    if (const AddedToken* added = added_.by_id(id)) {
      if (!(skip_special && added->special)) tokens.push_back(added->content);
    } else if (const std::string* token = pipeline_.model->vocab().token(id)) {
      tokens.push_back(*token);
    } else {
      throw InputError(fmt::format("token id {} is not in the vocabulary", id));
    }
  }
  std::string text;
  if (pipeline_.decoder) {
    pipeline_.decoder->decode_chain(tokens);
    for (const std::string& t : tokens) text.append(t);
  } else {
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0) text.push_back(' ');
      text.append(tokens[i]);
    }
  }
  return repair_utf8(text);
}

std::optional<std::int32_t> HfTokenizer::do_token_to_id(std::string_view token) const {
  if (const auto id = added_.find(token)) return id;
  return pipeline_.model->vocab().find(token);
}

std::optional<std::string> HfTokenizer::do_id_to_token(std::int32_t id) const {
  if (const AddedToken* added = added_.by_id(id)) return added->content;
  if (const std::string* token = pipeline_.model->vocab().token(id)) return *token;
  return std::nullopt;
}

bool HfTokenizer::do_is_special(std::int32_t id) const {
  const AddedToken* added = added_.by_id(id);
  return added != nullptr && added->special;
}

}  // namespace huddle::tok
