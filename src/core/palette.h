// Exact palette coding of f32 values that take few distinct values per channel: an image's
// pixels (8 bits per channel, normalised to floats) take at most 256 per channel, so they can
// travel as one byte each beside each channel's table of values, a quarter of their f32 bytes,
// and decode to the same bits. Activations take many more and do not qualify (the encoder gives
// up after the 257th distinct value of a channel, having read a few hundred values).
//
// The values are `count` floats whose channel is their index mod `channels` (channels-last rows).
// The encoding, little-endian:
//   u32 channels, u64 count;
//   count u8 indices, each into its channel's table;
//   per channel: u16 n (1..256; 0 for a channel with no values), then n f32 values.
// Values are told apart by their bits (so -0.0, 0.0 and every NaN payload keep theirs).
// Hand-written: no library at hand does this, and it is a few dozen lines.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace huddle {

// Appends the encoding of `values` (count = values.size(), a multiple of `channels` > 0) to
// `out` and returns true; false, with `out` as it was, when some channel takes more than 256
// distinct values.
bool encode_palette(std::span<const float> values, std::int64_t channels,
                    std::vector<std::byte>& out);

// Decodes `bytes` into `out` (which must have the encoded count). InputError naming what is wrong
// when the bytes are not an encoding of out.size() values in `channels` channels.
void decode_palette(std::span<const std::byte> bytes, std::int64_t channels, std::span<float> out);

}  // namespace huddle
