#include "planner/hpipe_islands.h"

#include "core/error.h"
#include "plan/pipeline.h"
#include "plan/pipeline_units.h"
#include "plan/split.h"
#include "planner/constants.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <set>

namespace huddle {
namespace {

// The slower direction's bandwidth between two devices; 0 without a link.
double bandwidth(const ClusterSpec& cluster, int a, int b) {
  try {
    return std::min(cluster.link(a, b).bandwidth_bps, cluster.link(b, a).bandwidth_bps);
  } catch (const PlanError&) {
    return 0;
  }
}

// Components of the devices joined by links of at least `level` bits per second.
std::vector<std::vector<int>> components(const std::vector<std::vector<double>>& bw, double level) {
  const auto n = static_cast<int>(bw.size());
  std::vector<int> root(static_cast<std::size_t>(n));
  std::iota(root.begin(), root.end(), 0);
  const auto find = [&](int x) {
    while (root[static_cast<std::size_t>(x)] != x) x = root[static_cast<std::size_t>(x)];
    return x;
  };
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      if (bw[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)] >= level)
        root[static_cast<std::size_t>(find(b))] = find(a);
    }
  }
  std::vector<std::vector<int>> out(static_cast<std::size_t>(n));
  for (int d = 0; d < n; ++d) out[static_cast<std::size_t>(find(d))].push_back(d);
  std::erase_if(out, [](const std::vector<int>& c) { return c.empty(); });
  return out;
}

}  // namespace

double link_send_s(const ClusterSpec& cluster, int from, int to, double bytes) {
  if (from == to) return 0;
  try {
    return cluster.link(from, to).transfer_s(bytes);
  } catch (const PlanError&) {
    return kInf;
  }
}

StageGroup StageGroup::island(const ClusterSpec& cluster, std::vector<int> members) {
  StageGroup g;
  for (const int d : members) g.shares.push_back(cluster.device(d).gflops);
  g.leader = PipelineStage::leader_of(members);
  g.members = std::move(members);
  return g;
}

std::vector<std::vector<int>> find_islands(const ClusterSpec& cluster, double ratio) {
  const int n = cluster.size();
  std::vector<std::vector<double>> bw(static_cast<std::size_t>(n),
                                      std::vector<double>(static_cast<std::size_t>(n), 0.0));
  std::set<double> levels;
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      const double v = bandwidth(cluster, a, b);
      bw[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)] = v;
      bw[static_cast<std::size_t>(b)][static_cast<std::size_t>(a)] = v;
      if (v > 0) levels.insert(v);
    }
  }
  std::vector<std::vector<int>> islands;
  for (const double level : levels) {
    for (const std::vector<int>& c : components(bw, level)) {
      if (c.size() < 2 || static_cast<int>(c.size()) == n) continue;
      double inner = kInf, outer = 0;
      for (const int a : c) {
        for (int b = 0; b < n; ++b) {
          if (a == b) continue;
          const double v = bw[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)];
          if (std::find(c.begin(), c.end(), b) != c.end()) {
            inner = std::min(inner, v);
          } else {
            outer = std::max(outer, v);
          }
        }
      }
      if (inner > 0 && inner >= ratio * outer &&
          std::find(islands.begin(), islands.end(), c) == islands.end()) {
        islands.push_back(c);
      }
    }
  }
  return islands;
}

