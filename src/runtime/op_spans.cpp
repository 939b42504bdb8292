#include "runtime/op_spans.h"

#include "core/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace huddle {
namespace {

template <typename T>
void put_op_span_field(std::vector<std::byte>& out, T value) {
  const std::size_t at = out.size();
  out.resize(at + sizeof value);
  std::memcpy(out.data() + at, &value, sizeof value);
}

// Reads fixed-size fields off a payload; TransportError when it ends too soon.
class OpSpanReader {
 public:
  OpSpanReader(std::span<const std::byte> bytes, const std::string& peer)
      : bytes_(bytes), peer_(peer) {}

  template <typename T>
  T get() {
    T value;
    need(sizeof value);
    std::memcpy(&value, bytes_.data() + at_, sizeof value);
    at_ += sizeof value;
    return value;
  }
  std::string text(std::size_t n) {
    need(n);
    std::string s(reinterpret_cast<const char*>(bytes_.data() + at_), n);
    at_ += n;
    return s;
  }
  std::size_t left() const { return bytes_.size() - at_; }
  [[noreturn]] void fail(const std::string& what) const {
    throw TransportError(fmt::format("{}: malformed op spans: {}", peer_, what));
  }

 private:
  void need(std::size_t n) const {
    if (left() < n) fail("cut short");
  }

  std::span<const std::byte> bytes_;
  const std::string& peer_;
  std::size_t at_ = 0;
};

}  // namespace

std::vector<std::byte> OpSpanEncoder::encode(const std::vector<OpSpan>& spans) {
  std::vector<std::byte> names;
  std::uint32_t new_names = 0;
  std::vector<std::uint32_t> ids;
  ids.reserve(spans.size());
  for (const OpSpan& s : spans) {
    auto [it, added] = ids_.try_emplace(s.name, static_cast<std::uint32_t>(ids_.size()));
    if (added) {
      const auto length = static_cast<std::uint16_t>(
          std::min<std::size_t>(s.name.size(), std::numeric_limits<std::uint16_t>::max()));
      put_op_span_field(names, static_cast<std::uint8_t>(s.comm ? 1 : 0));
      put_op_span_field(names, length);
      const std::size_t at = names.size();
      names.resize(at + length);
      std::memcpy(names.data() + at, s.name.data(), length);
      ++new_names;
    }
    ids.push_back(it->second);
  }
  std::vector<std::byte> out;
  out.reserve(8 + names.size() + spans.size() * 12);
  put_op_span_field(out, new_names);
  out.insert(out.end(), names.begin(), names.end());
  put_op_span_field(out, static_cast<std::uint32_t>(spans.size()));
  for (std::size_t i = 0; i < spans.size(); ++i) {
    put_op_span_field(out, ids[i]);
    put_op_span_field(out, static_cast<float>(spans[i].start_us));
    put_op_span_field(out, static_cast<float>(spans[i].duration_us));
  }
  return out;
}

std::vector<OpSpan> OpSpanDecoder::decode(std::span<const std::byte> payload,
                                          const std::string& peer) {
  OpSpanReader in(payload, peer);
  const auto new_names = in.get<std::uint32_t>();
  // Each name takes at least 4 bytes: a count the payload cannot hold is refused unread.
  if (new_names > in.left() / 4 || names_.size() + new_names > kMaxNames)
    in.fail(fmt::format("{} new names", new_names));
  for (std::uint32_t i = 0; i < new_names; ++i) {
    const auto comm = in.get<std::uint8_t>();
    const auto length = in.get<std::uint16_t>();
    if (comm > 1 || length == 0) in.fail("bad name record");
    names_.push_back({in.text(length), comm == 1});
  }
  const auto count = in.get<std::uint32_t>();
  if (in.left() != std::size_t{count} * 12)
    in.fail(fmt::format("{} spans in {} bytes", count, in.left()));
  std::vector<OpSpan> spans;
  spans.reserve(count);
  for (std::uint32_t i = 0; i < count; ++i) {
    const auto id = in.get<std::uint32_t>();
    const auto start = in.get<float>();
    const auto duration = in.get<float>();
    if (id >= names_.size()) in.fail(fmt::format("unknown op id {}", id));
    if (!std::isfinite(start) || !std::isfinite(duration) || duration < 0)
      in.fail("a negative or undefined time");
    const Name& name = names_[id];
    spans.push_back({name.text, name.comm, start, duration});
  }
  return spans;
}

}  // namespace huddle
