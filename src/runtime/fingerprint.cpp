#include "runtime/fingerprint.h"

#include "net/key.h"

#include <fmt/format.h>
#include <sodium.h>

#include <algorithm>
#include <map>

namespace huddle {
namespace {

std::string hex_digest(crypto_generichash_state& state) {
  unsigned char hash[32];
  crypto_generichash_final(&state, hash, sizeof hash);
  std::string hex;
  for (unsigned char b : hash) hex += fmt::format("{:02x}", b);
  return hex;
}

}  // namespace

std::string tensor_digest(const Tensor& tensor) {
  net::ensure_sodium();
  crypto_generichash_state state;
  crypto_generichash_init(&state, nullptr, 0, 32);
  auto feed = [&](const void* data, std::size_t bytes) {
    crypto_generichash_update(&state, static_cast<const unsigned char*>(data), bytes);
  };
  feed(tensor.shape().data(), tensor.shape().size() * sizeof(std::int64_t));
  const auto dtype = static_cast<std::uint8_t>(tensor.dtype());  // Q8_0 weights differ from F32
  feed(&dtype, 1);
  const Tensor c = tensor.contiguous() ? tensor : tensor.clone();
  const auto n = static_cast<std::int64_t>(c.nbytes());
  for (const std::int64_t at : {std::int64_t{0}, n / 2, std::max<std::int64_t>(0, n - 256)}) {
    const std::int64_t count = std::min<std::int64_t>(256, n - at);
    if (count > 0) {
      feed(static_cast<const std::byte*>(c.raw()) + at, static_cast<std::size_t>(count));
    }
  }
  return hex_digest(state);
}

std::map<std::string, std::string> weight_digests(const WeightMap& weights) {
  std::map<std::string, std::string> digests;
  for (const auto& [name, tensor] : weights) digests.emplace(name, tensor_digest(tensor));
  return digests;
}

std::string bytes_fingerprint(std::string_view bytes) {
  net::ensure_sodium();
  crypto_generichash_state state;
  crypto_generichash_init(&state, nullptr, 0, 32);
  crypto_generichash_update(&state, reinterpret_cast<const unsigned char*>(bytes.data()),
                            bytes.size());
  return hex_digest(state);
}

}  // namespace huddle
