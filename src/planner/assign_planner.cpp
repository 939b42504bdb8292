#include "planner/assign_planner.h"

#include "core/error.h"

#include <algorithm>
#include <numeric>

namespace huddle::assign {

Plan assignment_plan(const ModelConfig& config, const Graph& graph,
                     const std::vector<Provider>& providers, const Assignment& assignment) {
  return assignment_plan(PlanModel::of(config), graph, providers, assignment);
}

Plan assignment_plan(const PlanModel& model, const Graph& graph,
                     const std::vector<Provider>& providers, const Assignment& assignment) {
  HUDDLE_CHECK(assignment.size() == graph.ops().size(), "assignment of {} ops for {}",
               assignment.size(), graph.ops().size());
  Plan plan;
  plan.strategy = "assign";
  plan.model = model;
  plan.devices = {"primary"};
  for (const std::string& a : remote_addresses(providers)) plan.devices.push_back(a);
  plan.token_shares.assign(plan.devices.size(), 1.0);
  OpAssignment a;
  a.providers = provider_specs(providers);
  for (std::size_t i = 0; i < graph.ops().size(); ++i) a.ops[graph.ops()[i].name] = assignment[i];
  plan.assignment = std::move(a);
  return plan;
}

Plan trimmed_assignment_plan(const PlanModel& model, const Graph& graph,
                             const std::vector<Provider>& providers, const Assignment& assignment) {
  const auto on_remote = [&](int p) { return providers[static_cast<std::size_t>(p)].device != 0; };
  if (std::any_of(assignment.begin(), assignment.end(), on_remote))
    return assignment_plan(model, graph, providers, assignment);
  std::vector<Provider> local;
  std::vector<int> index(providers.size(), -1);  // old provider -> its index in `local`
  for (std::size_t p = 0; p < providers.size(); ++p) {
    if (providers[p].device != 0) continue;
    index[p] = static_cast<int>(local.size());
    local.push_back(providers[p]);
  }
  Assignment renumbered;
  for (int p : assignment) renumbered.push_back(index[static_cast<std::size_t>(p)]);
  return assignment_plan(model, graph, local, renumbered);
}

std::vector<Baseline> baselines(const Dcg& dcg, const std::vector<Provider>& providers) {
  std::vector<Baseline> out;
  const int n = static_cast<int>(providers.size());
  for (int p = 0; p < n; ++p) {
    out.push_back(
        {providers[static_cast<std::size_t>(p)].spec + " only", priority_assignment(dcg, {p})});
  }
  if (n < 2) return out;
  std::vector<int> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  do {
    std::string name;
    for (int p : order)
      name += (name.empty() ? "" : " > ") + providers[static_cast<std::size_t>(p)].spec;
    out.push_back({name, priority_assignment(dcg, order)});
  } while (std::next_permutation(order.begin(), order.end()));
  return out;
}

}  // namespace huddle::assign
