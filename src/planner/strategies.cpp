#include "planner/strategies.h"

#include "core/error.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace huddle {

const std::vector<std::string>& strategy_names() {
  static const std::vector<std::string> names = {"local", "megatron", "sp", "galaxy"};
  return names;
}

std::vector<Range> split_at_least_one(std::int64_t total, const std::vector<double>& shares,
                                      const std::string& what) {
  const auto n = static_cast<std::int64_t>(shares.size());
  if (total < n) {
    throw PlanError(
        fmt::format("cannot split {} {} over {} devices with at least one each", total, what, n));
  }
  std::vector<std::int64_t> counts = split_proportional(total, shares);
  // Devices rounded down to 0 take one unit from the device with the most.
  for (std::int64_t& c : counts) {
    if (c > 0) continue;
    auto most = std::max_element(counts.begin(), counts.end());
    --*most;
    c = 1;
  }
  return ranges_from_counts(counts);
}

Plan make_plan(const std::string& strategy, const ModelConfig& config,
               const std::vector<std::string>& devices, std::vector<double> shares) {
  const auto& names = strategy_names();
  if (std::find(names.begin(), names.end(), strategy) == names.end()) {
    throw UsageError(
        fmt::format("unknown strategy '{}' (choose from {})", strategy, fmt::join(names, ", ")));
  }
  if (devices.empty()) throw UsageError("a plan needs at least one device");
  if (shares.empty()) shares.assign(devices.size(), 1.0);
  if (shares.size() != devices.size()) {
    throw UsageError(
        fmt::format("--shares has {} entries for {} devices", shares.size(), devices.size()));
  }
  for (double s : shares) {
    if (!(s > 0)) throw UsageError(fmt::format("--shares entries must be positive, got {}", s));
  }
  Plan plan;
  plan.strategy = strategy;
  plan.model = PlanModel::of(config);
  plan.devices = strategy == "local" ? std::vector<std::string>{devices.front()} : devices;
  plan.token_shares = strategy == "local" ? std::vector<double>{1.0} : shares;
  const std::vector<double>& s = plan.token_shares;
  for (std::int64_t l = 0; l < config.layers; ++l) {
    LayerPlan layer;
    if (strategy == "sp") {
      layer.attention = BlockSplit::Tokens;
      layer.mlp = BlockSplit::Tokens;
      layer.residual = ResidualLayout::Tokens;
    } else {
      layer.attention = BlockSplit::Heads;
      layer.heads = split_at_least_one(config.heads, s, "attention heads");
      layer.mlp = BlockSplit::Columns;
      layer.columns = split_at_least_one(config.ffn, s, "MLP columns");
      layer.residual = strategy == "galaxy" ? ResidualLayout::Tokens : ResidualLayout::Replicated;
    }
    plan.layers.push_back(std::move(layer));
  }
  return plan;
}

}  // namespace huddle
