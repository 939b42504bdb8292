#include "planner/strategies.h"

#include "core/error.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace huddle {

const std::vector<std::string>& strategy_names() {
  static const std::vector<std::string> names = {"local",  "megatron", "sp",
                                                 "galaxy", "pipeline", "gpipe"};
  return names;
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
  if (strategy == "pipeline" || strategy == "gpipe") {
    const int units = pipeline::unit_count(config.layers);
    if (strategy == "gpipe") shares.assign(devices.size(), 1.0);
    std::vector<int> order;
    for (std::size_t d = 0; d < devices.size(); ++d) order.push_back(static_cast<int>(d));
    const auto n = static_cast<std::int64_t>(devices.size());
    return pipeline_plan(
        strategy, config, devices, order, split_at_least_one(units, shares, "pipeline units"),
        strategy == "pipeline" && config.causal ? equal_slice_table(config.max_positions, n)
                                                : std::vector<std::vector<std::int64_t>>{});
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
  if (plan.num_devices() > 1 && config.causal) plan.vocab = vocab_split(plan, config.vocab_size);
  return plan;
}

std::vector<Range> vocab_split(const Plan& plan, std::int64_t vocab) {
  const LayerPlan& last = plan.layers.back();
  std::vector<double> shares = plan.token_shares;
  if (last.mlp == BlockSplit::Columns) {
    shares.clear();
    for (const auto& [b, e] : last.columns) shares.push_back(static_cast<double>(e - b));
  }
  return split_at_least_one(vocab, shares, "vocabulary rows");
}

std::vector<std::vector<std::int64_t>> equal_slice_table(std::int64_t max_tokens,
                                                         std::int64_t count) {
  std::vector<std::vector<std::int64_t>> table;
  for (std::int64_t n = 1; n <= std::min(max_tokens, kMaxSliceTable); ++n)
    table.push_back(equal_slices(n, count));
  return table;
}

Plan pipeline_plan(std::string strategy, const ModelConfig& config,
                   std::vector<std::string> devices, const std::vector<int>& stage_devices,
                   const std::vector<Range>& stage_units,
                   std::vector<std::vector<std::int64_t>> slices) {
  HUDDLE_CHECK(stage_devices.size() == stage_units.size());
  std::vector<PipelineStage> stages;
  for (std::size_t s = 0; s < stage_devices.size(); ++s)
    stages.push_back(PipelineStage::of({stage_devices[s]}, stage_units[s]));
  return pipeline_plan(std::move(strategy), config, std::move(devices), std::move(stages),
                       std::move(slices));
}

Plan pipeline_plan(std::string strategy, const ModelConfig& config,
                   std::vector<std::string> devices, std::vector<PipelineStage> stages,
                   std::vector<std::vector<std::int64_t>> slices) {
  Plan plan;
  plan.strategy = std::move(strategy);
  plan.model = PlanModel::of(config);
  plan.token_shares.assign(devices.size(), 1.0);
  plan.devices = std::move(devices);
  Pipeline pipeline;
  pipeline.stages = std::move(stages);
  pipeline.sliced = !slices.empty();
  pipeline.slices = std::move(slices);
  plan.pipeline = std::move(pipeline);
  return plan;
}

}  // namespace huddle
