#include "net/tcp_transport.h"

#include "core/error.h"

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

namespace {

// Retrying cannot fix a key or version mismatch; anything else (not listening yet, busy, no
// such session yet) may pass, so it is retried until the deadline.
bool is_permanent(const std::string& error) {
  return error.find("bad key") != std::string::npos ||
         error.find("protocol version") != std::string::npos;
}

std::unique_ptr<SecureChannel> open_with_retry(const MeshConfig& cfg, const PresharedKey& key,
                                               int peer, Clock::time_point deadline) {
  const Endpoint& ep = cfg.endpoints[static_cast<std::size_t>(peer)];
  std::string last_error;
  Duration backoff{20};
  for (;;) {
    try {
      ChannelOptions options = cfg.channel;
      const auto left = std::chrono::duration_cast<Duration>(deadline - Clock::now());
      options.handshake_timeout = std::max(Duration(1), std::min(options.handshake_timeout, left));
      return open_link(ep, key, options, cfg.session_id, cfg.rank,
                       static_cast<int>(cfg.endpoints.size()));
    } catch (const TransportError& e) {
      last_error = e.what();
      if (is_permanent(last_error)) break;
    }
    if (Clock::now() + backoff >= deadline) break;
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, Duration(500));
  }
  throw TransportError(fmt::format("rank {}: cannot open a link to rank {} at {}: {}", cfg.rank,
                                   peer, ep.str(), last_error));
}

}  // namespace

std::unique_ptr<TcpTransport> connect_mesh(const MeshConfig& cfg, const PresharedKey& key,
                                           LinkAcceptor& acceptor) {
  const int world = static_cast<int>(cfg.endpoints.size());
  HUDDLE_CHECK(cfg.rank >= 0 && cfg.rank < world, "rank {} of {}", cfg.rank, world);
  const auto deadline = Clock::now() + cfg.connect_timeout;
  std::vector<std::unique_ptr<SecureChannel>> links(static_cast<std::size_t>(world));

  // Higher ranks connect to us: take their links in a second thread while we connect down.
  std::exception_ptr accept_error;
  std::thread acceptor_thread([&] {
    try {
      for (int peer = cfg.rank + 1; peer < world; ++peer) {
        const auto left =
            std::max(Duration(0), std::chrono::duration_cast<Duration>(deadline - Clock::now()));
        links[static_cast<std::size_t>(peer)] =
            acceptor.take_link(cfg.session_id, peer, world, left);
      }
    } catch (...) {
      accept_error = std::current_exception();
    }
  });
  std::exception_ptr connect_error;
  try {
    for (int peer = 0; peer < cfg.rank; ++peer) {
      links[static_cast<std::size_t>(peer)] = open_with_retry(cfg, key, peer, deadline);
    }
  } catch (...) {
    connect_error = std::current_exception();
  }
  acceptor_thread.join();
  if (connect_error) std::rethrow_exception(connect_error);
  if (accept_error) std::rethrow_exception(accept_error);
  for (int peer = 0; peer < world; ++peer) {
    if (peer != cfg.rank)
      links[static_cast<std::size_t>(peer)]->set_name(
          cfg.endpoints[static_cast<std::size_t>(peer)].str());
  }
  return std::make_unique<TcpTransport>(cfg.rank, std::move(links), cfg.timeout, cfg.link);
}

}  // namespace huddle::net
