// Opening a channel for a purpose: a session with a worker, or a mesh link between two ranks of
// a session. The opener sends an OPEN message (wire::Open) right after the handshake; the
// acceptor answers with an ack or closes the channel with the reason ("busy: ...").
//
// LinkAcceptor is where a rank waits for the mesh links that higher ranks open to it: a Server
// (net/server.h) is one; ListenerAcceptor, over a bare Listener, is another (tests, simple use).
#pragma once

#include "net/secure_channel.h"

#include <functional>
#include <map>
#include <memory>
#include <string_view>
#include <utility>

namespace huddle::net {

struct OpenRequest {
  wire::OpenKind kind = wire::OpenKind::kSession;
  int rank = 0;   // mesh link: the opener's rank
  int world = 0;  // mesh link: ranks in the session
  std::uint64_t session_id = 0;
};

// Connects, authenticates and opens a session on a worker. Throws TransportError naming the
// worker, e.g. "... peer closed the connection: busy: serving session 17".
std::unique_ptr<SecureChannel> open_session(const Endpoint& worker, const PresharedKey& key,
                                            const ChannelOptions& options,
                                            std::uint64_t session_id);

// Opens a mesh link of session `session_id` from rank `from_rank` (of `world`) to `peer`.
std::unique_ptr<SecureChannel> open_link(const Endpoint& peer, const PresharedKey& key,
                                         const ChannelOptions& options, std::uint64_t session_id,
                                         int from_rank, int world);

// Dials until it works: calls `attempt` with `options` (handshake_timeout capped by the time
// left) and retries a failure with exponential backoff (20 ms, doubling, at most 1 s between
// tries) until `deadline`, because peers start at different times and a worker may still be
// ending an earlier session ("busy") or not yet know this one ("no session"). A refusal no retry
// can fix (bad key, another protocol version) is not retried. Throws TransportError "cannot
// <what>: <last error> (<n> attempts in <time>)".
std::unique_ptr<SecureChannel> dial_with_retry(
    const std::function<std::unique_ptr<SecureChannel>(const ChannelOptions&)>& attempt,
    const ChannelOptions& options, Clock::time_point deadline, std::string_view what);

// Acceptor side: reads and validates the OPEN message (every field checked).
OpenRequest read_open(SecureChannel& channel);
// Acceptor side: accepts what read_open() returned.
void ack_open(SecureChannel& channel);

class LinkAcceptor {
 public:
  virtual ~LinkAcceptor() = default;
  // Waits up to `timeout` for the link that rank `from_rank` of session `session_id` (with
  // `world` ranks) opens to us; the link has been acknowledged. Throws TransportError on timeout.
  virtual std::unique_ptr<SecureChannel> take_link(std::uint64_t session_id, int from_rank,
                                                   int world, Duration timeout) = 0;
};

// A LinkAcceptor that accepts on a Listener in the calling thread: each connection is
// authenticated and its OPEN read; links for other ranks are kept for later calls, anything
// else (bad key, wrong session, garbage) is dropped. One caller thread at a time.
class ListenerAcceptor final : public LinkAcceptor {
 public:
  ListenerAcceptor(Listener& listener, const PresharedKey& key, ChannelOptions options);
  std::unique_ptr<SecureChannel> take_link(std::uint64_t session_id, int from_rank, int world,
                                           Duration timeout) override;
  // Errors of the connections dropped so far (for diagnostics and tests).
  const std::vector<std::string>& dropped() const { return dropped_; }

 private:
  Listener& listener_;
  PresharedKey key_;
  ChannelOptions options_;
  std::map<std::pair<std::uint64_t, int>, std::unique_ptr<SecureChannel>> pending_;
  std::vector<std::string> dropped_;
};

}  // namespace huddle::net
