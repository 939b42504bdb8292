// Pre-tokenizers: split normalized text into the words the model tokenizes one by one.
//
// Supported "type"s: ByteLevel, Split, BertPreTokenizer, Whitespace, WhitespaceSplit, Metaspace,
// Digits, Punctuation, Sequence. Others throw LoadError naming the type.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/json_fields.h"

namespace huddle::tok {

// One word on its way to the model. at_origin: the word starts at offset 0 of the input text
// (Metaspace's prepend_scheme "first" looks at it).
struct Piece {
  std::string text;
  bool at_origin = false;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces `pieces` by their splits; empty pieces are dropped.
  virtual void split(std::vector<Piece>& pieces) const = 0;
  // True if this pre-tokenizer maps bytes to GPT-2's byte alphabet (so any byte can be encoded).
  virtual bool is_byte_level() const { return false; }
};

// How the delimiters found by a pattern are kept (Hugging Face's SplitDelimiterBehavior).
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// A stretch [begin, end) of a text, marked when it is a delimiter.
struct Segment {
  std::size_t begin;
  std::size_t end;
  bool is_match;
};

// Applies `behavior` to segments that cover the text in order; returns the pieces' byte ranges.
std::vector<std::pair<std::size_t, std::size_t>> apply_split_behavior(
    const std::vector<Segment>& segments, SplitBehavior behavior);

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Json& spec, std::string_view where);

}  // namespace huddle::tok
