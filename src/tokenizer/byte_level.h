// GPT-2's byte-to-unicode mapping used by byte-level BPE.
//
// Every byte 0..255 maps to one printable code point: the printable Latin-1 bytes ('!'..'~',
// '¡'..'¬', '®'..'ÿ') to themselves, the other 68 bytes, in order, to U+0100..U+0143. Byte-level
// vocabularies are written in these code points, so encoding maps text bytes to them and decoding
// maps them back.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace huddle::tok {

// The UTF-8 encoding of byte b's code point.
const std::string& byte_to_unicode(unsigned char b);

// s with every byte replaced by its code point (s may be any bytes, valid UTF-8 or not).
std::string bytes_to_unicode(std::string_view s);

// The byte that code point cp stands for, if it is one of the 256.
std::optional<unsigned char> unicode_to_byte(char32_t cp);

// The bytes a byte-level token stands for; nullopt if any character is not one of the 256 code
// points (Hugging Face then keeps such a token's own bytes, as added tokens do).
std::optional<std::string> unicode_to_bytes(std::string_view token);

}  // namespace huddle::tok
