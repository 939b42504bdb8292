#include "planner/galaxy_planner.h"

#include "core/error.h"
#include "planner/constants.h"
#include "planner/strategies.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <set>

namespace huddle {
namespace {

std::vector<std::int64_t> counts_of(const std::vector<Range>& ranges) {
  std::vector<std::int64_t> counts;
  for (const auto& [b, e] : ranges) counts.push_back(e - b);
  return counts;
}

std::vector<double> speeds(const ClusterSpec& cluster, BlockType block) {
  std::vector<double> s;
  for (const DeviceSpec& d : cluster.devices()) s.push_back(d.speed(block));
  return s;
}

class Rebalancer {
 public:
  Rebalancer(const PlanRequest& r, GalaxySplit& split)
      : r_(r), c_(r.cost.config()), split_(split) {}

  std::vector<std::int64_t> memory() const {
    const Plan plan = galaxy_plan(c_, r_.cluster, split_);
    std::vector<std::int64_t> m;
    for (int d = 0; d < plan.num_devices(); ++d) {
      m.push_back(device_memory(r_.cost.footprint(), c_, plan, d, r_.seq_len).total());
    }
    return m;
  }

  std::int64_t budget(int d) const { return r_.cluster.device(d).memory_bytes; }

  // Bytes one more unit of `block` costs a device (an upper bound: a whole kv head per query
  // head, the widest activation row; a unit of a block-quantised weight rounded up to bytes).
  std::int64_t unit_bytes(BlockType block) const {
    const auto per_unit = [](std::int64_t total, std::int64_t units) {
      return (total + units - 1) / units;
    };
    std::int64_t bytes = 0;
    for (const LayerFootprint& l : r_.cost.footprint().layers) {
      if (block == BlockType::Mlp) {
        bytes += per_unit(l.columns_bytes, c_.ffn);
      } else {
        bytes += per_unit(l.heads_bytes, c_.heads) + per_unit(l.kv_heads_bytes, c_.kv_heads) +
                 (l.kv_cache ? 2 * c_.max_positions * c_.head_dim * kF32Bytes : 0);
      }
    }
    const std::int64_t act_cols = block == BlockType::Mlp ? 2 : 3 * c_.head_dim;
    return bytes + r_.seq_len * act_cols * kF32Bytes;
  }

  // MemoryAwareBalancing(T, C, V, L) for block `block` over the candidate devices `list`.
  void balance(BlockType block, std::set<int> list) {
    std::vector<std::int64_t>& counts = block == BlockType::Mlp ? split_.columns : split_.heads;
    const std::int64_t unit = unit_bytes(block);
    while (true) {
      const std::vector<std::int64_t> mem = memory();
      std::vector<int> oom, free;
      for (int d : list) {
        const auto i = static_cast<std::size_t>(d);
        if (mem[i] > budget(d)) oom.push_back(d);
        if (mem[i] + unit <= budget(d)) free.push_back(d);
      }
      if (oom.empty() || free.empty()) return;
      std::vector<std::int64_t> room(counts.size(), 0);
      for (int f : free)
        room[static_cast<std::size_t>(f)] = (budget(f) - mem[static_cast<std::size_t>(f)]) / unit;
      bool moved = false;
      for (int o : oom) {
        const auto oi = static_cast<std::size_t>(o);
        const std::int64_t over = mem[oi] - budget(o);
        std::int64_t shift = std::min((over + unit - 1) / unit, counts[oi] - 1);
        // Proportional to speed among the free devices, capped by each one's room.
        std::vector<double> v;
        for (int f : free) v.push_back(r_.cluster.device(f).speed(block));
        const std::vector<std::int64_t> want = split_proportional(shift, v);
        for (std::size_t k = 0; k < free.size(); ++k) {
          const auto fi = static_cast<std::size_t>(free[k]);
          const std::int64_t give = std::min(want[k], room[fi]);
          counts[fi] += give;
          counts[oi] -= give;
          room[fi] -= give;
          shift -= give;
          moved = moved || give > 0;
        }
        // What proportion could not place: most spare memory first.
        std::vector<int> by_room = free;
        std::stable_sort(by_room.begin(), by_room.end(), [&](int a, int b) {
          return room[static_cast<std::size_t>(a)] > room[static_cast<std::size_t>(b)];
        });
        for (int f : by_room) {
          const auto fi = static_cast<std::size_t>(f);
          const std::int64_t give = std::min(shift, room[fi]);
          counts[fi] += give;
          counts[oi] -= give;
          room[fi] -= give;
          shift -= give;
          moved = moved || give > 0;
        }
        list.erase(o);
      }
      if (!moved) return;
    }
  }

 private:
  const PlanRequest& r_;
  const ModelConfig& c_;
  GalaxySplit& split_;
};

}  // namespace

GalaxySplit galaxy_balanced_split(const ModelConfig& config, const ClusterSpec& cluster) {
  GalaxySplit s;
  s.heads = counts_of(
      split_at_least_one(config.heads, speeds(cluster, BlockType::Attention), "attention heads"));
  s.columns =
      counts_of(split_at_least_one(config.ffn, speeds(cluster, BlockType::Mlp), "MLP columns"));
  s.token_shares = speeds(cluster, BlockType::Connection);
  return s;
}

Plan galaxy_plan(const ModelConfig& config, const ClusterSpec& cluster, const GalaxySplit& split) {
  Plan plan;
  plan.strategy = "galaxy";
  plan.model = PlanModel::of(config);
  plan.devices = device_names(cluster);
  plan.token_shares = split.token_shares;
  for (std::int64_t l = 0; l < config.layers; ++l) {
    LayerPlan layer;
    layer.attention = BlockSplit::Heads;
    layer.heads = ranges_from_counts(split.heads);
    layer.mlp = BlockSplit::Columns;
    layer.columns = ranges_from_counts(split.columns);
    layer.residual = cluster.size() > 1 ? ResidualLayout::Tokens : ResidualLayout::Replicated;
    plan.layers.push_back(std::move(layer));
  }
  return plan;
}

PlanResult plan_galaxy(const PlanRequest& request) {
  const ModelConfig& c = request.cost.config();
  GalaxySplit split = galaxy_balanced_split(c, request.cluster);
  Rebalancer rebalancer(request, split);
  std::set<int> all;
  for (int d = 0; d < request.cluster.size(); ++d) all.insert(d);
  rebalancer.balance(BlockType::Mlp, all);
  rebalancer.balance(BlockType::Attention, all);
  PlanResult result = evaluate_with_best_gather_chunks(galaxy_plan(c, request.cluster, split),
                                                       "tensor+sequence", request);
  check_memory(result.prediction, request.cluster, "galaxy");
  return result;
}

}  // namespace huddle
