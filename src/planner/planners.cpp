#include "planner/planners.h"

#include "core/error.h"
#include "planner/auto_planner.h"
#include "planner/constants.h"
#include "planner/galaxy_planner.h"
#include "planner/hepti_planner.h"
#include "planner/pipeline_planners.h"
#include "planner/strategies.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>
#include <map>
#include <optional>

namespace huddle {
namespace {

// local, megatron, sp: make_plan with equal shares over every device.
PlanResult baseline(const std::string& strategy, const PlanRequest& r) {
  const char* mode = strategy == "local" ? "single device"
                     : strategy == "sp"  ? "sequence"
                                         : "tensor";
  PlanResult result =
      evaluate_plan(make_plan(strategy, r.cost.config(), device_names(r.cluster), {}), mode, r);
  check_memory(result.prediction, r.cluster, strategy);
  return result;
}

// A pipeline schedule as a result: its plan, predicted like any plan, checked for memory.
PlanResult pipeline_result(const PipelineSchedule& schedule, const PlanRequest& r) {
  std::string mode = schedule.sliced ? "pipeline, sliced" : "pipeline";
  PlanResult result =
      evaluate_plan(plan_of_schedule(schedule, r.cost.config(), r.cluster), std::move(mode), r);
  if (!schedule.note.empty()) result.notes.push_back(schedule.note);
  check_memory(result.prediction, r.cluster, schedule.strategy);
  return result;
}

PlanResult plan_hpipe_result(const PlanRequest& r) {
  return pipeline_result(
      plan_hpipe(r.cost, r.cluster, r.seq_len, pipeline_table_tokens(r.cost.config())), r);
}

PlanResult plan_gpipe_result(const PlanRequest& r) {
  return pipeline_result(
      plan_gpipe(r.cost, r.cluster, r.seq_len, pipeline_table_tokens(r.cost.config())), r);
}

PlanResult plan_uniform_slices_result(const PlanRequest& r) {
  return pipeline_result(
      plan_uniform_slices(r.cost, r.cluster, r.seq_len, pipeline_table_tokens(r.cost.config())), r);
}

const std::map<std::string, std::function<PlanResult(const PlanRequest&)>>& registry() {
  static const std::map<std::string, std::function<PlanResult(const PlanRequest&)>> planners = {
      {"local", [](const PlanRequest& r) { return baseline("local", r); }},
      {"megatron", [](const PlanRequest& r) { return baseline("megatron", r); }},
      {"sp", [](const PlanRequest& r) { return baseline("sp", r); }},
      {"galaxy", plan_galaxy},
      {"hepti", plan_hepti},
      {"hpipe", plan_hpipe_result},
      {"gpipe", plan_gpipe_result},
      {"uniform-slices", plan_uniform_slices_result},
      {"auto", plan_auto},
  };
  return planners;
}

}  // namespace

const Plan& PlanResult::runnable() const {
  if (!plan) {
    throw PlanError(fmt::format("the {} planner chose {} mode, which this runtime cannot run yet",
                                strategy, mode));
  }
  return *plan;
}

const std::vector<std::string>& planner_names() {
  static const std::vector<std::string> names = {
      "auto", "galaxy", "hepti", "hpipe", "uniform-slices", "gpipe", "megatron", "sp", "local"};
  return names;
}

PlanResult run_planner(const std::string& name, const PlanRequest& request) {
  const auto it = registry().find(name);
  if (it == registry().end()) {
    throw UsageError(fmt::format("unknown planner '{}' (choose from {})", name,
                                 fmt::join(planner_names(), ", ")));
  }
  if (request.seq_len < 1)
    throw UsageError(fmt::format("--seq-len must be >= 1, got {}", request.seq_len));
  if (request.seq_len > request.cost.config().max_positions) {
    throw UsageError(fmt::format("--seq-len {} exceeds the model's {} positions", request.seq_len,
                                 request.cost.config().max_positions));
  }
  if (!request.mode.empty() && name != "hepti") {
    throw UsageError(fmt::format("a mode ('{}') applies to the hepti planner only, not '{}'",
                                 request.mode, name));
  }
  if (request.deadline_s && !(*request.deadline_s > 0)) {
    throw UsageError(fmt::format("--deadline-ms must be > 0, got {}", *request.deadline_s * 1e3));
  }
  PlanResult result = it->second(request);
  if (result.plan && result.plan->wire != request.cost.wire()) {
    // Planners plan with the cost model's wire format; the plan carries it to the runtime.
    result.plan->wire = request.cost.wire();
    result.document = result.plan->to_json();
  }
  return result;
}

namespace {

// A layer-split plan of several devices for a model with an LM head runs the head whole on
// device 0 or split by vocabulary (Plan::vocab): the split where the cost model predicts a
// prefill and one decode step faster with it and every device still fits its memory. The split
// saves the head's compute (one GEMV over the vocabulary: the largest matrix of a small model,
// a third of a decode step on gpt2) and device 0's copy of an untied head; it costs the logits
// row's transfer to device 0 and every other device's rows of the head's weights.
// Returns the chosen plan's prediction (nullopt where the choice does not arise).
std::optional<Prediction> choose_head_split(Plan& plan, const PlanRequest& r) {
  const std::int64_t vocab = r.cost.config().vocab_size;
  if (plan.num_devices() < 2 || plan.layers.empty() || plan.tiled_2d() ||
      r.cost.footprint().head_outputs != vocab || vocab < plan.num_devices()) {
    return std::nullopt;
  }
  const auto score = [&](const Prediction& p) {
    return p.first_over_budget(r.cluster) >= 0 ? kInf : p.latency_s + p.decode_s;
  };
  plan.vocab.clear();
  Prediction whole = r.cost.predict(plan, r.cluster, r.seq_len);
  plan.vocab = vocab_split(plan, vocab);
  Prediction split = r.cost.predict(plan, r.cluster, r.seq_len);
  if (score(split) < score(whole)) return split;
  plan.vocab.clear();
  return whole;
}

}  // namespace

PlanResult evaluate_plan(Plan plan, std::string mode, const PlanRequest& request) {
  std::optional<Prediction> prediction = choose_head_split(plan, request);
  PlanResult result;
  result.strategy = plan.strategy;
  result.mode = std::move(mode);
  result.prediction = prediction ? std::move(*prediction)
                                 : request.cost.predict(plan, request.cluster, request.seq_len);
  result.document = plan.to_json();
  result.plan = std::move(plan);
  return result;
}

PlanResult evaluate_with_best_gather_chunks(Plan plan, std::string mode,
                                            const PlanRequest& request) {
  if (plan.num_devices() == 1 || plan.tiled_2d() || plan.pipelined() || plan.row_split() ||
      plan.op_assigned()) {
    return evaluate_plan(std::move(plan), std::move(mode), request);
  }
  // More chunks must be predicted faster by this much: within it (rounding, a few messages) the
  // fewer messages win.
  constexpr double kChunksGain = 1e-3;
  int best = 1;
  double best_s = kInf;
  for (const int chunks : {1, 2, 4, 8, 16}) {
    plan.gather_chunks = chunks;
    const double s = request.cost.predict(plan, request.cluster, request.seq_len).latency_s;
    if (s < best_s * (1 - kChunksGain)) {
      best_s = s;
      best = chunks;
    }
  }
  plan.gather_chunks = best;
  return evaluate_plan(std::move(plan), std::move(mode), request);
}

std::vector<std::string> device_names(const ClusterSpec& cluster) {
  std::vector<std::string> names;
  for (const DeviceSpec& d : cluster.devices()) names.push_back(d.name);
  return names;
}

void check_memory(const Prediction& prediction, const ClusterSpec& cluster,
                  const std::string& planner) {
  std::string missing;
  for (const DevicePrediction& d : prediction.devices) {
    const std::int64_t budget = cluster.device(cluster.index_of(d.name)).memory_bytes;
    if (d.memory.total() > budget) {
      missing +=
          fmt::format("{}'{}' needs {} bytes, has {} ({} missing)", missing.empty() ? "" : "; ",
                      d.name, d.memory.total(), budget, d.memory.total() - budget);
    }
  }
  if (!missing.empty())
    throw PlanError(fmt::format("{}: the model does not fit: {}", planner, missing));
}

}  // namespace huddle
