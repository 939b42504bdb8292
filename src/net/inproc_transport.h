// In-process Transport for tests: the ranks of a session are threads of one process.
//
// Same contract as every Transport (FIFO per link, tag and size checks, timeouts, errors naming
// the peer), plus fault injection (kill a rank: its peers' calls fail as if its process died)
// and optional link emulation (latency and bandwidth per link, applied at the receiver, so a
// sender never blocks). Messages are copied once, into the link's queue.
#pragma once

#include "net/transport.h"

#include <memory>
#include <vector>

namespace huddle::net {

struct InprocOptions {
  Duration timeout{5000};
  LinkEmulation link;
  std::size_t max_message_bytes = std::size_t{4} << 30;
};

class InprocCluster {
 public:
  explicit InprocCluster(int size, InprocOptions options = {});
  InprocCluster(const InprocCluster&) = delete;
  InprocCluster& operator=(const InprocCluster&) = delete;
  ~InprocCluster();

  int size() const;
  // The Transport of rank r; valid as long as the cluster lives.
  Transport& rank(int r);
  // Fault injection: rank r "dies". Messages it already sent are still delivered; then its
  // peers' receives fail with "peer closed", and its own calls fail.
  void kill(int r);

  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace huddle::net
