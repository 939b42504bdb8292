// Incremental decoding for generation: ids arrive one at a time, text is printed as soon as it is
// complete.
//
// push(id) returns the text that id completes, possibly empty: text that ends in an incomplete
// UTF-8 character (a byte-level token holding the first bytes of an emoji, say) is held back until
// a later token completes it, so a returned chunk never splits a character. finish() returns what
// is still held (an unfinished character becomes U+FFFD). The concatenation of all chunks equals
// tokenizer.decode(all ids) for every supported decoder, including those that drop the first
// token's leading space (Metaspace, SentencePiece): each step decodes a short window of recent ids
// and emits what the new id added to the window's text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace huddle {

class StreamDecoder {
 public:
  // `tokenizer` must outlive the decoder.
  explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special = false);

  // Throws InputError (and changes nothing) if id is not in the vocabulary.
  std::string push(std::int32_t id);
  std::string finish();
  // Forgets everything, to start a new sequence.
  void reset();

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_;
  std::vector<std::int32_t> ids_;  // the window: ids_[0, read_) has been emitted
  std::size_t read_ = 0;
  std::string emitted_text_;  // decode(ids_[0, read_))
};

}  // namespace huddle
