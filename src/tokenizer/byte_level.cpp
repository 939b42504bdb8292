#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace huddle::tok {
namespace {

struct Tables {
  std::array<std::string, 256> to_unicode;
  std::array<int, 324> to_byte{};  // code points used are < 0x144

  Tables() {
    to_byte.fill(-1);
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const int cp = printable ? b : next++;
      append_utf8(to_unicode[static_cast<std::size_t>(b)], static_cast<char32_t>(cp));
      to_byte[static_cast<std::size_t>(cp)] = b;
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

const std::string& byte_to_unicode(unsigned char b) {
  return tables().to_unicode[b];
}

std::string bytes_to_unicode(std::string_view s) {
  const Tables& t = tables();
  std::string out;
  out.reserve(s.size() * 2);
  for (const char c : s) out.append(t.to_unicode[static_cast<unsigned char>(c)]);
  return out;
}

std::optional<unsigned char> unicode_to_byte(char32_t cp) {
  const Tables& t = tables();
  if (cp >= t.to_byte.size() || t.to_byte[cp] < 0) return std::nullopt;
  return static_cast<unsigned char>(t.to_byte[cp]);
}

std::optional<std::string> unicode_to_bytes(std::string_view token) {
  std::string out;
  out.reserve(token.size());
  for (std::size_t pos = 0; pos < token.size();) {
    const Utf8Step step = utf8_next(token, pos);
    if (!step.valid) return std::nullopt;
    const auto b = unicode_to_byte(step.cp);
    if (!b) return std::nullopt;
    out.push_back(static_cast<char>(*b));
    pos += step.len;
  }
  return out;
}

}  // namespace huddle::tok
