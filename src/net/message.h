// A message as the transport delivers it: the sender's tag and the payload bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace huddle::net {

// Tags at or above this value are reserved for the net module itself (session opening).
inline constexpr std::uint32_t kReservedTagBase = 0xFFFF0000u;

struct Message {
  std::uint32_t tag = 0;
  std::vector<std::byte> payload;
};

// Views a trivially copyable object or array as bytes (for send/recv of plain data).
template <typename T>
std::span<const std::byte> as_bytes_of(std::span<const T> values) {
  return std::as_bytes(values);
}

}  // namespace huddle::net
