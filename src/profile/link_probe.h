// Link probe: latency and bandwidth from one device to another over their session link.
//
// Protocol between the measuring rank and the echoing peer (tags below, on the Transport):
//   ping  (64 bytes)  -> echoed back unchanged, `pings` times: latency = median round trip / 2;
//   bulk  (S bytes)   -> answered by an 8-byte ack: one-way time of S bytes = round trip minus
//                        the small round trip. S doubles from 64 KiB until a transfer takes
//                        `min_transfer_s` (or reaches max_bytes), then is repeated; bandwidth is
//                        S over the median one-way time;
//   duplex (u64 S)    -> both sides send S bytes (bulk) to each other at once, as in a ring step,
//                        at 64 KiB and at the bulk size: the line through the two median times
//                        gives the duplex bandwidth and the exchange's fixed cost;
//   end   (empty)     -> the echoing side returns.
// Everything the link adds per message is measured: encryption, the kernel's stack, the testbed's
// shaping and emulated delay.
#pragma once

#include "net/transport.h"

#include <cstddef>
#include <cstdint>

namespace huddle::profile {

inline constexpr std::uint32_t kLinkPingTag = 0x10000020u;
inline constexpr std::uint32_t kLinkBulkTag = 0x10000021u;
inline constexpr std::uint32_t kLinkAckTag = 0x10000022u;
inline constexpr std::uint32_t kLinkEndTag = 0x10000023u;
inline constexpr std::uint32_t kLinkDuplexTag = 0x10000024u;

struct LinkMeasurement {
  double latency_s = 0;             // one way, per message
  double bandwidth_bps = 0;         // bits per second
  double duplex_bandwidth_bps = 0;  // each way, while both ends send at once
  double duplex_latency_s = 0;      // fixed cost of such an exchange (>= latency_s)
  std::size_t bulk_bytes = 0;       // the transfer size the bandwidth was measured at
};

struct LinkProbeOptions {
  int pings = 10;
  int bulk_repeats = 3;
  double min_transfer_s = 0.03;
  std::size_t max_bytes = std::size_t{32} << 20;
};

// Measures the link to `peer`, which must be running echo_link() for this rank.
LinkMeasurement measure_link(net::Transport& transport, int peer, const LinkProbeOptions& options);

// Answers `peer`'s measure_link() until it sends the end message. TransportError on any other
// tag or a message over `max_bytes`.
void echo_link(net::Transport& transport, int peer, std::size_t max_bytes);

}  // namespace huddle::profile
