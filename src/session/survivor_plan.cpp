#include "session/survivor_plan.h"

#include "core/error.h"
#include "planner/cost_model.h"
#include "planner/planners.h"
#include "planner/strategies.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace huddle {
namespace {

bool is_fixed_strategy(const std::string& name) {
  const auto& names = strategy_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

Plan replan(const Planned& before, const Planned& after, const Model& model,
            std::int64_t prompt_tokens) {
  std::vector<std::string> devices = {"primary"};
  devices.insert(devices.end(), after.all_workers.begin(), after.all_workers.end());
  if (after.cluster) devices = device_names(*after.cluster);
  if (devices.size() == 1) return make_plan("local", model.config(), devices, {});
  const CostModel cost(model.config(), model.graph());
  if (after.cluster && !before.planner.empty()) {
    return run_planner(before.planner, PlanRequest{cost, *after.cluster, prompt_tokens, {}})
        .runnable();
  }
  if (is_fixed_strategy(before.plan.strategy) && !before.plan.op_assigned())
    return make_plan(before.plan.strategy, model.config(), devices, after.shares);
  if (after.cluster) {
    return run_planner("auto", PlanRequest{cost, *after.cluster, prompt_tokens, {}}).runnable();
  }
  return make_plan("galaxy", model.config(), devices, after.shares);
}

}  // namespace

std::vector<std::string> plan_workers(const Planned& planned) {
  if (planned.cluster && plan_in_cluster(planned.plan, *planned.cluster))
    return workers_for(planned.plan, *planned.cluster, planned.all_workers);
  return planned.all_workers;
}

Planned plan_without(const Planned& planned, const std::vector<std::string>& lost,
                     const Model& model, std::int64_t prompt_tokens) {
  const auto is_lost = [&](const std::string& w) {
    return std::find(lost.begin(), lost.end(), w) != lost.end();
  };
  Planned after;
  after.planner = planned.planner;
  std::vector<int> kept = {0};  // device indices (cluster order: primary, then all_workers)
  for (std::size_t w = 0; w < planned.all_workers.size(); ++w) {
    if (is_lost(planned.all_workers[w])) continue;
    after.all_workers.push_back(planned.all_workers[w]);
    kept.push_back(static_cast<int>(w) + 1);
  }
  if (planned.cluster) after.cluster = planned.cluster->subset(kept);
  if (!planned.shares.empty()) {
    for (const int d : kept) after.shares.push_back(planned.shares.at(static_cast<std::size_t>(d)));
  }
  const std::string context = fmt::format("cannot go on without {}", fmt::join(lost, ", "));
  try {
    after.plan = replan(planned, after, model, prompt_tokens)
                     .aligned_to_blocks(model.weight_block(), model.config());
    after.plan.validate(model.config(), "plan");
    if (after.cluster) {
      const CostModel cost(model.config(), model.graph());
      check_memory(cost.predict(after.plan, *after.cluster, prompt_tokens), *after.cluster,
                   "the devices left");
    }
  } catch (const PlanError& e) {
    throw PlanError(fmt::format("{}: {}", context, e.what()));
  }
  if (after.plan.num_devices() == 1) after.planner.clear();
  return after;
}

}  // namespace huddle
