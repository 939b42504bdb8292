// Op spans of one step on one device, for the server's live timeline: each op's name, whether it
// moves data between devices, its start from the start of the step on that device's own clock,
// and its duration. Unlike --trace's spans (runtime/trace.h), which a worker keeps until the
// session ends, these travel after the step report of each step the primary asks them for
// (runtime/session.h: the step header's op-spans flag and kStepSpansTag), so a server sees them
// while the request runs.
//
// Payload of kStepSpansTag (little-endian). An op's name goes on the wire once per session, the
// first time a span of it is sent; later spans refer to it by its id (0, 1, ... in the order the
// names were sent):
//   u32 new_names, then each: u8 comm (0/1), u16 length, `length` bytes of name
//   u32 spans, then each: u32 id, f32 start_us, f32 duration_us
// A decode step of a 12-layer model is some 200 spans: about 2.4 kB once its names are known.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace huddle {

struct OpSpan {
  std::string name;     // the op's, e.g. "blk.3.attn_out"
  bool comm = false;    // data movement between devices (a collective, a send or receive)
  double start_us = 0;  // from the start of the step on this device
  double duration_us = 0;
};

// The sending side of one session: remembers which names the receiver already has.
class OpSpanEncoder {
 public:
  std::vector<std::byte> encode(const std::vector<OpSpan>& spans);

 private:
  std::unordered_map<std::string, std::uint32_t> ids_;
};

// The receiving side of one session (one per peer).
class OpSpanDecoder {
 public:
  // The spans of one payload; TransportError naming `peer` when it is malformed (cut short,
  // trailing bytes, an unknown id, an empty or over-long name, more than kMaxNames names).
  std::vector<OpSpan> decode(std::span<const std::byte> payload, const std::string& peer);

  static constexpr std::size_t kMaxNames = 1 << 20;

 private:
  struct Name {
    std::string text;
    bool comm = false;
  };
  std::vector<Name> names_;
};

}  // namespace huddle
