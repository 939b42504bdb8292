// HPipe's fast islands (papers/hpipe-pipeline-sequence-slicing: several accelerators of a host
// on PCIe, hosts on a slower network): a pipeline stage may be a group of devices that run its
// units tensor-parallel (plan/pipeline.h, group stages), pipelined with the other stages.
//
// The planner treats such a group as one virtual device (a StageGroup) with its own costs, and
// runs the same DP (hpipe_dp.h) over the devices and groups of a "view" of the cluster, in which
// some islands are collapsed into groups and every other device stands alone:
//   compute   attention / MLP unit: the slowest member on its share of the heads / FFN columns
//             (CostModel::unit_seconds with `share`; norms and residuals whole on every member)
//             plus one ring all-reduce of the [tokens, hidden] float32 partial sums over the
//             group's links (ring_all_reduce_s); the embedding: the slowest member (every member
//             embeds); the head: the leader alone;
//   transfer  between stages, leader to leader, plus the receiving leader's sends of the
//             activation to each other member of its group;
//   memory    a member holds about its share (the larger of its heads' and columns' fractions)
//             of the stage's weights and KV cache, so a group takes a range when
//             bytes <= min over members of memory_bytes / fraction (the norms and the embedding
//             every member holds whole are not counted: an estimate for the DP; plan_hpipe then
//             checks each member of a finished plan exactly, footprint.h pipeline_device_memory).
// Islands are found from the links: sets of two or more devices whose every internal link has at
// least `ratio` times the bandwidth of every link from a member to a device outside.
#pragma once

#include "planner/cluster.h"
#include "planner/cost_model.h"

#include <cstdint>
#include <vector>

namespace huddle {

// One stage's devices (cluster indices): one device, or a tensor-parallel group.
struct StageGroup {
  std::vector<int> members;    // group order (collectives run in it); one entry: a device
  std::vector<double> shares;  // relative speeds, per member
  int leader = 0;              // the member that receives, sends on and runs the head
  bool single() const { return members.size() == 1; }
  static StageGroup device(int d) { return {{d}, {1.0}, d}; }
  // A group over `members` with shares = their gflops, the leader PipelineStage::leader_of.
  static StageGroup island(const ClusterSpec& cluster, std::vector<int> members);
};

// Seconds to send `bytes` from device `from` to `to` (cluster indices): 0 on one device,
// infinite when the cluster has no such link (the pair then cannot be adjacent in a pipeline).
double link_send_s(const ClusterSpec& cluster, int from, int to, double bytes);

// The islands of `cluster` (each ascending, two or more devices, fewer than all), for every
// bandwidth level at which the links at least that fast join devices into such a set; nested
// islands are all listed.
std::vector<std::vector<int>> find_islands(const ClusterSpec& cluster, double ratio = 4.0);

// Views of the cluster: the plain one (every device alone) first, then one per non-empty set of
// pairwise disjoint islands (at most `max_views` in all), each island collapsed into a group.
std::vector<std::vector<StageGroup>> island_views(const ClusterSpec& cluster,
                                                  const std::vector<std::vector<int>>& islands,
                                                  int max_views = 16);

// Per member: the fraction of the attention heads and of the FFN columns it computes (the
// lowering's split_at_least_one by shares); {1, 1} for a single device.
struct MemberShare {
  double heads = 1, columns = 1;
};
std::vector<MemberShare> member_shares(const ModelConfig& config, const StageGroup& group);

// Seconds `group` takes for pipeline unit `unit` in a step of `tokens` tokens with `context`
// keys (see above); a single device: CostModel::unit_seconds. `logits`: the head unit includes
// the LM head over one row.
double group_unit_seconds(const CostModel& cost, const ClusterSpec& cluster,
                          const StageGroup& group, int unit, std::int64_t tokens,
                          std::int64_t context, bool logits = true);

// Seconds to send `bytes` between stages: leader to leader, then to the other members of `to`.
// Infinite when the cluster has no such link.
double group_transfer_s(const ClusterSpec& cluster, const StageGroup& from, const StageGroup& to,
                        double bytes);

// The memory budget of `group` for a range of units (see above).
std::int64_t group_budget(const ModelConfig& config, const ClusterSpec& cluster,
                          const StageGroup& group);

}  // namespace huddle
