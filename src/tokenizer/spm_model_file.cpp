#include "tokenizer/spm_model_file.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "core/error.h"

namespace huddle::tok {
namespace {

enum WireType : int { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

// A bounded reader over one message's bytes; every read checks the end first.
class ProtoReader {
 public:
  ProtoReader(std::span<const std::byte> bytes, const std::string& origin, std::string message)
      : bytes_(bytes), origin_(origin), message_(std::move(message)) {}

  bool done() const { return pos_ == bytes_.size(); }

  std::uint64_t varint() {
    std::uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= bytes_.size()) fail("a varint runs past the end");
      const auto b = static_cast<std::uint8_t>(bytes_[pos_++]);
      value |= static_cast<std::uint64_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) return value;
    }
    fail("a varint is longer than 10 bytes");
  }

  // The next field's number and wire type.
  std::pair<std::uint32_t, int> key() {
    const std::uint64_t k = varint();
    if ((k >> 3) == 0 || (k >> 3) > 0x1FFFFFFF) fail("a field number is out of range");
    return {static_cast<std::uint32_t>(k >> 3), static_cast<int>(k & 7)};
  }

  std::span<const std::byte> length_delimited() {
    const std::uint64_t n = varint();
    if (n > bytes_.size() - pos_) fail("a field's length runs past the end");
    const std::span<const std::byte> out = bytes_.subspan(pos_, static_cast<std::size_t>(n));
    pos_ += static_cast<std::size_t>(n);
    return out;
  }

  float fixed32_float() {
    if (bytes_.size() - pos_ < 4) fail("a 32-bit field runs past the end");
    std::uint32_t bits = 0;
    for (int i = 0; i < 4; ++i) {
      bits |= static_cast<std::uint32_t>(static_cast<std::uint8_t>(bytes_[pos_ + i])) << (8 * i);
    }
    pos_ += 4;
    float f = 0;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }

  void skip(int wire_type) {
    switch (wire_type) {
      case kVarint:
        varint();
        return;
      case kFixed64:
        if (bytes_.size() - pos_ < 8) fail("a 64-bit field runs past the end");
        pos_ += 8;
        return;
      case kLengthDelimited:
        length_delimited();
        return;
      case kFixed32:
        if (bytes_.size() - pos_ < 4) fail("a 32-bit field runs past the end");
        pos_ += 4;
        return;
      default:
        fail(fmt::format("wire type {} is not one protobuf writes here", wire_type));
    }
  }

  void expect(int wire_type, int wanted, std::uint32_t field) {
    if (wire_type != wanted) {
      fail(fmt::format("field {} has wire type {}, expected {}", field, wire_type, wanted));
    }
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw LoadError(fmt::format("{}: not a SentencePiece model: {}: {} (at byte {})", origin_,
                                message_, what, pos_));
  }

 private:
  std::span<const std::byte> bytes_;
  const std::string& origin_;
  std::string message_;
  std::size_t pos_ = 0;
};

std::string to_string(std::span<const std::byte> b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

ScoredPiece parse_piece(std::span<const std::byte> bytes, const std::string& origin,
                        std::size_t index) {
  ProtoReader r(bytes, origin, fmt::format("pieces[{}]", index));
  ScoredPiece piece;
  while (!r.done()) {
    const auto [field, wire] = r.key();
    if (field == 1) {
      r.expect(wire, kLengthDelimited, field);
      piece.text = to_string(r.length_delimited());
    } else if (field == 2) {
      r.expect(wire, kFixed32, field);
      piece.score = r.fixed32_float();
    } else if (field == 3) {
      r.expect(wire, kVarint, field);
      const std::uint64_t type = r.varint();
      if (type < 1 || type > 6) r.fail(fmt::format("type {} is not a piece type (1-6)", type));
      piece.type = static_cast<PieceType>(type);
    } else {
      r.skip(wire);
    }
  }
  return piece;
}

void parse_trainer(std::span<const std::byte> bytes, const std::string& origin, SpmModelFile& m) {
  ProtoReader r(bytes, origin, "trainer_spec");
  while (!r.done()) {
    const auto [field, wire] = r.key();
    if (field == 3 || field == 24 || field == 35 || field == 41 || field == 42) {
      r.expect(wire, kVarint, field);
      const std::uint64_t v = r.varint();
      // int32 fields: negative values travel as 64-bit two's complement.
      const auto as_int32 = static_cast<std::int32_t>(static_cast<std::int64_t>(v));
      if (field == 3) m.model_type = static_cast<int>(std::min<std::uint64_t>(v, 1000));
      if (field == 24) m.treat_whitespace_as_suffix = v != 0;
      if (field == 35) m.byte_fallback = v != 0;
      if (field == 41) m.bos_id = as_int32;
      if (field == 42) m.eos_id = as_int32;
    } else {
      r.skip(wire);
    }
  }
}

void parse_normalizer(std::span<const std::byte> bytes, const std::string& origin,
                      SpmModelFile& m) {
  ProtoReader r(bytes, origin, "normalizer_spec");
  while (!r.done()) {
    const auto [field, wire] = r.key();
    if (field == 1 || field == 2) {
      r.expect(wire, kLengthDelimited, field);
      const std::span<const std::byte> value = r.length_delimited();
      if (field == 1) m.normalizer_name = to_string(value);
      if (field == 2) m.has_charsmap = !value.empty();
    } else if (field >= 3 && field <= 5) {
      r.expect(wire, kVarint, field);
      const bool v = r.varint() != 0;
      if (field == 3) m.add_dummy_prefix = v;
      if (field == 4) m.remove_extra_whitespaces = v;
      if (field == 5) m.escape_whitespaces = v;
    } else {
      r.skip(wire);
    }
  }
}

}  // namespace

SpmModelFile parse_spm_model(std::span<const std::byte> bytes, const std::string& origin) {
  SpmModelFile m;
  ProtoReader r(bytes, origin, "ModelProto");
  while (!r.done()) {
    const auto [field, wire] = r.key();
    if (field >= 1 && field <= 3) {
      r.expect(wire, kLengthDelimited, field);
      const std::span<const std::byte> sub = r.length_delimited();
      if (field == 1) m.pieces.push_back(parse_piece(sub, origin, m.pieces.size()));
      if (field == 2) parse_trainer(sub, origin, m);
      if (field == 3) parse_normalizer(sub, origin, m);
    } else {
      r.skip(wire);
    }
  }
  if (m.pieces.empty()) r.fail("it has no pieces");
  return m;
}

}  // namespace huddle::tok
