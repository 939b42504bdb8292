// Raw GGUF bytes for the reader tests: each field written by hand, so a test can break any one.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace huddle::io::testing {

inline std::string le32(std::uint32_t v) {
  std::string s(4, '\0');
  std::memcpy(s.data(), &v, 4);
  return s;
}
inline std::string le64(std::uint64_t v) {
  std::string s(8, '\0');
  std::memcpy(s.data(), &v, 8);
  return s;
}
inline std::string gstr(const std::string& s) {
  return le64(s.size()) + s;
}

inline std::string gguf_header(std::uint32_t version, std::uint64_t tensors, std::uint64_t kvs) {
  return "GGUF" + le32(version) + le64(tensors) + le64(kvs);
}
inline std::string kv_u32(const std::string& key, std::uint32_t v) {
  return gstr(key) + le32(4) + le32(v);
}
inline std::string kv_string(const std::string& key, const std::string& v) {
  return gstr(key) + le32(8) + gstr(v);
}
// ne innermost first, as GGUF stores it.
inline std::string tensor_info(const std::string& name, const std::vector<std::uint64_t>& ne,
                               std::uint32_t type, std::uint64_t offset) {
  std::string s = gstr(name) + le32(static_cast<std::uint32_t>(ne.size()));
  for (std::uint64_t n : ne) s += le64(n);
  return s + le32(type) + le64(offset);
}
inline std::string pad32(std::string s) {
  while (s.size() % 32 != 0) s.push_back('\0');
  return s;
}

}  // namespace huddle::io::testing
