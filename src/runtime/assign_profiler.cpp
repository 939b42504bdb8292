#include "runtime/assign_profiler.h"

#include "core/error.h"
#include "plan/lowering.h"
#include "runtime/executor.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>

namespace huddle::assign {
namespace {

double median(std::vector<double> v) {
  HUDDLE_CHECK(!v.empty());
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

}  // namespace

Costs profile_runs(const Model& model, const Dcg& dcg, const std::vector<Provider>& providers,
                   const std::vector<Assignment>& runs, std::span<const std::int32_t> ids,
                   int repeats, std::vector<MeasuredRun>* measured) {
  for (const Provider& p : providers) {
    if (p.kind == ProviderKind::Remote) {
      throw PlanError(
          fmt::format("profiling the remote provider '{}' is not supported yet (the "
                      "worker does not report per-op times); profile cpu1 and cpuN, "
                      "or write the assignment by hand",
                      p.spec));
    }
  }
  HUDDLE_CHECK(repeats >= 1);
  const Graph& graph = model.graph();
  std::map<std::string, int> op_index;
  for (std::size_t i = 0; i < graph.ops().size(); ++i) {
    op_index[graph.ops()[i].name] = static_cast<int>(i);
  }
  std::vector<std::vector<double>> samples(dcg.nodes().size());
  std::vector<bool> da_seen(static_cast<std::size_t>(dcg.num_da()), false);
  std::vector<double> wall;
  for (const Assignment& run : runs) {
    const Plan plan = assignment_plan(model.config(), graph, providers, run);
    const Program program = lower(graph, model.config(), plan, 0);
    Executor executor(program.graph, model.weights(), model.config().max_positions);
    std::vector<std::pair<int, double>> times;  // (op, seconds) of the current forward
    executor.set_observer([&](const Op& op, const Tensor&, std::chrono::nanoseconds elapsed) {
      const auto it = op_index.find(op.name);
      if (it != op_index.end()) times.emplace_back(it->second, elapsed.count() * 1e-9);
    });
    wall.clear();
    for (int r = -1; r < repeats; ++r) {  // r = -1: warm-up
      times.clear();
      executor.reset();
      const auto start = std::chrono::steady_clock::now();
      (void)executor.forward(ids, /*all_rows=*/false);
      const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
      if (r < 0) continue;
      wall.push_back(took.count());
      for (const auto& [op, s] : times) {
        samples[static_cast<std::size_t>(dcg.node(op, run[static_cast<std::size_t>(op)]))]
            .push_back(s);
      }
    }
    for (int da : da_edges_of(dcg, run)) da_seen[static_cast<std::size_t>(da)] = true;
    if (measured) measured->push_back({run, median(wall), 0.0});
  }
  Costs costs;
  for (std::size_t n = 0; n < dcg.nodes().size(); ++n) {
    const DcgNode& node = dcg.nodes()[n];
    if (node.op < 0) {
      costs.node.push_back(0.0);
      continue;
    }
    if (samples[n].empty()) {
      throw PlanError(fmt::format("profiling: op '{}' on provider {} was never run",
                                  dcg.problem().op_names[static_cast<std::size_t>(node.op)],
                                  providers[static_cast<std::size_t>(node.provider)].spec));
    }
    costs.node.push_back(median(samples[n]));
  }
  for (int da = 0; da < dcg.num_da(); ++da) {
    if (!da_seen[static_cast<std::size_t>(da)]) {
      throw PlanError(fmt::format("profiling: DA edge {} was never crossed", da));
    }
    costs.da.push_back(0.0);  // device 0 providers share memory: nothing moves (see the header)
  }
  if (measured) {
    for (MeasuredRun& m : *measured) m.predicted_s = assignment_cost(dcg, costs, m.assignment);
  }
  return costs;
}

AssignOutcome plan_assignment(const Model& model, const std::vector<Provider>& providers,
                              std::int64_t prompt_len, int repeats) {
  if (providers.empty()) throw InputError("the provider list is empty");
  if (prompt_len < 1 || prompt_len > model.config().max_positions) {
    throw InputError(
        fmt::format("--prompt-len {} is outside 1..{}", prompt_len, model.config().max_positions));
  }
  const Dcg dcg(make_problem(model.graph(), providers, prompt_len));
  const ProfilingRuns runs = profiling_paths(dcg);
  std::vector<std::int32_t> ids;
  for (std::int64_t i = 0; i < prompt_len; ++i) {
    ids.push_back(static_cast<std::int32_t>(1 + i % (model.config().vocab_size - 1)));
  }
  AssignOutcome out;
  out.dcg_nodes = dcg.nodes().size();
  out.dcg_edges = dcg.edges().size();
  out.da_edges = static_cast<std::size_t>(dcg.num_da());
  out.node_runs = runs.node_runs.size();
  out.edge_runs = runs.edge_runs.size();
  const Costs costs = profile_runs(model, dcg, providers, runs.all(), ids, repeats, &out.profiled);
  out.optimal = optimal_assignment(dcg, costs, &out.exact);
  for (Baseline& b : baselines(dcg, providers)) {
    const double predicted = assignment_cost(dcg, costs, b.assignment);
    out.baselines.emplace_back(std::move(b), predicted);
  }
  out.plan = assignment_plan(model.config(), model.graph(), providers, out.optimal.assignment);
  return out;
}

}  // namespace huddle::assign
