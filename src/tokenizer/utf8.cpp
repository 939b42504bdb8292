#include "tokenizer/utf8.h"

namespace huddle::tok {
namespace {

// Table 3-7 of the Unicode standard: the allowed range of the second byte depends on the first.
bool second_byte_ok(unsigned char lead, unsigned char b) {
  switch (lead) {
    case 0xE0:
      return b >= 0xA0 && b <= 0xBF;
    case 0xED:
      return b >= 0x80 && b <= 0x9F;
    case 0xF0:
      return b >= 0x90 && b <= 0xBF;
    case 0xF4:
      return b >= 0x80 && b <= 0x8F;
    default:
      return b >= 0x80 && b <= 0xBF;
  }
}

std::size_t sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;  // continuation byte, C0, C1 or F5..FF: never valid as a lead
}

}  // namespace

Utf8Step utf8_next(std::string_view s, std::size_t pos) {
  const auto lead = static_cast<unsigned char>(s[pos]);
  const std::size_t need = sequence_length(lead);
  if (need == 1) return {lead, 1, true};
  if (need == 0) return {kReplacementChar, 1, false};
  char32_t cp = lead & (need == 2 ? 0x1F : need == 3 ? 0x0F : 0x07);
  std::size_t i = 1;
  for (; i < need; ++i) {
    if (pos + i >= s.size()) return {kReplacementChar, i, false};
    const auto b = static_cast<unsigned char>(s[pos + i]);
    const bool ok = i == 1 ? second_byte_ok(lead, b) : (b >= 0x80 && b <= 0xBF);
    if (!ok) return {kReplacementChar, i, false};
    cp = (cp << 6) | (b & 0x3F);
  }
  return {cp, need, true};
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = kReplacementChar;
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool is_valid_utf8(std::string_view s) {
  for (std::size_t pos = 0; pos < s.size();) {
    if (static_cast<unsigned char>(s[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const Utf8Step step = utf8_next(s, pos);
    if (!step.valid) return false;
    pos += step.len;
  }
  return true;
}

std::string repair_utf8(std::string_view s) {
  if (is_valid_utf8(s)) return std::string(s);
  std::string out;
  out.reserve(s.size() + 8);
  for (std::size_t pos = 0; pos < s.size();) {
    const Utf8Step step = utf8_next(s, pos);
    if (step.valid) {
      out.append(s.substr(pos, step.len));
    } else {
      out.append(kReplacementUtf8);
    }
    pos += step.len;
  }
  return out;
}

std::size_t utf8_length(std::string_view s) {
  std::size_t n = 0;
  for (std::size_t pos = 0; pos < s.size(); ++n) pos += utf8_next(s, pos).len;
  return n;
}

}  // namespace huddle::tok
