#include "planner/auto_planner.h"

#include "core/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace huddle {

PlanResult plan_auto(const PlanRequest& request) {
  const ClusterSpec& cluster = request.cluster;
  // The other devices, fastest first.
  std::vector<int> others(static_cast<std::size_t>(cluster.size() - 1));
  std::iota(others.begin(), others.end(), 1);
  std::stable_sort(others.begin(), others.end(), [&](int a, int b) {
    return cluster.device(a).gflops > cluster.device(b).gflops;
  });

  std::optional<PlanResult> best;
  std::vector<std::string> notes;
  const auto consider = [&](const std::string& strategy, const std::vector<int>& subset) {
    const ClusterSpec sub = cluster.subset(subset);
    const PlanRequest r{request.cost, sub, request.seq_len, request.deadline_s};
    const std::string label =
        fmt::format("{} on {} device{}", strategy, subset.size(), subset.size() == 1 ? "" : "s");
    try {
      PlanResult result = run_planner(strategy, r);
      if (!result.plan) {
        notes.push_back(fmt::format("{}: {} cannot run on this runtime", label, result.mode));
        return;
      }
      const double ms = result.prediction.latency_s * 1e3;
      if (request.deadline_s && result.prediction.latency_s > *request.deadline_s) {
        notes.push_back(fmt::format("{}: {:.3f} ms misses the deadline", label, ms));
        return;
      }
      notes.push_back(fmt::format("{}: {:.3f} ms", label, ms));
      if (!best || result.prediction.latency_s < best->prediction.latency_s)
        best = std::move(result);
    } catch (const PlanError& e) {
      notes.push_back(fmt::format("{}: {}", label, e.what()));
    }
  };
  consider("local", {0});
  std::vector<int> subset = {0};
  for (int o : others) {
    subset.push_back(o);
    for (const char* s : {"megatron", "sp", "galaxy", "hepti"}) consider(s, subset);
  }
  // HPipe chooses its devices (and their order) itself: once, over the whole cluster.
  if (cluster.size() > 1) consider("hpipe", subset);
  if (!best) {
    std::string why;
    for (const std::string& n : notes) why += "\n  " + n;
    throw PlanError(fmt::format("auto: no candidate plan fits the cluster:{}", why));
  }
  PlanResult result = std::move(*best);
  result.mode = fmt::format("{} ({}, {} device{})", result.strategy, result.mode,
                            result.plan->num_devices(), result.plan->num_devices() == 1 ? "" : "s");
  result.strategy = "auto";
  result.notes.insert(result.notes.end(), notes.begin(), notes.end());
  return result;
}

}  // namespace huddle
