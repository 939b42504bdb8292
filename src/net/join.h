// Joining a running primary (docs/distributed.md, "Devices that join"): a worker started with
// `huddle worker --join PRIMARY:PORT` dials the primary's admission port (net/join_listener.h),
// authenticates with the cluster's key (the same handshake as every channel), and announces the
// address it takes sessions on. Once admitted it is an ordinary worker: the primary opens
// sessions and mesh links on it as on those of --workers (runtime/mesh.h), so the direction of
// every other connection stays as it is.
//
// On the wire (docs/protocol.md): OPEN of kind kJoin (rank, world and session id 0), then one
// JOIN message (wire::Join and the host), answered with the OPEN acknowledgement or a Close
// frame giving the reason.
#pragma once

#include "net/key.h"
#include "net/secure_channel.h"
#include "net/socket.h"

#include <cstdint>
#include <memory>
#include <string>

namespace huddle::net {

// What a joining worker announces: its session port and, when it listens on a specific address,
// that host ("" = the address the primary sees the join come from, for a worker that listens on
// every interface).
struct JoinAnnouncement {
  std::string host;
  std::uint16_t port = 0;
};

// The announcement of a worker whose session listener is bound to `listen` (port included): a
// wildcard host (0.0.0.0, ::, empty) is left for the primary to fill in.
JoinAnnouncement announcement_for(const Endpoint& listen);

// The worker's side: connects to `primary`, authenticates, sends OPEN(kJoin) and `announcement`
// and waits for the acknowledgement; returns the channel (the caller closes it). TransportError
// naming the primary and the cause ("bad key", "peer closed: ...", timeouts). Wrap it in
// dial_with_retry (net/session.h) when the primary may not be up yet.
std::unique_ptr<SecureChannel> request_join(const Endpoint& primary, const PresharedKey& key,
                                            const ChannelOptions& options,
                                            const JoinAnnouncement& announcement);

// The primary's side, after the handshake: reads the OPEN (it must be kJoin) and the JOIN,
// checking every field, and returns the endpoint to open sessions on: the announced host, or
// `peer_host` (where the connection came from) when none was announced. A malformed request is
// refused: the channel is closed with the reason and TransportError names the peer. Does not
// answer: ack_open() (net/session.h) admits.
Endpoint read_join(SecureChannel& channel, const std::string& peer_host);

}  // namespace huddle::net
