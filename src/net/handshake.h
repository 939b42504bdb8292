// The handshake that opens a SecureChannel: versioned HELLO, mutual PSK authentication, and
// per-direction session keys (the steps are listed in secure_channel.h, the bytes in
// docs/protocol.md).
#pragma once

#include "net/key.h"
#include "net/socket.h"
#include "net/wire.h"

#include <array>

namespace huddle::net {

struct SessionKeys {
  std::array<unsigned char, wire::kSessionKeyBytes> send{};
  std::array<unsigned char, wire::kSessionKeyBytes> recv{};

  SessionKeys() = default;
  SessionKeys(const SessionKeys&) = default;
  SessionKeys& operator=(const SessionKeys&) = default;
  ~SessionKeys();  // wipes the keys
};

// Runs the handshake as `role` on a connected socket within `timeout` in total. Throws
// TransportError naming socket.peer() and the cause ("bad key", "version 7 not supported (this
// is 1)", "not a huddle peer", timeouts). On refusal it tells the peer why when it can.
SessionKeys run_handshake(Socket& socket, const PresharedKey& key, wire::Role role,
                          Duration timeout);

}  // namespace huddle::net
