// The worker side of a distributed session: what `huddle worker` runs for each session the
// primary opens (protocol in runtime/cluster_protocol.h and runtime/session.h).
#pragma once

#include "net/key.h"
#include "net/server.h"
#include "net/transport.h"

#include <filesystem>
#include <functional>
#include <optional>
#include <string>

namespace huddle {

struct WorkerOptions {
  net::PresharedKey key = net::PresharedKey::random();
  net::ChannelOptions channel;
  // A local copy of the model: weights are mapped from it instead of received when every tensor
  // a session's program uses is the primary's (per-tensor digests); only those tensors are read.
  std::optional<std::filesystem::path> model_dir;
  std::function<void(const std::string&)> log;  // one line per session event
  net::LinkEmulation link;  // delay on every mesh message this worker sends (testbed)
};

// The handler to give net::Server. Each session: set up the mesh and the program, receive (or
// map) the weights, follow the primary's steps, free everything when the session ends.
net::Server::SessionHandler make_worker_handler(WorkerOptions options);

}  // namespace huddle
