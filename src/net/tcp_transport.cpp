#include "net/tcp_transport.h"

#include "core/error.h"

#include <algorithm>
#include <exception>
#include <thread>

namespace huddle::net {

TcpTransport::TcpTransport(int rank, std::vector<std::unique_ptr<SecureChannel>> links,
                           Duration timeout, LinkEmulation link)
    : rank_(rank), links_(std::move(links)), timeout_ms_(timeout.count()), emulation_(link) {
  HUDDLE_CHECK(rank_ >= 0 && rank_ < size(), "rank {} of {}", rank_, size());
  for (int r = 0; r < size(); ++r) {
    auto& ch = links_[static_cast<std::size_t>(r)];
    HUDDLE_CHECK((r == rank_) == (ch == nullptr), "link {} of rank {}", r, rank_);
    if (!ch) continue;
    ch->set_name(fmt::format("rank {} ({})", r, ch->name()));
    ch->set_io_timeout(timeout);
  }
}

TcpTransport::~TcpTransport() {
  for (auto& ch : links_) {
    if (ch) ch->shutdown();
  }
}

SecureChannel& TcpTransport::link(int peer) {
  HUDDLE_CHECK(peer >= 0 && peer < size() && peer != rank_, "bad peer {} for rank {} of {}", peer,
               rank_, size());
  return *links_[static_cast<std::size_t>(peer)];
}

std::string TcpTransport::peer_name(int peer) const {
  if (peer < 0 || peer >= size() || peer == rank_) return fmt::format("rank {}", peer);
  return links_[static_cast<std::size_t>(peer)]->name();
}

void TcpTransport::send(int peer, std::uint32_t tag, std::span<const std::byte> payload) {
  SecureChannel& ch = link(peer);
  if (emulation_.active()) std::this_thread::sleep_for(emulation_.delay(payload.size()));
  ch.send(tag, payload);
  bytes_sent_ += payload.size();
}

Message TcpTransport::recv(int peer) {
  return link(peer).recv();
}

void TcpTransport::recv_into(int peer, std::uint32_t tag, std::span<std::byte> out) {
  link(peer).recv_into(tag, out);
}

void TcpTransport::set_timeout(Duration timeout) {
  timeout_ms_.store(timeout.count());
  for (auto& ch : links_) {
    if (ch) ch->set_io_timeout(timeout);
  }
}

void TcpTransport::close() {
  for (auto& ch : links_) {
    if (ch) ch->close(fmt::format("rank {} closed the session", rank_));
  }
}

bool dials(const MeshConfig& cfg, int from, int to) {
  const auto& ends = cfg.endpoints;
  const bool from_accepts = ends[static_cast<std::size_t>(from)].has_value();
  const bool to_accepts = ends[static_cast<std::size_t>(to)].has_value();
  if (from_accepts != to_accepts) return !from_accepts;
  return from > to;
}

std::unique_ptr<TcpTransport> connect_mesh(const MeshConfig& cfg, const PresharedKey& key,
                                           LinkAcceptor* acceptor) {
  const int world = static_cast<int>(cfg.endpoints.size());
  HUDDLE_CHECK(cfg.rank >= 0 && cfg.rank < world, "rank {} of {}", cfg.rank, world);
  const auto deadline = Clock::now() + cfg.connect_timeout;
  std::vector<int> to_dial, to_take;
  for (int peer = 0; peer < world; ++peer) {
    if (peer == cfg.rank) continue;
    if (!cfg.endpoints[static_cast<std::size_t>(cfg.rank)] &&
        !cfg.endpoints[static_cast<std::size_t>(peer)]) {
      throw TransportError(
          fmt::format("rank {}: neither it nor rank {} accepts links, so nobody can open theirs",
                      cfg.rank, peer));
    }
    (dials(cfg, cfg.rank, peer) ? to_dial : to_take).push_back(peer);
  }
  HUDDLE_CHECK(to_take.empty() || acceptor != nullptr, "rank {} takes links without an acceptor",
               cfg.rank);
  std::vector<std::unique_ptr<SecureChannel>> links(static_cast<std::size_t>(world));

  // Take the links dialled to us in a second thread while we dial ours.
  std::exception_ptr accept_error;
  std::thread acceptor_thread([&] {
    try {
      for (int peer : to_take) {
        const auto left =
            std::max(Duration(0), std::chrono::duration_cast<Duration>(deadline - Clock::now()));
        links[static_cast<std::size_t>(peer)] =
            acceptor->take_link(cfg.session_id, peer, world, left);
      }
    } catch (...) {
      accept_error = std::current_exception();
    }
  });
  std::exception_ptr connect_error;
  try {
    for (int peer : to_dial) {
      const Endpoint& ep = *cfg.endpoints[static_cast<std::size_t>(peer)];
      links[static_cast<std::size_t>(peer)] = dial_with_retry(
          [&](const ChannelOptions& o) {
            return open_link(ep, key, o, cfg.session_id, cfg.rank, world);
          },
          cfg.channel, deadline,
          fmt::format("open a link from rank {} to rank {} at {}", cfg.rank, peer, ep.str()));
    }
  } catch (...) {
    connect_error = std::current_exception();
  }
  acceptor_thread.join();
  if (connect_error) std::rethrow_exception(connect_error);
  if (accept_error) std::rethrow_exception(accept_error);
  // Ranks go by the addresses they accept on (an accepted link's socket shows an ephemeral
  // port), so errors name a peer the way the user gave it.
  for (int peer = 0; peer < world; ++peer) {
    const auto& ep = cfg.endpoints[static_cast<std::size_t>(peer)];
    if (peer != cfg.rank && ep) links[static_cast<std::size_t>(peer)]->set_name(ep->str());
  }
  return std::make_unique<TcpTransport>(cfg.rank, std::move(links), cfg.timeout, cfg.link);
}

}  // namespace huddle::net
