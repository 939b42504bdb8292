// The session mesh: one authenticated channel per pair of devices, opened after the primary has
// described the session to every worker (runtime/cluster_protocol.h, step 2). Rank 0 (the
// primary, which has no listener) opens a link to every worker; each worker opens links to the
// workers of lower rank and takes those of higher rank. Both sides are net::connect_mesh, the one
// mesh builder: every dial is retried with exponential backoff until the session's timeout.
#pragma once

#include "net/key.h"
#include "net/server.h"
#include "net/session.h"
#include "net/tcp_transport.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace huddle {

// Where a worker sits in a session, as the primary's setup message tells it.
struct MeshPlace {
  int rank = 0;
  int world = 0;
  std::uint64_t session_id = 0;
  std::vector<std::string> endpoints;  // per rank; [0] is the primary (not dialled)
  net::Duration timeout{10000};
};

// The primary's side of a session's start: a fresh random session id and a control channel to
// each worker (net::open_session), with `timeout` for handshakes and I/O. A worker that is not
// up yet or busy is retried with backoff (net::dial_with_retry) until `timeout` has passed since
// the call. TransportError naming a worker that still cannot be reached or is busy then, or that
// refuses the key.
struct OpenedSession {
  std::uint64_t id = 0;
  net::ChannelOptions channel;
  std::vector<net::Endpoint> workers;
  std::vector<std::string> endpoints;  // "primary", then each worker's address: the setup's list
  std::vector<std::unique_ptr<net::SecureChannel>> controls;  // one per worker
};
OpenedSession open_sessions(const std::vector<std::string>& workers, const net::PresharedKey& key,
                            net::Duration timeout);

// Rank 0's side: a link to each of `workers` (ranks 1..n).
std::unique_ptr<net::TcpTransport> open_primary_mesh(const std::vector<net::Endpoint>& workers,
                                                     const net::PresharedKey& key,
                                                     const net::ChannelOptions& channel,
                                                     std::uint64_t session_id,
                                                     net::Duration timeout,
                                                     const net::LinkEmulation& link);

// A worker's side: takes the links of the primary and of higher ranks from `acceptor` while
// opening those to lower ranks (concurrently, since they open theirs to us at the same time).
std::unique_ptr<net::TcpTransport> join_mesh(const MeshPlace& place, net::LinkAcceptor& acceptor,
                                             const net::PresharedKey& key,
                                             const net::ChannelOptions& channel,
                                             const net::LinkEmulation& link);

// The primary's side of a session's end, after it has told the workers: waits until each worker
// closes its control channel (when it does, it takes new sessions), so that the next session
// is not refused as busy. Errors are ignored: a worker that is gone has ended too.
void await_session_end(std::vector<std::unique_ptr<net::SecureChannel>>& controls);

}  // namespace huddle
