#include "runtime/assign_profiler.h"

#include "core/error.h"
#include "core/statistics.h"
#include "plan/lowering.h"
#include "runtime/cluster.h"
#include "runtime/executor.h"
#include "runtime/transfer_estimate.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

namespace huddle::assign {
namespace {

constexpr int kMaxDevicePairs = 1 << 12;  // link index of devices (a < b): a * this + b

// The same across the plan's workers (a session with tracing), each forward a prefill of `ids`.
std::vector<Forward> run_cluster(const Model& model, const Plan& plan,
                                 const std::vector<Provider>& providers,
                                 std::span<const std::int32_t> ids, int repeats,
                                 const net::PresharedKey& key) {
  Cluster cluster(model, plan, profiling_cluster_options(providers, key));
  return time_cluster_runs(cluster, repeats, [&](Cluster& c) {
    c.runner().reset();
    (void)c.runner().forward(ids, /*all_rows=*/false);
  });
}

}  // namespace

bool uses_remote(const std::vector<Provider>& providers, const Assignment& run) {
  return std::any_of(run.begin(), run.end(), [&](int p) { return providers[at(p)].device != 0; });
}

void require_key_for_remotes(const std::vector<Provider>& providers,
                             const std::vector<Assignment>& runs, const net::PresharedKey* key) {
  if (key) return;
  for (const Assignment& run : runs) {
    if (uses_remote(providers, run))
      throw PlanError("profiling a remote provider needs the cluster key (--key-file)");
  }
}

ClusterOptions profiling_cluster_options(const std::vector<Provider>& providers,
                                         const net::PresharedKey& key) {
  ClusterOptions options;
  options.workers = remote_addresses(providers);
  options.key = key;
  options.trace = true;
  return options;
}

std::vector<Forward> time_cluster_runs(Cluster& cluster, int repeats,
                                       const std::function<void(Cluster&)>& run_once) {
  std::vector<Forward> out(static_cast<std::size_t>(repeats));
  for (int r = -1; r < repeats; ++r) {  // r = -1: warm-up
    const auto start = std::chrono::steady_clock::now();
    run_once(cluster);
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    if (r >= 0) out[at(r)].wall_s = took.count();
  }
  const std::vector<std::vector<Span>> spans = cluster.finish();
  for (Forward& f : out) f.devices.resize(spans.size());
  for (std::size_t d = 0; d < spans.size(); ++d) {
    std::map<std::string, int> seen;  // the k-th span of a name is forward k (0: warm-up)
    for (const Span& s : spans[d]) {
      const int k = seen[s.name]++;
      if (k >= 1 && k <= repeats) {
        out[at(k - 1)].devices[d].push_back(
            {s.name, s.duration_us * 1e-6, s.cpu_us < 0 ? -1.0 : s.cpu_us * 1e-6});
      }
    }
  }
  return out;
}

std::vector<Forward> time_local_runs(const Graph& program, const WeightMap& weights,
                                     std::int64_t max_positions, int repeats,
                                     const std::function<void(Executor&)>& run_once) {
  Executor executor(program, weights, max_positions);
  std::vector<OpTimes> ops;
  executor.set_observer(
      [&](const Op& op, const Tensor&, const OpTime& time) {
        ops.push_back(
            {op.name, std::chrono::duration<double>(time.wall).count(),
             time.cpu.count() < 0 ? -1.0 : std::chrono::duration<double>(time.cpu).count()});
      },
      /*measure_cpu=*/true);
  std::vector<Forward> out;
  for (int r = -1; r < repeats; ++r) {  // r = -1: warm-up
    ops.clear();
    const auto start = std::chrono::steady_clock::now();
    run_once(executor);
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    if (r >= 0) out.push_back({{ops}, took.count()});
  }
  return out;
}

std::vector<double> charged_seconds(std::span<const OpSample> samples, std::size_t providers) {
  std::vector<double> wall(providers, 0.0), cpu(providers, 0.0);
  for (const OpSample& s : samples) {
    HUDDLE_CHECK(s.provider >= 0 && at(s.provider) < providers);
    if (s.cpu_s < 0) continue;
    wall[at(s.provider)] += s.wall_s;
    cpu[at(s.provider)] += s.cpu_s;
  }
  std::vector<double> out;
  out.reserve(samples.size());
  for (const OpSample& s : samples) {
    const std::size_t p = at(s.provider);
    out.push_back(s.cpu_s < 0 || cpu[p] <= 0 ? s.wall_s : s.cpu_s * wall[p] / cpu[p]);
  }
  return out;
}

std::vector<std::vector<Forward>> time_runs_in_passes(
    std::size_t runs, int repeats,
    const std::function<std::vector<Forward>(std::size_t)>& time_one) {
  HUDDLE_CHECK(repeats >= 1);
  std::vector<std::vector<Forward>> forwards(runs);
  for (int pass = 0; pass < repeats; ++pass) {
    for (std::size_t r = 0; r < runs; ++r) {
      std::vector<Forward> f = time_one(r);
      HUDDLE_CHECK(f.size() == 1, "a pass timed {} forwards of run {}", f.size(), r);
      forwards[r].push_back(std::move(f.front()));
    }
  }
  return forwards;
}

Costs profile_runs(const Model& model, const Dcg& dcg, const std::vector<Provider>& providers,
                   const std::vector<Assignment>& runs, std::span<const std::int32_t> ids,
                   int repeats, std::vector<MeasuredRun>* measured, const net::PresharedKey* key) {
  HUDDLE_CHECK(repeats >= 1);
  require_key_for_remotes(providers, runs, key);
  const auto forwards = time_runs_in_passes(runs.size(), repeats, [&](std::size_t r) {
    const Plan plan = assignment_plan(model.config(), model.graph(), providers, runs[r]);
    if (uses_remote(providers, runs[r])) return run_cluster(model, plan, providers, ids, 1, *key);
    const Program program = lower(model.graph(), model.config(), plan, 0);
    return time_local_runs(program.graph, model.weights(), model.config().max_positions, 1,
                           [&](Executor& executor) {
                             executor.reset();
                             (void)executor.forward(ids, /*all_rows=*/false);
                           });
  });
  return costs_from_forwards(model.graph(), dcg, providers, runs, forwards, measured);
}

Costs costs_from_forwards(const Graph& graph, const Dcg& dcg,
                          const std::vector<Provider>& providers,
                          const std::vector<Assignment>& runs,
                          const std::vector<std::vector<Forward>>& forwards,
                          std::vector<MeasuredRun>* measured) {
  HUDDLE_CHECK(forwards.size() == runs.size());
  const auto& edges = dcg.problem().edges;
  std::map<std::string, int> op_index, producer;  // op name -> op; value name -> producing op
  for (std::size_t i = 0; i < graph.ops().size(); ++i) {
    op_index[graph.ops()[i].name] = static_cast<int>(i);
    producer[graph.value(graph.ops()[i].output).name] = static_cast<int>(i);
  }
  const auto value_of = [&](int op) -> const std::string& {
    return graph.value(graph.ops()[at(op)].output).name;
  };
  auto device_of = [&](const Assignment& run, int op) { return providers[at(run[at(op)])].device; };
  // Per node: its op's times where no input crossed providers (its cost), and where exactly one
  // DA class did; per DA class between devices: the transfer estimates of its receives.
  std::vector<std::vector<double>> plain(dcg.nodes().size()), all(dcg.nodes().size());
  std::vector<std::vector<std::pair<std::size_t, double>>> crossed(at(dcg.num_da()));
  std::vector<TransferSample> transfers;
  std::vector<bool> da_seen(at(dcg.num_da()), false);
  // Every compute op sample, in the order the loop below visits them, charged by CPU time.
  std::vector<OpSample> samples;
  for (std::size_t r = 0; r < runs.size(); ++r) {
    for (const Forward& f : forwards[r]) {
      for (const auto& device : f.devices) {
        for (const OpTimes& o : device) {
          const auto it = op_index.find(o.name);
          if (it != op_index.end()) samples.push_back({runs[r][at(it->second)], o.wall_s, o.cpu_s});
        }
      }
    }
  }
  const std::vector<double> charged = charged_seconds(samples, providers.size());
  std::size_t next_sample = 0;
  std::vector<double> run_wall;  // each run's median
  for (std::size_t r = 0; r < runs.size(); ++r) {
    const Assignment& run = runs[r];
    std::vector<double> wall;
    for (const Forward& f : forwards[r]) {
      wall.push_back(f.wall_s);
      std::vector<double> op_time(graph.ops().size(), 0.0);
      for (const auto& device : f.devices) {
        for (const OpTimes& o : device) {
          const auto it = op_index.find(o.name);
          if (it == op_index.end()) continue;
          const int op = it->second;
          const double t = charged[next_sample++];
          op_time[at(op)] = t;
          const int to = run[at(op)];
          const auto node = static_cast<std::size_t>(dcg.node(op, to));
          std::vector<int> in;
          for (int e : dcg.in_edges(op)) {
            const int da = dcg.da_of(e, run[at(edges[at(e)].from)], to);
            if (da >= 0) in.push_back(da);
          }
          all[node].push_back(t);
          if (in.empty()) plain[node].push_back(t);
          if (in.size() == 1) crossed[at(in[0])].emplace_back(node, t);
        }
      }
      // A receive on device R of a value op p made elsewhere waits for the ops after R's last
      // own op up to p (all elsewhere), then for the transfer: its time less theirs, and less
      // the rest of R's earlier trip to them if the first of those ops read it
      // (runtime/transfer_estimate.h).
      for (std::size_t d = 0; d < f.devices.size(); ++d) {
        const int receiver = static_cast<int>(d);
        const std::vector<OpTimes>& spans = f.devices[d];
        for (std::size_t i = 0; i < spans.size(); ++i) {
          const OpTimes& o = spans[i];
          const std::string& name = o.name;
          if (!name.ends_with("@recv")) continue;
          const auto p = producer.find(name.substr(0, name.size() - 5));
          if (p == producer.end()) continue;
          int da = -1;
          for (std::size_t e = 0; e < edges.size() && da < 0; ++e) {
            if (edges[e].from != p->second) continue;
            if (edges[e].to == kEnd ? receiver == 0 : device_of(run, edges[e].to) == receiver) {
              const int src = run[at(p->second)];
              da = dcg.da_of(static_cast<int>(e), src,
                             edges[e].to == kEnd ? src : run[at(edges[e].to)]);
            }
          }
          if (da < 0) continue;
          double waited = 0;
          int first = p->second;  // the first op of the others after R's last own op
          for (int q = p->second; q >= 0 && device_of(run, q) != receiver; --q) {
            waited += op_time[at(q)];
            first = q;
          }
          TransferSample sample{da, o.wall_s - waited, -1, 0.0};
          for (int e : dcg.in_edges(first)) {
            const int from = edges[at(e)].from;
            if (device_of(run, from) != receiver) continue;
            // R sent `from`'s value to first's device: the span of that send up to this receive.
            const std::string send =
                fmt::format("{}@send{}", value_of(from), device_of(run, first));
            for (std::size_t k = i; k-- > 0;) {
              sample.lead_s += spans[k].wall_s;
              if (spans[k].name == send) {
                sample.reverse = dcg.da_of(e, run[at(from)], run[at(first)]);
                break;
              }
            }
            if (sample.reverse < 0) sample.lead_s = 0;
            break;
          }
          transfers.push_back(sample);
        }
      }
    }
    for (int da : da_edges_of(dcg, run)) da_seen[at(da)] = true;
    run_wall.push_back(median(wall));
  }
  std::vector<TripClass> trips;  // per DA class: the device pair it joins (its link), its bytes
  for (const DaKey& k : dcg.da_keys()) {
    const int a = providers[at(k.src)].device;
    const int b = k.dst == kEnd ? 0 : providers[at(k.dst)].device;
    trips.push_back({a == b ? -1 : std::min(a, b) * kMaxDevicePairs + std::max(a, b), k.bytes});
  }
  const std::vector<double> trip_costs = transfer_costs(transfers, trips);
  Costs costs;
  for (std::size_t n = 0; n < dcg.nodes().size(); ++n) {
    const DcgNode& node = dcg.nodes()[n];
    if (node.op < 0) {
      costs.node.push_back(0.0);
      continue;
    }
    if (all[n].empty()) {
      throw PlanError(fmt::format("profiling: op '{}' on provider {} was never run",
                                  dcg.problem().op_names[at(node.op)],
                                  providers[at(node.provider)].spec));
    }
    costs.node.push_back(median(plain[n].empty() ? all[n] : plain[n]));
  }
  for (int da = 0; da < dcg.num_da(); ++da) {
    if (!da_seen[at(da)])
      throw PlanError(fmt::format("profiling: DA edge {} was never crossed", da));
    const DaKey& k = dcg.da_keys()[at(da)];
    const bool same_device =
        k.dst != kEnd && providers[at(k.src)].device == providers[at(k.dst)].device;
    if (!same_device) {
      if (trip_costs[at(da)] < 0) {
        throw PlanError(
            fmt::format("profiling: no receive of DA edge {} ({} -> {}, {} bytes) was "
                        "timed",
                        da, providers[at(k.src)].spec,
                        k.dst == kEnd ? "the primary" : providers[at(k.dst)].spec, k.bytes));
      }
      costs.da.push_back(trip_costs[at(da)]);
      continue;
    }
    // Nothing moves between cpu1 and cpuN; a crossing switches the kernels' threading, which
    // the consumer pays.
    std::vector<double> extra;
    for (const auto& [node, t] : crossed[at(da)]) {
      if (!plain[node].empty()) extra.push_back(std::max(0.0, t - costs.node[node]));
    }
    costs.da.push_back(extra.empty() ? 0.0 : median(extra));
  }
  // The executor's own time (dispatch, allocation, freeing, the glue between ops) is paid per
  // op, on the op's device, at that device's speed, and using a remote at all costs a run the
  // session's messages, the worker's wake-up and the output's return: fitted to the runs' gaps
  // (fit_run_overheads), the per-op costs added to the node costs of that device's providers,
  // the fixed costs paid by plans that use the device; what the fit leaves is the constant
  // overhead.
  const std::size_t num_devices = remote_addresses(providers).size() + 1;
  const std::vector<std::vector<double>> ops_on =
      ops_per_device(runs, dcg.problem().provider_device, num_devices);
  std::vector<double> gaps;
  for (std::size_t r = 0; r < runs.size(); ++r) {
    gaps.push_back(run_wall[r] - assignment_cost(dcg, costs, runs[r]));
  }
  const RunOverheads fit = fit_run_overheads(ops_on, gaps);
  for (std::size_t n = 0; n < dcg.nodes().size(); ++n) {
    const DcgNode& node = dcg.nodes()[n];
    if (node.op >= 0) costs.node[n] += fit.per_op[at(providers[at(node.provider)].device)];
  }
  costs.device_fixed = fit.fixed;
  std::vector<double> residuals;
  for (std::size_t r = 0; r < runs.size(); ++r) {
    residuals.push_back(run_wall[r] - assignment_cost(dcg, costs, runs[r]));
  }
  costs.overhead = std::max(0.0, median(residuals));
  if (measured) {
    for (std::size_t r = 0; r < runs.size(); ++r) {
      measured->push_back({runs[r], run_wall[r], assignment_cost(dcg, costs, runs[r]), {}});
    }
  }
  return costs;
}

AssignOutcome assign_with(const Graph& graph, const PlanModel& model,
                          const std::vector<Provider>& providers, std::int64_t tokens,
                          const ProfileFn& profile) {
  const Dcg dcg(make_problem(graph, providers, tokens));
  const ProfilingRuns runs = profiling_paths(dcg);
  AssignOutcome out;
  out.dcg_nodes = dcg.nodes().size();
  out.dcg_edges = dcg.edges().size();
  out.da_edges = static_cast<std::size_t>(dcg.num_da());
  out.node_runs = runs.node_runs.size();
  out.edge_runs = runs.edge_runs.size();
  const std::vector<Assignment> all_runs = runs.all();
  const Costs costs = profile(dcg, all_runs, &out.profiled);
  out.fixed_identified = fixed_cost_identifiable(
      ops_per_device(all_runs, dcg.problem().provider_device, at(dcg.problem().num_devices())));
  out.costs = costs;
  out.da_keys = dcg.da_keys();
  for (MeasuredRun& m : out.profiled) m.predicted = cost_breakdown(dcg, costs, m.assignment);
  out.optimal = optimal_assignment(dcg, costs, &out.exact);
  for (Baseline& b : baselines(dcg, providers)) {
    const double predicted = assignment_cost(dcg, costs, b.assignment);
    out.baselines.emplace_back(std::move(b), predicted);
  }
  out.plan = trimmed_assignment_plan(model, graph, providers, out.optimal.assignment);
  return out;
}

AssignOutcome plan_assignment(const Model& model, const std::vector<Provider>& providers,
                              std::int64_t prompt_len, int repeats, const net::PresharedKey* key) {
  if (providers.empty()) throw InputError("the provider list is empty");
  if (prompt_len < 1 || prompt_len > model.config().max_positions) {
    throw InputError(
        fmt::format("--prompt-len {} is outside 1..{}", prompt_len, model.config().max_positions));
  }
  std::vector<std::int32_t> ids;
  for (std::int64_t i = 0; i < prompt_len; ++i) {
    ids.push_back(static_cast<std::int32_t>(1 + i % (model.config().vocab_size - 1)));
  }
  return assign_with(
      model.graph(), PlanModel::of(model.config()), providers, prompt_len,
      [&](const Dcg& dcg, const std::vector<Assignment>& runs, std::vector<MeasuredRun>* measured) {
        return profile_runs(model, dcg, providers, runs, ids, repeats, measured, key);
      });
}

}  // namespace huddle::assign
