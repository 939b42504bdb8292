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
// table from bits to index: 512 slots for at most 256 entries.
class Table {
 public:
  Table() { slot_.fill(kEmpty); }

  // The index of `bits`, added if new; -1 when the table is full.
  int index_of(std::uint32_t bits) {
    std::uint32_t h = (bits * 0x9E3779B1u) >> 23;  // 9 bits
    for (;;) {
      const std::uint16_t s = slot_[h];
      if (s == kEmpty) break;
      if (values_[s] == bits) return s;
      h = (h + 1) & (kSlots - 1);
    }
    if (size_ == kMaxValues) return -1;
    values_[size_] = bits;
    slot_[h] = static_cast<std::uint16_t>(size_);
    return static_cast<int>(size_++);
  }
  std::size_t size() const { return size_; }
  std::uint32_t value(std::size_t i) const { return values_[i]; }

 private:
  static constexpr std::uint32_t kSlots = 512;
  static constexpr std::uint16_t kEmpty = 0xFFFF;
  std::array<std::uint16_t, kSlots> slot_;
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

std::optional<std::vector<std::byte>> encode_palette(std::span<const float> values,
                                                     std::int64_t channels) {
  HUDDLE_CHECK(channels > 0 && values.size() % static_cast<std::size_t>(channels) == 0,
               "{} values in {} channels", values.size(), channels);
  const auto c = static_cast<std::size_t>(channels);
  std::vector<Table> tables(c);
  std::vector<std::uint8_t> indices(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    const int k = tables[i % c].index_of(std::bit_cast<std::uint32_t>(values[i]));
    if (k < 0) return std::nullopt;
    indices[i] = static_cast<std::uint8_t>(k);
  }
  std::vector<std::byte> out;
  out.reserve(12 + c * (2 + 4 * kMaxValues) + values.size());
  put(out, static_cast<std::uint32_t>(c));
  put(out, static_cast<std::uint64_t>(values.size()));
  for (const Table& t : tables) {
    put(out, static_cast<std::uint16_t>(t.size()));
    for (std::size_t i = 0; i < t.size(); ++i) put(out, t.value(i));
  }
  const auto at = out.size();
  out.resize(at + indices.size());
  std::memcpy(out.data() + at, indices.data(), indices.size());
  return out;
}

void decode_palette(std::span<const std::byte> bytes, std::int64_t channels, std::span<float> out) {
  std::size_t at = 0;
  const auto c = get<std::uint32_t>(bytes, at, "the header");
  const auto count = get<std::uint64_t>(bytes, at, "the header");
  if (channels <= 0 || c != static_cast<std::uint64_t>(channels) || count != out.size()) {
    throw InputError(fmt::format("palette coding: {} values in {} channels where {} in {} are due",
                                 count, c, out.size(), channels));
  }
  std::vector<std::vector<float>> tables(c);
  for (std::vector<float>& t : tables) {
    const auto n = get<std::uint16_t>(bytes, at, "a channel's table");
    if (n > kMaxValues)
      throw InputError(fmt::format("palette coding: a channel of {} values (at most 256)", n));
    for (std::uint16_t i = 0; i < n; ++i) t.push_back(get<float>(bytes, at, "a channel's table"));
  }
  if (bytes.size() - at != out.size()) {
    throw InputError(
        fmt::format("palette coding: {} index bytes for {} values", bytes.size() - at, out.size()));
  }
  const auto* index = reinterpret_cast<const std::uint8_t*>(bytes.data() + at);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const std::vector<float>& t = tables[i % c];
    if (index[i] >= t.size()) {
      throw InputError(fmt::format("palette coding: value {} has index {} in a table of {}", i,
                                   index[i], t.size()));
    }
    out[i] = t[index[i]];
  }
}

}  // namespace huddle
