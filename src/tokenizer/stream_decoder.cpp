#include "tokenizer/stream_decoder.h"

#include "tokenizer/utf8.h"

namespace huddle {
namespace {

bool ends_with_replacement(const std::string& s) {
  return s.size() >= tok::kReplacementUtf8.size() &&
         s.compare(s.size() - tok::kReplacementUtf8.size(), tok::kReplacementUtf8.size(),
                   tok::kReplacementUtf8) == 0;
}

}  // namespace

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special)
    : tokenizer_(tokenizer), skip_special_(skip_special) {}

std::string StreamDecoder::push(std::int32_t id) {
  ids_.push_back(id);
  std::string text;
  try {
    text = tokenizer_.decode(ids_, skip_special_);
  } catch (...) {
    ids_.pop_back();
    throw;
  }
  // Hold back while the window's text is no longer than what was emitted, or ends in U+FFFD
  // (decode's mark for bytes that do not form a complete character yet).
  if (text.size() <= emitted_text_.size() || ends_with_replacement(text) ||
      text.compare(0, emitted_text_.size(), emitted_text_) != 0) {
    return {};
  }
  std::string chunk = text.substr(emitted_text_.size());
  // Slide the window: keep the last emitted id as left context, so that the next token's leading
  // space (which decoders drop at the start of a text) is kept.
  const std::size_t keep_from = ids_.size() - 1;
  ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(keep_from));
  read_ = ids_.size();
  emitted_text_ = tokenizer_.decode(ids_, skip_special_);
  return chunk;
}

std::string StreamDecoder::finish() {
  std::string chunk;
  if (ids_.size() > read_) {
    const std::string text = tokenizer_.decode(ids_, skip_special_);
    if (text.compare(0, emitted_text_.size(), emitted_text_) == 0) {
      chunk = text.substr(emitted_text_.size());
    } else {
      chunk = text;  // cannot happen with the supported decoders; never lose text
    }
  }
  reset();
  return chunk;
}

void StreamDecoder::reset() {
  ids_.clear();
  read_ = 0;
  emitted_text_.clear();
}

}  // namespace huddle
