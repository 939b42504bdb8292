// Which workers of a failed session are gone. A step that fails names the link it failed on, and
// a worker whose peer died fails too, so the error alone cannot tell the dead from the survivors:
// each worker is asked again.
#pragma once

#include "net/key.h"
#include "net/transport.h"

#include <string>
#include <vector>

namespace huddle {

// The workers of `workers` ("host:port") that do not complete an authenticated handshake with
// `key` within `timeout` (connection refused: the process is gone; silence: the link is cut or
// the process hangs). A worker that completes it is alive, even while it still ends the failed
// session (the probe opens no session, so it never makes a worker busy). All are probed at once:
// the call takes at most about `timeout`.
std::vector<std::string> unreachable_workers(const std::vector<std::string>& workers,
                                             const net::PresharedKey& key, net::Duration timeout);

}  // namespace huddle
