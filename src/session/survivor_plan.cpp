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
  const CostModel cost(model.config(), model.graph(), before.plan.wire);
  if (after.cluster && !before.planner.empty()) {
    return run_planner(before.planner, PlanRequest{cost, *after.cluster, prompt_tokens, {}})
        .runnable();
  }
  // A primary that ran alone ("local") grows into the default family, as choose_plan() starts.
  if (is_fixed_strategy(before.plan.strategy) && before.plan.strategy != "local" &&
      !before.plan.op_assigned()) {
    Plan plan = make_plan(before.plan.strategy, model.config(), devices, after.shares);
    plan.gather_chunks = before.plan.gather_chunks;  // a fixed strategy keeps the user's chunks
    return plan;
  }
  if (after.cluster) {
    return run_planner("auto", PlanRequest{cost, *after.cluster, prompt_tokens, {}}).runnable();
  }
  return make_plan("galaxy", model.config(), devices, after.shares);
}

// The plan of `after` (its workers, cluster and shares set), made like `before`'s, block-aligned
// and validated; with a cluster it must fit every device's memory (`devices` names them in the
// error). PlanError prefixed with `context`.
Plan replan_checked(const Planned& before, const Planned& after, const Model& model,
                    std::int64_t prompt_tokens, const std::string& context,
                    const std::string& devices) {
  try {
    Plan plan = replan(before, after, model, prompt_tokens)
                    .aligned_to_blocks(model.weight_block(), model.config());
    plan.wire = before.plan.wire;  // the user's choices of wire and chunks outlive the devices
    if (before.gather_chunks) plan.gather_chunks = *before.gather_chunks;
    plan.validate(model.config(), "plan");
    if (after.cluster) {
      const CostModel cost(model.config(), model.graph(), plan.wire);
      check_memory(cost.predict(plan, *after.cluster, prompt_tokens), *after.cluster, devices);
    }
    return plan;
  } catch (const PlanError& e) {
    throw PlanError(fmt::format("{}: {}", context, e.what()));
  }
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
  after.gather_chunks = planned.gather_chunks;
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
  after.plan = replan_checked(planned, after, model, prompt_tokens,
                              fmt::format("cannot go on without {}", fmt::join(lost, ", ")),
                              "the devices left");
  if (after.plan.num_devices() == 1) after.planner.clear();
  return after;
}

Planned plan_with(const Planned& planned, const JoinedDevice& joined, const Model& model,
                  std::int64_t prompt_tokens) {
  Planned after;
  after.planner = planned.planner;
  after.gather_chunks = planned.gather_chunks;
  after.all_workers = planned.all_workers;
  after.all_workers.push_back(joined.address);
  // The joiner's speed relative to the primary's, both measured at the same time.
  const double relative =
      joined.primary.gflops > 0 ? joined.measured.gflops / joined.primary.gflops : 1.0;
  if (planned.cluster) {
    DeviceSpec device = joined.measured;
    device.name = joined.address;
    const std::vector<std::string> names = device_names(*planned.cluster);
    while (std::find(names.begin(), names.end(), device.name) != names.end())
      device.name += " (joined)";
    // In the cluster's own units: scaled by its primary's speed over the primary's measured one.
    if (joined.primary.gflops > 0 && planned.cluster->device(0).gflops > 0)
      device.scale_speed(planned.cluster->device(0).gflops / joined.primary.gflops);
    after.cluster = planned.cluster->with_device(std::move(device), joined.link);
  }
  if (!planned.shares.empty()) {
    after.shares = planned.shares;
    after.shares.push_back(planned.shares.front() * relative);
  }
  after.plan = replan_checked(planned, after, model, prompt_tokens,
                              fmt::format("cannot admit {}", joined.address), "the devices");
  return after;
}

}  // namespace huddle
