// libFuzzer target: a palette-coded piece of an image's rows as a peer sends it
// (core/palette.h, read by row_exchange for a graph input). The first input byte gives the
// channels (1..8); the rest is decoded into as many values as its header says (at most 2^16).
// Every failure must be an InputError. Then the same bytes, read as floats, are encoded and
// decoded again: where they qualify they must come back bit for bit.
#include "core/error.h"
#include "core/palette.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::int64_t channels = 1 + data[0] % 8;
  const auto body = std::as_bytes(std::span(data + 1, size - 1));
  std::uint64_t count = 0;
  if (body.size() >= 12) std::memcpy(&count, body.data() + 4, sizeof count);
  if (count > (1u << 16)) count = 1u << 16;
  std::vector<float> out(count);
  try {
    huddle::decode_palette(body, channels, out);
  } catch (const huddle::InputError&) {
  }
  std::vector<float> values(body.size() / sizeof(float) / channels * channels);
  if (!values.empty()) std::memcpy(values.data(), body.data(), values.size() * sizeof(float));
  std::vector<std::byte> coded;
  if (huddle::encode_palette(values, channels, coded)) {
    std::vector<float> back(values.size());
    huddle::decode_palette(coded, channels, back);
    if (!values.empty() &&
        std::memcmp(back.data(), values.data(), values.size() * sizeof(float)) != 0)
      std::abort();
  }
  return 0;
}
