#include "runtime/mesh.h"

#include "core/error.h"

#include <sodium.h>

namespace huddle {

OpenedSession open_sessions(const std::vector<std::string>& workers, const net::PresharedKey& key,
                            net::Duration timeout) {
  net::ensure_sodium();
  OpenedSession s;
  randombytes_buf(&s.id, sizeof s.id);
  s.channel.io_timeout = timeout;
  s.channel.handshake_timeout = timeout;
  s.endpoints = {"primary"};
  const auto deadline = net::Clock::now() + timeout;
  for (const std::string& w : workers) {
    const net::Endpoint worker = net::parse_endpoint(w);
    s.workers.push_back(worker);
    s.endpoints.push_back(worker.str());
    s.controls.push_back(net::dial_with_retry(
        [&](const net::ChannelOptions& o) { return net::open_session(worker, key, o, s.id); },
        s.channel, deadline, fmt::format("open a session on worker {}", worker.str())));
  }
  return s;
}

std::unique_ptr<net::TcpTransport> open_primary_mesh(const std::vector<net::Endpoint>& workers,
                                                     const net::PresharedKey& key,
                                                     const net::ChannelOptions& channel,
                                                     std::uint64_t session_id,
                                                     net::Duration timeout,
                                                     const net::LinkEmulation& link) {
  net::MeshConfig cfg;
  cfg.rank = 0;
  cfg.endpoints.emplace_back();  // the primary accepts no links: it dials every worker
  for (const net::Endpoint& w : workers) cfg.endpoints.emplace_back(w);
  cfg.session_id = session_id;
  cfg.channel = channel;
  cfg.connect_timeout = timeout;
  cfg.timeout = timeout;
  cfg.link = link;
  return net::connect_mesh(cfg, key, nullptr);
}

std::unique_ptr<net::TcpTransport> join_mesh(const MeshPlace& s, net::LinkAcceptor& acceptor,
                                             const net::PresharedKey& key,
                                             const net::ChannelOptions& channel,
                                             const net::LinkEmulation& link) {
  net::MeshConfig cfg;
  cfg.rank = s.rank;
  cfg.endpoints.emplace_back();  // rank 0, the primary, dials us
  for (std::size_t p = 1; p < s.endpoints.size(); ++p)
    cfg.endpoints.emplace_back(net::parse_endpoint(s.endpoints[p]));
  cfg.session_id = s.session_id;
  cfg.channel = channel;
  cfg.connect_timeout = s.timeout;
  cfg.timeout = s.timeout;
  cfg.link = link;
  return net::connect_mesh(cfg, key, &acceptor);
}

void await_session_end(std::vector<std::unique_ptr<net::SecureChannel>>& controls) {
  for (auto& control : controls) {
    try {
      for (;;) control->recv();  // nothing more is sent on it; returns by its closing
    } catch (const Error&) {
      // Closed (the normal end), timed out or broken: either way this session is over.
    }
  }
}

}  // namespace huddle
