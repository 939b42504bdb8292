#include "core/palette.h"

#include "core/error.h"

#include <fmt/format.h>

#include <array>
#include <bit>
#include <cstring>

namespace huddle {
namespace {

constexpr std::size_t kMaxValues = 256;

// One channel's distinct values (by bits) in order of first appearance, with an open-addressing
// table from bits to index: 4096 slots for at most 256 entries, so that a lookup nearly always
// ends at its first slot (at half load, the probes' branches cost an image's encoding 3x).
class Table {
 public:
  Table() { index_.fill(kEmpty); }

  // The index of `bits`, added if new; -1 when the table is full.
  int index_of(std::uint32_t bits) {
    std::uint32_t h = (bits * 0x9E3779B1u) >> (32 - kSlotBits);
    while (index_[h] != kEmpty) {
      if (key_[h] == bits) return index_[h];
      h = (h + 1) & (kSlots - 1);
    }
    if (size_ == kMaxValues) return -1;
    values_[size_] = bits;
    key_[h] = bits;
    index_[h] = static_cast<std::uint16_t>(size_);
    return static_cast<int>(size_++);
  }
  std::size_t size() const { return size_; }
  std::uint32_t value(std::size_t i) const { return values_[i]; }

 private:
  static constexpr int kSlotBits = 12;
  static constexpr std::uint32_t kSlots = 1u << kSlotBits;
  static constexpr std::uint16_t kEmpty = 0xFFFF;
  std::array<std::uint32_t, kSlots> key_{};
  std::array<std::uint16_t, kSlots> index_;
  std::array<std::uint32_t, kMaxValues> values_{};
  std::size_t size_ = 0;
};

template <typename T>
void put(std::vector<std::byte>& out, T v) {
  const auto at = out.size();
  out.resize(at + sizeof v);
  std::memcpy(out.data() + at, &v, sizeof v);
}

// Reads a T at `at`, advancing it; InputError when the bytes end first.
template <typename T>
T get(std::span<const std::byte> in, std::size_t& at, const char* what) {
  if (in.size() - at < sizeof(T)) {
    throw InputError(fmt::format("palette coding: the bytes end inside {} (at byte {} of {})", what,
                                 at, in.size()));
  }
  T v;
  std::memcpy(&v, in.data() + at, sizeof v);
  at += sizeof v;
  return v;
}

}  // namespace

bool encode_palette(std::span<const float> values, std::int64_t channels,
                    std::vector<std::byte>& out) {
  HUDDLE_CHECK(channels > 0 && values.size() % static_cast<std::size_t>(channels) == 0,
               "{} values in {} channels", values.size(), channels);
  const auto c = static_cast<std::size_t>(channels);
  const std::size_t start = out.size();
  put(out, static_cast<std::uint32_t>(c));
  put(out, static_cast<std::uint64_t>(values.size()));
  const std::size_t at = out.size();
  out.resize(at + values.size());
  auto* index = reinterpret_cast<std::uint8_t*>(out.data() + at);
  std::vector<Table> tables(c);
  // Pixel by pixel, channel by channel: no division per value.
  for (std::size_t i = 0; i < values.size(); i += c) {
    for (std::size_t k = 0; k < c; ++k) {
      const int j = tables[k].index_of(std::bit_cast<std::uint32_t>(values[i + k]));
      if (j < 0) {
        out.resize(start);
        return false;
      }
      index[i + k] = static_cast<std::uint8_t>(j);
    }
  }
  for (const Table& t : tables) {
    put(out, static_cast<std::uint16_t>(t.size()));
    for (std::size_t i = 0; i < t.size(); ++i) put(out, t.value(i));
  }
  return true;
}

void decode_palette(std::span<const std::byte> bytes, std::int64_t channels, std::span<float> out) {
  std::size_t at = 0;
  const auto c = get<std::uint32_t>(bytes, at, "the header");
  const auto count = get<std::uint64_t>(bytes, at, "the header");
  if (channels <= 0 || c != static_cast<std::uint64_t>(channels) || count != out.size() ||
      out.size() % c != 0) {
    throw InputError(fmt::format("palette coding: {} values in {} channels where {} in {} are due",
                                 count, c, out.size(), channels));
  }
  if (bytes.size() - at < out.size()) {
    throw InputError(fmt::format("palette coding: {} bytes for {} indices and the tables",
                                 bytes.size() - at, out.size()));
  }
  const auto* index = reinterpret_cast<const std::uint8_t*>(bytes.data() + at);
  at += out.size();
  std::vector<std::array<float, kMaxValues>> tables(c);
  std::vector<std::size_t> sizes(c);
  for (std::size_t k = 0; k < c; ++k) {
    sizes[k] = get<std::uint16_t>(bytes, at, "a channel's table");
    if (sizes[k] > kMaxValues) {
      throw InputError(
          fmt::format("palette coding: a channel of {} values (at most 256)", sizes[k]));
    }
    for (std::size_t i = 0; i < sizes[k]; ++i)
      tables[k][i] = get<float>(bytes, at, "a channel's table");
  }
  if (at != bytes.size()) {
    throw InputError(
        fmt::format("palette coding: {} bytes left after the tables", bytes.size() - at));
  }
  for (std::size_t i = 0; i < out.size(); i += c) {
    for (std::size_t k = 0; k < c; ++k) {
      const std::uint8_t j = index[i + k];
      if (j >= sizes[k]) {
        throw InputError(fmt::format("palette coding: value {} has index {} in a table of {}",
                                     i + k, j, sizes[k]));
      }
      out[i + k] = tables[k][j];
    }
  }
}

}  // namespace huddle
