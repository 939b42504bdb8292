#include "runtime/mesh.h"

#include "core/error.h"

#include <sodium.h>

#include <exception>
#include <thread>

namespace huddle {

OpenedSession open_sessions(const std::vector<std::string>& workers, const net::PresharedKey& key,
                            net::Duration timeout) {
  net::ensure_sodium();
  OpenedSession s;
  randombytes_buf(&s.id, sizeof s.id);
  s.channel.io_timeout = timeout;
  s.channel.handshake_timeout = timeout;
  s.endpoints = {"primary"};
  for (const std::string& w : workers) {
    s.workers.push_back(net::parse_endpoint(w));
    s.endpoints.push_back(s.workers.back().str());
    s.controls.push_back(net::open_session(s.workers.back(), key, s.channel, s.id));
  }
  return s;
}

std::unique_ptr<net::TcpTransport> open_primary_mesh(const std::vector<net::Endpoint>& workers,
                                                     const net::PresharedKey& key,
                                                     const net::ChannelOptions& channel,
                                                     std::uint64_t session_id,
                                                     net::Duration timeout,
                                                     const net::LinkEmulation& link) {
  const int world = static_cast<int>(workers.size()) + 1;
  std::vector<std::unique_ptr<net::SecureChannel>> links(static_cast<std::size_t>(world));
  for (int r = 1; r < world; ++r) {
    links[static_cast<std::size_t>(r)] = net::open_link(workers[static_cast<std::size_t>(r - 1)],
                                                        key, channel, session_id, 0, world);
  }
  return std::make_unique<net::TcpTransport>(0, std::move(links), timeout, link);
}

std::unique_ptr<net::TcpTransport> join_mesh(const MeshPlace& s, net::LinkAcceptor& acceptor,
                                             const net::PresharedKey& key,
                                             const net::ChannelOptions& channel,
                                             const net::LinkEmulation& link) {
  std::vector<std::unique_ptr<net::SecureChannel>> links(static_cast<std::size_t>(s.world));
  std::exception_ptr accept_error;
  std::thread taker([&] {
    try {
      links[0] = acceptor.take_link(s.session_id, 0, s.world, s.timeout);
      for (int p = s.rank + 1; p < s.world; ++p) {
        links[static_cast<std::size_t>(p)] =
            acceptor.take_link(s.session_id, p, s.world, s.timeout);
      }
    } catch (...) {
      accept_error = std::current_exception();
    }
  });
  std::exception_ptr open_error;
  try {
    for (int p = 1; p < s.rank; ++p) {
      links[static_cast<std::size_t>(p)] =
          net::open_link(net::parse_endpoint(s.endpoints[static_cast<std::size_t>(p)]), key,
                         channel, s.session_id, s.rank, s.world);
    }
  } catch (...) {
    open_error = std::current_exception();
  }
  taker.join();
  if (open_error) std::rethrow_exception(open_error);
  if (accept_error) std::rethrow_exception(accept_error);
  // Workers go by the addresses they listen on (an accepted link's socket shows an ephemeral
  // port), so errors name a peer the way the user gave it.
  for (int p = 1; p < s.world; ++p) {
    if (p != s.rank)
      links[static_cast<std::size_t>(p)]->set_name(s.endpoints[static_cast<std::size_t>(p)]);
  }
  return std::make_unique<net::TcpTransport>(s.rank, std::move(links), s.timeout, link);
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
