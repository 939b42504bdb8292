// Wire formats: the form F32 activation rows take on a link between devices.
//
// The default (f32) sends the rows' bytes as they are, so a distributed run gives the bits one
// device gives. The others trade accuracy for bytes on slow links:
//   f16   IEEE binary16, round to nearest even; |x| >= 65520 becomes inf (activations of the
//         models Huddle runs stay far below). Relative error <= 2^-11 per element.
//   bf16  bfloat16, round to nearest even: f32's range, relative error <= 2^-8.
//   int8  per row: an f32 scale s = max|x| / 127, then int8 q = round(x / s); x ~ q * s, absolute
//         error <= s / 2 (half a step of the row's largest value / 127). A row of zeros has s = 0.
// A row of `cols` values is wire_row_bytes(format, cols) bytes, rows packed back to back:
//   f32: 4 * cols;  f16, bf16: 2 * cols (little-endian);  int8: 4 (scale) + cols.
// Decoding what one encode produced always gives the same floats, so every device that decodes a
// row holds the same values; encoding a decoded f16/bf16 row again gives the same bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace huddle {

// X(enum name, name)
#define HUDDLE_WIRE_FORMATS(X) \
  X(F32, "f32")                \
  X(F16, "f16")                \
  X(BF16, "bf16")              \
  X(Int8, "int8")

enum class WireFormat : std::uint8_t {
#define HUDDLE_WIRE_ENUM(e, name) e,
  HUDDLE_WIRE_FORMATS(HUDDLE_WIRE_ENUM)
#undef HUDDLE_WIRE_ENUM
};

std::string_view wire_format_name(WireFormat format);
// "f32", "f16", "bf16" or "int8"; nullopt for anything else.
std::optional<WireFormat> parse_wire_format(std::string_view name);
// The names, comma-separated, for messages.
std::string_view wire_format_names();
// A --wire option's value: "" -> nullopt (not given), else the format; UsageError naming the
// choices for anything else.
std::optional<WireFormat> parse_wire_option(std::string_view text);

// The largest message a ring collective sends by default (collectives::RingOptions): parts are
// streamed around the ring in chunks of whole rows of at most this many bytes.
inline constexpr std::size_t kRingChunkBytes = std::size_t{1} << 20;

// all_reduce in a lossy format encodes rows of this many values (fewer when the tensor's size is
// not a multiple: its largest common divisor with it).
inline constexpr std::int64_t kWireAllReduceRow = 64;

// Whether each value is encoded on its own (f32, f16, bf16): then a row's columns may travel
// joined with another's and decode to the same floats. Not int8, whose scale spans the row.
constexpr bool is_per_element(WireFormat format) {
  return format != WireFormat::Int8;
}

// Bytes of one row of `cols` values.
std::size_t wire_row_bytes(WireFormat format, std::int64_t cols);
// Bytes per value, the per-row scale of int8 spread over `cols` values: what cost models use.
double wire_bytes_per_value(WireFormat format, std::int64_t cols);

// Encodes rows x [rows, cols] (row stride `ld` floats) into `out` (rows * wire_row_bytes bytes).
void encode_rows(WireFormat format, const float* x, std::int64_t ld, std::int64_t rows,
                 std::int64_t cols, std::byte* out);
// Decodes `in` into y [rows, cols] (row stride `ld`).
void decode_rows(WireFormat format, const std::byte* in, std::int64_t rows, std::int64_t cols,
                 float* y, std::int64_t ld);
// y += decoded `in`: a reduction step on what arrived.
void add_decoded_rows(WireFormat format, const std::byte* in, std::int64_t rows, std::int64_t cols,
                      float* y, std::int64_t ld);

}  // namespace huddle
