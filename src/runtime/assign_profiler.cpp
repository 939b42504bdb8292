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
  // Per node: the times of its op in runs where no input crossed providers (its cost), and
  // where exactly one DA class did (that time minus the cost is the crossing's cost).
  const auto& edges = dcg.problem().edges;
  std::vector<std::vector<double>> plain(dcg.nodes().size()), all(dcg.nodes().size());
  std::vector<std::vector<std::pair<std::size_t, double>>> crossed(
      static_cast<std::size_t>(dcg.num_da()));  // (node, time) per DA class
  std::vector<bool> da_seen(static_cast<std::size_t>(dcg.num_da()), false);
  std::vector<double> wall, run_wall;  // a run's repeats; each run's median
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
      for (const auto& [op, t] : times) {
        const int to = run[static_cast<std::size_t>(op)];
        const auto node = static_cast<std::size_t>(dcg.node(op, to));
        std::vector<int> in;
        for (int e : dcg.in_edges(op)) {
          const int da = dcg.da_of(
              e, run[static_cast<std::size_t>(edges[static_cast<std::size_t>(e)].from)], to);
          if (da >= 0) in.push_back(da);
        }
        all[node].push_back(t);
        if (in.empty()) plain[node].push_back(t);
        if (in.size() == 1) crossed[static_cast<std::size_t>(in[0])].emplace_back(node, t);
      }
    }
    for (int da : da_edges_of(dcg, run)) da_seen[static_cast<std::size_t>(da)] = true;
    run_wall.push_back(median(wall));
  }
  Costs costs;
  for (std::size_t n = 0; n < dcg.nodes().size(); ++n) {
    const DcgNode& node = dcg.nodes()[n];
    if (node.op < 0) {
      costs.node.push_back(0.0);
      continue;
    }
    if (all[n].empty()) {
      throw PlanError(fmt::format("profiling: op '{}' on provider {} was never run",
                                  dcg.problem().op_names[static_cast<std::size_t>(node.op)],
                                  providers[static_cast<std::size_t>(node.provider)].spec));
    }
    costs.node.push_back(median(plain[n].empty() ? all[n] : plain[n]));
  }
  for (int da = 0; da < dcg.num_da(); ++da) {
    if (!da_seen[static_cast<std::size_t>(da)]) {
      throw PlanError(fmt::format("profiling: DA edge {} was never crossed", da));
    }
    // Nothing moves between cpu1 and cpuN; what a crossing costs is switching the kernels'
    // threading (waking or idling the pool, BLAS's thread count), seen in the consumer's time.
    std::vector<double> extra;
    for (const auto& [node, t] : crossed[static_cast<std::size_t>(da)]) {
      if (!plain[node].empty()) extra.push_back(std::max(0.0, t - costs.node[node]));
    }
    costs.da.push_back(extra.empty() ? 0.0 : median(extra));
  }
  // The executor's own time (allocation, freeing, dispatch) is the same whatever the assignment:
  // the median gap between a run's wall time and the sum of its ops' costs.
  std::vector<double> gaps;
  for (std::size_t r = 0; r < runs.size(); ++r) {
    gaps.push_back(run_wall[r] - assignment_cost(dcg, costs, runs[r]));
  }
  costs.overhead = std::max(0.0, median(gaps));
  if (measured) {
    for (std::size_t r = 0; r < runs.size(); ++r) {
      measured->push_back({runs[r], run_wall[r], assignment_cost(dcg, costs, runs[r])});
    }
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
