#include "collectives/group_transport.h"

#include "core/error.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>

namespace huddle::collectives {

GroupTransport::GroupTransport(net::Transport& base, std::vector<int> ranks)
    : base_(base), ranks_(std::move(ranks)) {
  std::set<int> seen;
  for (std::size_t g = 0; g < ranks_.size(); ++g) {
    const int r = ranks_[g];
    if (r < 0 || r >= base_.size() || !seen.insert(r).second) {
      throw PlanError(
          fmt::format("device group [{}]: rank {} is not a distinct rank of a "
                      "session of {}",
                      fmt::join(ranks_, ", "), r, base_.size()));
    }
    if (r == base_.rank()) rank_ = static_cast<int>(g);
  }
  if (rank_ < 0) {
    throw PlanError(fmt::format("device group [{}] does not include this device (rank {})",
                                fmt::join(ranks_, ", "), base_.rank()));
  }
}

int GroupTransport::global(int peer) const {
  HUDDLE_CHECK(peer >= 0 && peer < size(), "group rank {} of a group of {}", peer, size());
  return ranks_[static_cast<std::size_t>(peer)];
}

std::string GroupTransport::peer_name(int peer) const {
  return base_.peer_name(global(peer));
}

void GroupTransport::send(int peer, std::uint32_t tag, std::span<const std::byte> payload) {
  base_.send(global(peer), tag, payload);
}

net::Message GroupTransport::recv(int peer) {
  return base_.recv(global(peer));
}

void GroupTransport::recv_into(int peer, std::uint32_t tag, std::span<std::byte> out) {
  base_.recv_into(global(peer), tag, out);
}

}  // namespace huddle::collectives
