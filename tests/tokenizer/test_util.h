// Helpers shared by the tokenizer tests: fixture paths, temporary model directories, and a seeded
// generator of random mixed-script text.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/utf8.h"

namespace huddle::test {

inline std::filesystem::path fixture_model(std::string_view name) {
  return std::filesystem::path(HUDDLE_FIXTURES_DIR) / "models" / std::string(name);
}

inline nlohmann::json read_json(const std::filesystem::path& file) {
  std::ifstream in(file);
  return nlohmann::json::parse(in);
}

inline void write_file(const std::filesystem::path& file, std::string_view content) {
  std::ofstream out(file, std::ios::binary);
  out << content;
}

// A fresh empty directory under the system temp dir, removed when the object dies.
class TempDir {
 public:
  explicit TempDir(std::string_view tag) {
    static int counter = 0;
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("huddle_tok_" + std::string(tag) + "_" + std::to_string(rd()) + "_" +
             std::to_string(counter++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Random valid UTF-8 text mixing ASCII words, digits, punctuation, accented Latin, CJK, emoji
// (including ZWJ sequences), whitespace runs and newlines.
class TextGenerator {
 public:
  explicit TextGenerator(std::uint32_t seed) : rng_(seed) {}

  std::string next(std::size_t max_units = 24) {
    std::string s;
    const std::size_t units = pick(max_units + 1);
    for (std::size_t i = 0; i < units; ++i) append_unit(s);
    return s;
  }

  // Arbitrary bytes, mostly not valid UTF-8.
  std::string next_bytes(std::size_t max_len = 32) {
    std::string s;
    const std::size_t len = pick(max_len + 1);
    for (std::size_t i = 0; i < len; ++i) s.push_back(static_cast<char>(pick(256)));
    return s;
  }

  std::size_t pick(std::size_t n) {
    return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng_);
  }

 private:
  void append_cp(std::string& s, char32_t cp) { tok::append_utf8(s, cp); }

  void append_unit(std::string& s) {
    static const std::vector<std::string_view> words = {
        "the",   "quick", "Brown", "fox",    "it's", "I'LL",   "don't",  "hello",
        "WORLD", "naïve", "café",  "Straße", "über", "résumé", "tokens", "model"};
    static const std::string_view punct = ".,;:!?'\"()[]{}-_/\\@#$%^&*+=<>|~`";
    switch (pick(11)) {
      case 0:
      case 1:
        s.append(words[pick(words.size())]);
        break;
      case 2:
        s.append(std::to_string(pick(100000)));
        break;
      case 3:
        s.push_back(punct[pick(punct.size())]);
        break;
      case 4:
        s.append(std::string(1 + pick(4), ' '));
        break;
      case 5:
        s.append(pick(2) ? "\n" : (pick(2) ? "\r\n" : "\n\n"));
        break;
      case 6:
        s.push_back(pick(2) ? '\t' : ' ');
        break;
      case 7:  // CJK ideographs and kana
        for (std::size_t k = 0, n = 1 + pick(4); k < n; ++k) {
          append_cp(s, pick(2) ? static_cast<char32_t>(0x4E00 + pick(0x5000))
                               : static_cast<char32_t>(0x3041 + pick(0x56)));
        }
        break;
      case 8:  // emoji: plain, with skin tone, or a ZWJ family
        append_cp(s, static_cast<char32_t>(0x1F600 + pick(0x50)));
        if (pick(3) == 0) append_cp(s, static_cast<char32_t>(0x1F3FB + pick(5)));
        if (pick(4) == 0) {
          append_cp(s, 0x200D);
          append_cp(s, 0x1F466);
        }
        break;
      case 9:  // Greek, Cyrillic, Arabic, Devanagari letters and combining marks
        append_cp(s, pick(2) ? static_cast<char32_t>(0x391 + pick(0x30))
                             : static_cast<char32_t>(0x410 + pick(0x40)));
        if (pick(3) == 0) append_cp(s, static_cast<char32_t>(0x300 + pick(0x30)));
        if (pick(4) == 0) append_cp(s, static_cast<char32_t>(0x627 + pick(0x20)));
        if (pick(4) == 0) append_cp(s, static_cast<char32_t>(0x915 + pick(0x20)));
        break;
      default: {  // any scalar value from the BMP or astral planes, skipping surrogates
        char32_t cp = static_cast<char32_t>(1 + pick(0x2FFFF));
        if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;
        append_cp(s, cp);
      }
    }
  }

  std::mt19937 rng_;
};

}  // namespace huddle::test
