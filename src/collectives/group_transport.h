// GroupTransport: a subset of a session's ranks seen as a session of its own, so that the ring
// collectives (ring.h) and point-to-point transfers run inside a device group (a grid row or
// column of a 2D-tiled plan) unchanged.
//
// Group rank g is global rank ranks[g] of the base transport; this process must be one of them.
// Messages travel on the base transport's links between the two global ranks, so they keep its
// FIFO, tag, timeout and error guarantees; errors name the peer as the base does. Groups that
// share no pair of ranks (a grid row and a grid column share one device, hence no link) may run
// collectives at the same time; otherwise callers keep their collectives in one order.
// close() closes the base transport (the whole session).
#pragma once

#include "net/transport.h"

#include <vector>

namespace huddle::collectives {

class GroupTransport final : public net::Transport {
 public:
  // `ranks`: distinct global ranks in group order, including base.rank(). PlanError otherwise
  // (groups come from plans).
  GroupTransport(net::Transport& base, std::vector<int> ranks);

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(ranks_.size()); }
  std::string peer_name(int peer) const override;
  void send(int peer, std::uint32_t tag, std::span<const std::byte> payload) override;
  net::Message recv(int peer) override;
  void recv_into(int peer, std::uint32_t tag, std::span<std::byte> out) override;
  net::Duration timeout() const override { return base_.timeout(); }
  void set_timeout(net::Duration timeout) override { base_.set_timeout(timeout); }
  void close() override { base_.close(); }

  // The global rank of group rank `peer`.
  int global(int peer) const;
  const std::vector<int>& ranks() const { return ranks_; }

 private:
  net::Transport& base_;
  std::vector<int> ranks_;
  int rank_ = -1;
};

}  // namespace huddle::collectives
