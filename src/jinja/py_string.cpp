#include "jinja/py_string.h"

#include <algorithm>
#include <cstdint>

namespace huddle::jinja::py {
namespace {

// The code point at s[at] and its length in bytes (an ill-formed byte: itself, length 1).
std::pair<std::uint32_t, std::size_t> decode(std::string_view s, std::size_t at) {
  const auto b = static_cast<unsigned char>(s[at]);
  std::size_t len = b < 0x80           ? 1
                    : (b >> 5) == 0x6  ? 2
                    : (b >> 4) == 0xe  ? 3
                    : (b >> 3) == 0x1e ? 4
                                       : 1;
  if (at + len > s.size()) return {b, 1};
  std::uint32_t cp = len == 1 ? b : len == 2 ? (b & 0x1f) : len == 3 ? (b & 0x0f) : (b & 0x07);
  for (std::size_t i = 1; i < len; ++i) {
    const auto c = static_cast<unsigned char>(s[at + i]);
    if ((c & 0xc0) != 0x80) return {b, 1};
    cp = (cp << 6) | (c & 0x3f);
  }
  return {cp, len};
}

bool is_unicode_space(std::uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xa0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

struct Char {
  std::uint32_t cp;
  std::size_t begin;
  std::size_t end;
};

std::vector<Char> chars_of(std::string_view s) {
  std::vector<Char> out;
  for (std::size_t at = 0; at < s.size();) {
    const auto [cp, len] = decode(s, at);
    out.push_back({cp, at, at + len});
    at += len;
  }
  return out;
}

bool is_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
char to_upper(char c) {
  return c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c;
}
char to_lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

}  // namespace

std::vector<std::size_t> char_offsets(std::string_view s) {
  std::vector<std::size_t> out;
  for (const Char& c : chars_of(s)) out.push_back(c.begin);
  out.push_back(s.size());
  return out;
}

std::size_t char_count(std::string_view s) {
  return chars_of(s).size();
}

std::string strip(std::string_view s, Side side, std::optional<std::string_view> chars) {
  std::vector<std::uint32_t> set;
  if (chars)
    for (const Char& c : chars_of(*chars)) set.push_back(c.cp);
  const auto removable = [&](std::uint32_t cp) {
    return chars ? std::find(set.begin(), set.end(), cp) != set.end() : is_unicode_space(cp);
  };
  const std::vector<Char> cs = chars_of(s);
  std::size_t first = 0;
  std::size_t last = cs.size();
  if (side != Side::kRight)
    while (first < last && removable(cs[first].cp)) ++first;
  if (side != Side::kLeft)
    while (last > first && removable(cs[last - 1].cp)) --last;
  if (first == last) return "";
  return std::string(s.substr(cs[first].begin, cs[last - 1].end - cs[first].begin));
}

std::vector<std::string> split(std::string_view s, std::optional<std::string_view> sep,
                               long max_split) {
  std::vector<std::string> out;
  if (sep) {
    std::size_t at = 0;
    while (max_split < 0 || static_cast<long>(out.size()) < max_split) {
      const std::size_t found = s.find(*sep, at);
      if (found == std::string_view::npos) break;
      out.emplace_back(s.substr(at, found - at));
      at = found + sep->size();
    }
    out.emplace_back(s.substr(at));
    return out;
  }
  const std::vector<Char> cs = chars_of(s);
  std::size_t i = 0;
  while (true) {
    while (i < cs.size() && is_unicode_space(cs[i].cp)) ++i;
    if (i == cs.size()) break;
    if (max_split >= 0 && static_cast<long>(out.size()) == max_split) {
      // The rest, with its trailing whitespace stripped, as Python does.
      out.push_back(strip(s.substr(cs[i].begin), Side::kRight));
      break;
    }
    const std::size_t begin = i;
    while (i < cs.size() && !is_unicode_space(cs[i].cp)) ++i;
    out.emplace_back(s.substr(cs[begin].begin, cs[i - 1].end - cs[begin].begin));
  }
  return out;
}

std::string replace(std::string_view s, std::string_view old, std::string_view with, long count) {
  std::string out;
  if (old.empty()) {
    // Python inserts `with` before every code point and at the end.
    long done = 0;
    for (const Char& c : chars_of(s)) {
      if (count < 0 || done < count) {
        out += with;
        ++done;
      }
      out += s.substr(c.begin, c.end - c.begin);
    }
    if (count < 0 || done < count) out += with;
    return out;
  }
  std::size_t at = 0;
  long done = 0;
  while (count < 0 || done < count) {
    const std::size_t found = s.find(old, at);
    if (found == std::string_view::npos) break;
    out += s.substr(at, found - at);
    out += with;
    at = found + old.size();
    ++done;
  }
  out += s.substr(at);
  return out;
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = to_upper(c);
  return out;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = to_lower(c);
  return out;
}

std::string title(std::string_view s) {
  std::string out(s);
  bool previous_cased = false;
  for (char& c : out) {
    const bool cased = is_alpha(c);
    c = cased ? (previous_cased ? to_lower(c) : to_upper(c)) : c;
    previous_cased = cased;
  }
  return out;
}

std::string capitalize(std::string_view s) {
  std::string out = lower(s);
  if (!out.empty()) out[0] = to_upper(out[0]);
  return out;
}

}  // namespace huddle::jinja::py
