#include "session/plan_choice.h"

#include "core/error.h"
#include "planner/cost_model.h"
#include "planner/planners.h"
#include "planner/strategies.h"
#include "runtime/assign_profiler.h"
#include "runtime/profile_session.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>

namespace huddle {
namespace {

// Measures the workers (and this device) at the model's shapes: what `huddle profile` does.
ClusterSpec profile_workers(const PlanChoice& choice, const Model& model,
                            std::int64_t prompt_tokens, const std::vector<std::string>& workers,
                            const net::PresharedKey& key) {
  ProfileOptions options;
  options.workers = workers;
  options.key = key;
  options.timeout = net::Duration(static_cast<std::int64_t>(choice.timeout_s * 1000));
  options.link = choice.link;
  options.shapes = profile::ProbeShapes::of(model.config(), model.graph(), prompt_tokens);
  options.compute_budget_s = 0.5;
  const ClusterProfile profiled = profile_cluster(options);
  std::fprintf(stderr, "huddle: profiled %d devices in %.1f s\n", profiled.cluster.size(),
               profiled.details.at("seconds").get<double>());
  return profiled.cluster;
}

Planned choose_unchecked(const PlanChoice& choice, const Model& model, std::int64_t prompt_tokens,
                         const std::vector<std::string>& workers, const net::PresharedKey* key) {
  Planned out;
  out.all_workers = workers;
  std::vector<std::string> devices = {"primary"};
  devices.insert(devices.end(), workers.begin(), workers.end());
  if (!choice.cluster_file.empty()) {
    out.cluster = ClusterSpec::load(choice.cluster_file);
    if (out.cluster->size() != static_cast<int>(devices.size())) {
      throw UsageError(
          fmt::format("{} lists {} devices; give its {} workers (in its order) after this primary",
                      choice.cluster_file, out.cluster->size(), out.cluster->size() - 1));
    }
    devices = device_names(*out.cluster);
  } else if (!workers.empty() && choice.shares.empty() && choice.plan_file.empty() &&
             is_adaptive_planner(choice.strategy)) {
    out.cluster = profile_workers(choice, model, prompt_tokens, workers, *key);
    devices = device_names(*out.cluster);
  }
  if (!choice.plan_file.empty()) {
    out.plan = Plan::load(choice.plan_file);
    if (choice.wire && *choice.wire != out.plan.wire) {
      throw UsageError(fmt::format("--wire {}: the plan {} says \"wire\": \"{}\"",
                                   wire_format_name(*choice.wire), choice.plan_file,
                                   wire_format_name(out.plan.wire)));
    }
    if (choice.gather_chunks && *choice.gather_chunks != out.plan.gather_chunks) {
      throw UsageError(fmt::format("--gather-chunks {}: the plan {} says \"gather_chunks\": {}",
                                   *choice.gather_chunks, choice.plan_file,
                                   out.plan.gather_chunks));
    }
    return out;
  }
  const WireFormat wire = choice.wire.value_or(WireFormat::F32);
  if (choice.strategy == "assign") {  // operator assignment: profile the providers, then the DP
    if (choice.providers.empty()) throw UsageError("--strategy assign needs --providers");
    if (wire != WireFormat::F32)
      throw UsageError("--wire: operator assignments move tensors as f32 only");
    const assign::AssignOutcome r = assign::plan_assignment(
        model, assign::parse_providers(choice.providers), prompt_tokens, 3, key);
    std::fprintf(stderr, "huddle: assign: %zu profiling runs, predicted %.3f ms\n",
                 r.node_runs + r.edge_runs, r.optimal.cost * 1e3);
    out.plan = r.plan;
    return out;
  }
  if (!choice.providers.empty()) throw UsageError("--providers goes with --strategy assign");
  const auto& fixed = strategy_names();
  if ((!out.cluster || !choice.shares.empty()) && is_adaptive_planner(choice.strategy) &&
      std::find(fixed.begin(), fixed.end(), choice.strategy) == fixed.end()) {
    throw UsageError(fmt::format(
        "--strategy {} plans from the devices' speeds: give --cluster, or workers without "
        "--shares (they are profiled first)",
        choice.strategy));
  }
  if (!out.cluster || !choice.shares.empty()) {
    out.shares = choice.shares;
    out.plan = make_plan(
        choice.strategy.empty() ? (workers.empty() ? "local" : "galaxy") : choice.strategy,
        model.config(), devices, choice.shares);
    out.plan.wire = wire;
    out.plan.gather_chunks = choice.gather_chunks.value_or(1);
    return out;
  }
  const CostModel cost(model.config(), model.graph(), wire);
  out.planner = choice.strategy.empty() ? "auto" : choice.strategy;
  const PlanResult result =
      run_planner(out.planner, PlanRequest{cost, *out.cluster, prompt_tokens, std::nullopt});
  out.plan = result.runnable();
  if (choice.gather_chunks) out.plan.gather_chunks = *choice.gather_chunks;
  std::fprintf(stderr, "huddle: planner %s chose %s (%s) on %d of %d devices, predicted %.1f ms\n",
               result.strategy.c_str(), out.plan.strategy.c_str(), result.mode.c_str(),
               out.plan.num_devices(), out.cluster->size(), result.prediction.latency_s * 1e3);
  return out;
}

}  // namespace

bool is_adaptive_planner(const std::string& name) {
  return name == "galaxy" || name == "hepti" || name == "hpipe" || name == "uniform-slices" ||
         name == "auto";
}

bool plan_in_cluster(const Plan& plan, const ClusterSpec& cluster) {
  const std::vector<std::string> names = device_names(cluster);
  return std::all_of(plan.devices.begin(), plan.devices.end(), [&](const std::string& d) {
    return std::find(names.begin(), names.end(), d) != names.end();
  });
}

std::vector<std::string> workers_for(const Plan& plan, const ClusterSpec& cluster,
                                     const std::vector<std::string>& all_workers) {
  const std::vector<std::string> names = device_names(cluster);
  std::vector<std::string> used;
  for (std::size_t d = 1; d < plan.devices.size(); ++d) {
    const auto at = std::find(names.begin(), names.end(), plan.devices[d]);
    if (at == names.end() || at == names.begin()) {
      throw PlanError(
          fmt::format("plan device '{}' is not a worker of the cluster", plan.devices[d]));
    }
    used.push_back(all_workers.at(static_cast<std::size_t>(at - names.begin()) - 1));
  }
  return used;
}

Planned choose_plan(const PlanChoice& choice, const Model& model, std::int64_t prompt_tokens,
                    const std::vector<std::string>& workers, const net::PresharedKey* key) {
  Planned planned = choose_unchecked(choice, model, prompt_tokens, workers, key);
  planned.gather_chunks = choice.gather_chunks;
  Plan& plan = planned.plan;
  const std::string source = choice.plan_file.empty() ? "plan" : choice.plan_file;
  // Column cuts of block-quantised weights fall between blocks (a saved plan that cuts a block
  // is refused when its weights are resolved, naming the tensor).
  if (choice.plan_file.empty()) plan = plan.aligned_to_blocks(model.weight_block(), model.config());
  plan.validate(model.config(), source);
  if (plan.op_assigned()) plan.assignment->validate(model.graph(), source);
  return planned;
}

}  // namespace huddle
