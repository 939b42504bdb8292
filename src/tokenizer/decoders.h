// Decoders: turn the token strings of a sequence of ids back into text.
//
// Each decoder rewrites the list of token strings (Hugging Face's decode_chain); the text is their
// concatenation. Supported "type"s: ByteLevel, WordPiece, Metaspace, Replace, ByteFallback, Fuse,
// Strip, BPEDecoder, Sequence. Others throw LoadError naming the type. Without a decoder the
// tokens are joined with spaces.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/json_fields.h"

namespace huddle::tok {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

std::unique_ptr<Decoder> make_decoder(const Json& spec, std::string_view where);

}  // namespace huddle::tok
