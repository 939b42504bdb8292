// Profiling session: `huddle profile` measures every device of a cluster and every link between
// them, and writes the planner's cluster file (rich form, docs/planner.md).
//
// Protocol (after net::open_session, as for an inference session, runtime/cluster_protocol.h):
//   1. primary -> worker  kProfileTag: JSON {"rank", "world", "session_id", "endpoints",
//      "timeout_ms", "shapes": profile::ProbeShapes, "budget_s"};
//   2. the mesh (runtime/mesh.h);
//   3. commands, primary -> worker on their mesh link, kProfileCommandTag, JSON {"op": ...}, each
//      answered by one kProfileReplyTag JSON:
//        "compute"                        -> {"memory_bytes", "compute": ComputeProfile}
//        "measure", "peer", "max_bytes"   -> measure the link to peer (profile/link_probe.h)
//                                            -> {"latency_s", "bandwidth_bps", "bulk_bytes"}
//        "echo", "peer", "max_bytes"      -> answer peer's measurement -> {}
//        "end"                            -> the session ends (no answer).
// Every device measures its compute at the same time, as they compute during inference (devices
// sharing a machine, --local-devices or the testbed, see each other's load as they will then);
// links are measured one pair at a time, every ordered pair (links may be asymmetric).
#pragma once

#include "net/key.h"
#include "net/tcp_transport.h"
#include "planner/cluster.h"
#include "profile/compute_probe.h"
#include "profile/link_probe.h"
#include "runtime/worker.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace huddle {

struct ProfileOptions {
  std::vector<std::string> workers;  // "host:port", devices 1..n-1
  // Device names, primary first; empty: "primary" and the worker addresses (the names
  // `huddle run --workers` gives plan devices).
  std::vector<std::string> names;
  net::PresharedKey key = net::PresharedKey::random();
  net::Duration timeout{10000};
  net::LinkEmulation link;  // the primary's emulated link (testbed)
  profile::ProbeShapes shapes;
  double compute_budget_s = 1.0;  // per device
  profile::LinkProbeOptions link_probe;
  std::function<void(const std::string&)> log;  // one line per device and link measured
};

struct ClusterProfile {
  ClusterSpec cluster;
  nlohmann::json details;  // per device and link: how it was measured

  // The cluster file: the rich form plus a "profile" object with the details.
  nlohmann::json to_json() const;
};

// Measures the cluster. TransportError naming a worker that cannot be reached or fails.
ClusterProfile profile_cluster(const ProfileOptions& options);

// The worker's side, given the session's first message (tag kProfileTag).
void serve_profile(net::SecureChannel& control, const net::Message& setup,
                   std::unique_ptr<net::TcpTransport>& transport, const net::OpenRequest& open,
                   net::LinkAcceptor& acceptor, const WorkerOptions& options);

}  // namespace huddle
