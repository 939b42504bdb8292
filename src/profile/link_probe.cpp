#include "profile/link_probe.h"

#include "core/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <thread>
#include <vector>

namespace huddle::profile {
namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// Seconds from sending `payload` with `tag` until the answer with `answer_tag` is in.
double round_trip(net::Transport& t, int peer, std::uint32_t tag,
                  std::span<const std::byte> payload, std::uint32_t answer_tag) {
  const auto start = Clock::now();
  t.send(peer, tag, payload);
  const net::Message m = t.recv(peer);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (m.tag != answer_tag) {
    throw TransportError(fmt::format("{}: link probe expected tag {:#x}, got {:#x}",
                                     t.peer_name(peer), answer_tag, m.tag));
  }
  return seconds;
}

// Sends `bulk` to `peer` while receiving a message of the same size from it (both directions at
// once, as in a ring step).
void exchange(net::Transport& t, int peer, const std::vector<std::byte>& bulk) {
  std::exception_ptr send_error;
  std::thread sender([&] {
    try {
      t.send(peer, kLinkBulkTag, bulk);
    } catch (...) {
      send_error = std::current_exception();
    }
  });
  net::Message in;
  try {
    in = t.recv(peer);
  } catch (...) {
    sender.join();
    throw;
  }
  sender.join();
  if (send_error) std::rethrow_exception(send_error);
  if (in.tag != kLinkBulkTag || in.payload.size() != bulk.size()) {
    throw TransportError(
        fmt::format("{}: link probe expected {} duplex bytes, got tag {:#x} with {}",
                    t.peer_name(peer), bulk.size(), in.tag, in.payload.size()));
  }
}

}  // namespace

LinkMeasurement measure_link(net::Transport& t, int peer, const LinkProbeOptions& o) {
  HUDDLE_CHECK(o.pings >= 1 && o.bulk_repeats >= 1 && o.max_bytes >= 1024);
  const std::vector<std::byte> ping(64);
  std::vector<double> pings;
  for (int i = 0; i < o.pings + 1; ++i) {
    const double rtt = round_trip(t, peer, kLinkPingTag, ping, kLinkPingTag);
    if (i > 0) pings.push_back(rtt);  // the first warms the path up
  }
  const double small_rtt = median(pings);

  std::size_t bytes = std::min<std::size_t>(std::size_t{64} << 10, o.max_bytes);
  std::vector<std::byte> bulk(bytes);
  const auto one_way = [&] {
    return std::max(round_trip(t, peer, kLinkBulkTag, bulk, kLinkAckTag) - small_rtt, 1e-7);
  };
  double transfer = one_way();
  while (transfer < o.min_transfer_s && bytes < o.max_bytes) {
    bytes = std::min(bytes * 2, o.max_bytes);
    bulk.resize(bytes);
    transfer = one_way();
  }
  std::vector<double> transfers = {transfer};
  for (int i = 1; i < o.bulk_repeats; ++i) transfers.push_back(one_way());

  // Duplex: both ends send at once (the peer starts when our command arrives), at 64 KiB and at
  // the bulk size: the line through both gives the bandwidth and the fixed cost of a ring step's
  // exchange (threads, syscalls, framing), which small activations pay in full.
  const auto duplex_s = [&](std::size_t n) {
    const std::uint64_t size = n;
    const std::vector<std::byte> data(n);
    std::vector<double> times;
    for (int i = 0; i < o.bulk_repeats + 2; ++i) {
      const auto start = Clock::now();
      t.send(peer, kLinkDuplexTag, std::as_bytes(std::span(&size, 1)));
      exchange(t, peer, data);
      times.push_back(std::max(
          std::chrono::duration<double>(Clock::now() - start).count() - small_rtt / 2, 1e-7));
    }
    return median(std::move(times));
  };
  const std::size_t small_bytes = std::min<std::size_t>(std::size_t{64} << 10, bytes);
  const double small_duplex = duplex_s(small_bytes);
  const double large_duplex = bytes > small_bytes ? duplex_s(bytes) : small_duplex;
  t.send(peer, kLinkEndTag, {});

  LinkMeasurement m;
  m.latency_s = small_rtt / 2;
  m.bandwidth_bps = static_cast<double>(bytes) * 8 / median(transfers);
  // Never above the one-way figure: a duplex transfer cannot be faster than a lone one.
  double duplex_bps = static_cast<double>(bytes) * 8 / large_duplex;
  if (bytes > small_bytes && large_duplex > small_duplex)
    duplex_bps = static_cast<double>(bytes - small_bytes) * 8 / (large_duplex - small_duplex);
  m.duplex_bandwidth_bps = std::min(m.bandwidth_bps, duplex_bps);
  m.duplex_latency_s = std::max(
      m.latency_s, small_duplex - static_cast<double>(small_bytes) * 8 / m.duplex_bandwidth_bps);
  m.bulk_bytes = bytes;
  return m;
}

void echo_link(net::Transport& t, int peer, std::size_t max_bytes) {
  const std::uint64_t ack = 0;
  for (;;) {
    const net::Message m = t.recv(peer);
    if (m.payload.size() > max_bytes) {
      throw TransportError(fmt::format("{}: link probe message of {} bytes exceeds {}",
                                       t.peer_name(peer), m.payload.size(), max_bytes));
    }
    switch (m.tag) {
      case kLinkPingTag:
        t.send(peer, kLinkPingTag, m.payload);
        break;
      case kLinkBulkTag:
        t.send(peer, kLinkAckTag, std::as_bytes(std::span(&ack, 1)));
        break;
      case kLinkDuplexTag: {
        std::uint64_t size = 0;
        if (m.payload.size() != sizeof size) {
          throw TransportError(fmt::format("{}: malformed duplex request", t.peer_name(peer)));
        }
        std::memcpy(&size, m.payload.data(), sizeof size);
        if (size > max_bytes) {
          throw TransportError(fmt::format("{}: duplex transfer of {} bytes exceeds {}",
                                           t.peer_name(peer), size, max_bytes));
        }
        exchange(t, peer, std::vector<std::byte>(size));
        break;
      }
      case kLinkEndTag:
        return;
      default:
        throw TransportError(
            fmt::format("{}: unexpected tag {:#x} in a link probe", t.peer_name(peer), m.tag));
    }
  }
}

}  // namespace huddle::profile