std::vector<std::vector<StageGroup>> island_views(const ClusterSpec& cluster,
                                                  const std::vector<std::vector<int>>& islands,
                                                  int max_views) {
  std::vector<std::vector<StageGroup>> views;
  const auto view_of = [&](const std::vector<std::size_t>& chosen) {
    std::vector<StageGroup> view;
    std::vector<bool> grouped(static_cast<std::size_t>(cluster.size()), false);
    for (const std::size_t i : chosen) {
      view.push_back(StageGroup::island(cluster, islands[i]));
      for (const int d : islands[i]) grouped[static_cast<std::size_t>(d)] = true;
    }
    for (int d = 0; d < cluster.size(); ++d) {
      if (!grouped[static_cast<std::size_t>(d)]) view.push_back(StageGroup::device(d));
    }
    return view;
  };
  views.push_back(view_of({}));
  // Sets of pairwise disjoint islands, by a depth-first walk over the islands in order.
  std::vector<std::size_t> chosen;
  const auto walk = [&](const auto& self, std::size_t from, std::vector<bool>& used) -> void {
    for (std::size_t i = from; i < islands.size(); ++i) {
      if (static_cast<int>(views.size()) >= max_views) return;
      const bool overlaps = std::any_of(islands[i].begin(), islands[i].end(),
                                        [&](int d) { return used[static_cast<std::size_t>(d)]; });
      if (overlaps) continue;
      for (const int d : islands[i]) used[static_cast<std::size_t>(d)] = true;
      chosen.push_back(i);
      views.push_back(view_of(chosen));
      self(self, i + 1, used);
      chosen.pop_back();
      for (const int d : islands[i]) used[static_cast<std::size_t>(d)] = false;
    }
  };
  std::vector<bool> used(static_cast<std::size_t>(cluster.size()), false);
  walk(walk, 0, used);
  return views;
}

std::vector<MemberShare> member_shares(const ModelConfig& config, const StageGroup& group) {
  if (group.single()) return {MemberShare{}};
  const std::vector<Range> heads =
      split_at_least_one(config.heads, group.shares, "attention heads");
  const std::vector<Range> columns = split_at_least_one(config.ffn, group.shares, "MLP columns");
  std::vector<MemberShare> out;
  for (std::size_t m = 0; m < group.members.size(); ++m) {
    out.push_back(
        {static_cast<double>(heads[m].second - heads[m].first) / static_cast<double>(config.heads),
         static_cast<double>(columns[m].second - columns[m].first) /
             static_cast<double>(config.ffn)});
  }
  return out;
}

double group_unit_seconds(const CostModel& cost, const ClusterSpec& cluster,
                          const StageGroup& group, int unit, std::int64_t tokens,
                          std::int64_t context, bool logits) {
  if (group.single()) {
    return cost.unit_seconds(unit, cluster.device(group.members.front()), tokens, context, logits);
  }
  const pipeline::UnitKind kind = pipeline::unit_kind(unit, cost.config().layers);
  if (kind == pipeline::UnitKind::Head)
    return cost.unit_seconds(unit, cluster.device(group.leader), tokens, context, logits);
  const std::vector<MemberShare> shares = member_shares(cost.config(), group);
  double slowest = 0;
  for (std::size_t m = 0; m < group.members.size(); ++m) {
    const double share = kind == pipeline::UnitKind::Attention ? shares[m].heads
                         : kind == pipeline::UnitKind::Mlp     ? shares[m].columns
                                                               : 1.0;
    slowest = std::max(slowest, cost.unit_seconds(unit, cluster.device(group.members[m]), tokens,
                                                  context, logits, share));
  }
  if (kind == pipeline::UnitKind::Embedding) return slowest;
  const double bytes = static_cast<double>(tokens) * static_cast<double>(cost.config().hidden) * 4;
  return slowest + ring_all_reduce_s(cluster, group.members, bytes);
}

double group_transfer_s(const ClusterSpec& cluster, const StageGroup& from, const StageGroup& to,
                        double bytes) {
  double s = link_send_s(cluster, from.leader, to.leader, bytes);
  for (const int m : to.members) {
    if (m != to.leader) s += link_send_s(cluster, to.leader, m, bytes);
  }
  return s;
}

std::int64_t group_budget(const ModelConfig& config, const ClusterSpec& cluster,
                          const StageGroup& group) {
  if (group.single()) return cluster.device(group.members.front()).memory_bytes;
  const std::vector<MemberShare> shares = member_shares(config, group);
  double budget = std::numeric_limits<double>::max();
  for (std::size_t m = 0; m < group.members.size(); ++m) {
    const double fraction = std::max(shares[m].heads, shares[m].columns);
    budget = std::min(
        budget, static_cast<double>(cluster.device(group.members[m]).memory_bytes) / fraction);
  }
  return static_cast<std::int64_t>(std::min(budget, 9e18));
}

}  // namespace huddle
