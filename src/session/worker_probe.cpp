#include "session/worker_probe.h"

#include "core/error.h"
#include "net/secure_channel.h"

#include <thread>

namespace huddle {

std::vector<std::string> unreachable_workers(const std::vector<std::string>& workers,
                                             const net::PresharedKey& key, net::Duration timeout) {
  std::vector<char> alive(workers.size(), 0);
  std::vector<std::thread> probes;
  probes.reserve(workers.size());
  for (std::size_t w = 0; w < workers.size(); ++w) {
    probes.emplace_back([&, w] {
      try {
        net::ChannelOptions options;
        options.handshake_timeout = timeout;
        options.io_timeout = timeout;
        net::SecureChannel::connect(net::parse_endpoint(workers[w]), key, options);
        alive[w] = 1;
      } catch (const Error&) {
        // Refused, timed out, or not our worker any more: gone.
      }
    });
  }
  for (std::thread& t : probes) t.join();
  std::vector<std::string> dead;
  for (std::size_t w = 0; w < workers.size(); ++w) {
    if (!alive[w]) dead.push_back(workers[w]);
  }
  return dead;
}

}  // namespace huddle
