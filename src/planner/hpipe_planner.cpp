#include "planner/hpipe_planner.h"

#include "core/error.h"
#include "plan/pipeline.h"
#include "plan/pipeline_units.h"
#include "planner/constants.h"
#include "planner/hpipe_dp.h"
#include "planner/pipeline_planners.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <optional>

namespace huddle {
namespace {

double activation_bytes(const CostModel& cost, std::int64_t tokens) {
  return cost.activation_bytes(static_cast<double>(tokens), cost.config().hidden);
}

// The last stage's output to the primary: one row of logits, or the hidden states of every
// token for a model without a head.
double output_s(const CostModel& cost, const ClusterSpec& cluster, int last, std::int64_t tokens) {
  const double rows = cost.footprint().head_outputs > 0 ? 1.0 : static_cast<double>(tokens);
  const double width = cost.footprint().head_outputs > 0
                           ? static_cast<double>(cost.footprint().head_outputs)
                           : static_cast<double>(cost.config().hidden);
  return link_send_s(cluster, last, 0, rows * width * kF32Bytes);
}

double ids_s(const ClusterSpec& cluster, int first, std::int64_t tokens) {
  return link_send_s(cluster, 0, first, static_cast<double>(tokens) * 4);
}

std::vector<std::int64_t> unit_bytes(const CostModel& cost, std::int64_t max_tokens) {
  std::vector<std::int64_t> bytes = cost.unit_weight_bytes();
  const std::vector<std::int64_t> kv =
      pipeline_unit_kv_bytes(cost.footprint(), cost.config(), max_tokens);
  for (std::size_t u = 0; u < bytes.size(); ++u) bytes[u] += kv[u];
  return bytes;
}

// Per stage, the seconds of a slice [a, b) of the prompt: compute of its units (head excluded)
// plus the send of the activation to the next stage. Compute is linear in the context b, so it
// is tabulated per slice length T at context T and T + 1 and extrapolated exactly.
class StageTable {
 public:
  StageTable(const CostModel& cost, const ClusterSpec& cluster, const PipelineSchedule& s,
             std::int64_t max_tokens)
      : n_(static_cast<std::size_t>(s.stage_devices.size())) {
    std::vector<StageGroup> groups;
    for (std::size_t i = 0; i < n_; ++i) groups.push_back(s.group(i));
    const auto T = static_cast<std::size_t>(max_tokens);
    base_.assign(n_, std::vector<double>(T + 1, 0.0));
    slope_.assign(n_, std::vector<double>(T + 1, 0.0));
    send_.assign(n_, std::vector<double>(T + 1, 0.0));
    for (std::size_t i = 0; i < n_; ++i) {
      const StageGroup& g = groups[i];
      for (std::size_t t = 1; t <= T; ++t) {
        const auto tokens = static_cast<std::int64_t>(t);
        double at_t = 0, at_t1 = 0;
        for (int u = s.stage_units[i].first; u < s.stage_units[i].second; ++u) {
          at_t += group_unit_seconds(cost, cluster, g, u, tokens, tokens, false);
          at_t1 += group_unit_seconds(cost, cluster, g, u, tokens, tokens + 1, false);
        }
        slope_[i][t] = at_t1 - at_t;
        base_[i][t] = at_t - static_cast<double>(t) * slope_[i][t];  // context 0, extrapolated
        send_[i][t] =
            i + 1 < n_ ? group_transfer_s(cluster, g, groups[i + 1], activation_bytes(cost, tokens))
                       : 0.0;
      }
    }
  }
  std::size_t stages() const { return n_; }
  // Compute of stage i on tokens [a, b) (b - a <= max_tokens; any a).
  double compute(std::size_t i, std::int64_t a, std::int64_t b) const {
    const auto t = static_cast<std::size_t>(b - a);
    return base_[i][t] + static_cast<double>(b) * slope_[i][t];
  }
  double time(std::size_t i, std::int64_t a, std::int64_t b) const {
    return compute(i, a, b) + send_[i][static_cast<std::size_t>(b - a)];
  }
  hpipe::StageTime function() const {
    return [this](int i, int a, int b) { return time(static_cast<std::size_t>(i), a, b); };
  }

 private:
  std::size_t n_;
  std::vector<std::vector<double>> base_, slope_, send_;
};

void check_lengths(const CostModel& cost, std::int64_t prompt_len, std::int64_t max_tokens) {
  if (max_tokens < 1) throw PlanError(fmt::format("max tokens must be >= 1, got {}", max_tokens));
  if (max_tokens > cost.config().max_positions) {
    throw PlanError(fmt::format("max tokens {} exceeds the model's context of {} positions",
                                max_tokens, cost.config().max_positions));
  }
  if (prompt_len < 1 || prompt_len > max_tokens) {
    throw PlanError(fmt::format("the prompt has {} tokens; the pipeline is planned for 1..{}",
                                prompt_len, max_tokens));
  }
}

// Algorithm 1 over every order of the view's devices and groups; PlanError when nothing fits.
hpipe::Distribution distribute(const CostModel& cost, const ClusterSpec& cluster,
                               const std::vector<StageGroup>& view, std::int64_t prompt_len,
                               std::int64_t max_tokens) {
  const int D = cluster.size(), U = pipeline::unit_count(cost.config().layers);
  hpipe::DistributionProblem p;
  p.units = U;
  p.unit_bytes = unit_bytes(cost, max_tokens);
  for (const StageGroup& g : view) {
    std::vector<double> row;
    for (int u = 0; u < U; ++u)
      row.push_back(group_unit_seconds(cost, cluster, g, u, prompt_len, prompt_len));
    p.unit_s.push_back(std::move(row));
    std::vector<double> sends;
    for (const StageGroup& to : view)
      sends.push_back(group_transfer_s(cluster, g, to, activation_bytes(cost, prompt_len)));
    p.transfer_s.push_back(std::move(sends));
    p.tail_s.push_back(output_s(cost, cluster, g.leader, prompt_len));
    p.budget.push_back(group_budget(cost.config(), cluster, g));
  }
  hpipe::Distribution best = hpipe::distribute(p);
  if (!best.feasible) {
    std::int64_t total = 0, largest = 0;
    for (const std::int64_t b : p.unit_bytes) total += b, largest = std::max(largest, b);
    std::string budgets;
    for (int d = 0; d < D; ++d) {
      budgets += fmt::format("{}'{}' {}", d ? ", " : "", cluster.device(d).name,
                             cluster.device(d).memory_bytes);
    }
    throw PlanError(fmt::format(
        "no pipeline fits in memory: the model needs {} bytes (weights + KV cache for {} "
        "positions), its largest unit {}; the devices give {}",
        total, max_tokens, largest, budgets));
  }
  return best;
}

PipelineSchedule staged(const CostModel& cost, const std::string& strategy,
                        const std::vector<StageGroup>& groups,
                        std::vector<std::pair<int, int>> units, std::int64_t prompt_len,
                        std::int64_t max_tokens) {
  PipelineSchedule s;
  s.strategy = strategy;
  for (const StageGroup& g : groups) {
    s.stage_devices.push_back(g.leader);
    s.stage_members.push_back(g.single() ? std::vector<int>{} : g.members);
    s.stage_shares.push_back(g.single() ? std::vector<double>{} : g.shares);
  }
  s.stage_units = std::move(units);
  s.max_tokens = max_tokens;
  s.prompt_len = prompt_len;
  const std::vector<std::int64_t> bytes = unit_bytes(cost, max_tokens);
  for (const auto& [b, e] : s.stage_units) {
    std::int64_t m = 0;
    for (int u = b; u < e; ++u) m += bytes[static_cast<std::size_t>(u)];
    s.stage_memory_bytes.push_back(m);
  }
  return s;
}

void one_slice_each(PipelineSchedule& s) {
  s.sliced = false;
  s.slices.clear();
  for (std::int64_t n = 1; n <= s.max_tokens; ++n) s.slices.push_back({static_cast<int>(n)});
}

// Why a schedule is not sliced, or empty when it may be.
std::string unsliced_reason(const CostModel& cost, const PipelineSchedule& s,
                            const HpipeOptions& options) {
  if (!cost.config().causal) {
    return "bidirectional (encoder) model: every token attends to every other, so the prompt "
           "is pipelined but not sliced";
  }
  if (!options.sliced) return "slicing disabled: every prompt is one slice";
  if (s.stage_devices.size() == 1) return "one stage: nothing to overlap, one slice";
  return "";
}

void finish_schedule(const CostModel& cost, const ClusterSpec& cluster, PipelineSchedule& s) {
  const PipelinePrediction p = predict_pipeline(cost, cluster, s, s.prompt_len);
  s.predicted_prefill_s = p.prefill_s;
  s.predicted_decode_s = p.decode_s;
  s.stage_busy_s = p.stage_busy_s;
}

void append_note(PipelineSchedule& s, const std::string& text) {
  if (text.empty()) return;
  s.note += (s.note.empty() ? "" : "; ") + text;
}

// HPipe's stages (Algorithm 1) for `strategy`. When the schedule cannot be sliced (an encoder, one
// stage, slicing off) it is finished with one slice per prompt and `done` is set; otherwise it
// is marked sliced for the caller's slice table.
PipelineSchedule balanced_stages(const CostModel& cost, const ClusterSpec& cluster,
                                 const std::vector<StageGroup>& view, const char* strategy,
                                 std::int64_t prompt_len, std::int64_t max_tokens,
                                 const HpipeOptions& options, bool& done) {
  check_lengths(cost, prompt_len, max_tokens);
  const hpipe::Distribution dist = distribute(cost, cluster, view, prompt_len, max_tokens);
  std::vector<StageGroup> groups;
  for (const int v : dist.order) groups.push_back(view[static_cast<std::size_t>(v)]);
  PipelineSchedule s = staged(cost, strategy, groups, dist.ranges, prompt_len, max_tokens);
  const std::string reason = unsliced_reason(cost, s, options);
  done = !reason.empty();
  if (done) {
    one_slice_each(s);
    append_note(s, reason);
    finish_schedule(cost, cluster, s);
    return s;
  }
  s.sliced = true;
  return s;
}

}  // namespace

StageGroup PipelineSchedule::group(std::size_t i) const {
  if (i < stage_members.size() && stage_members[i].size() > 1)
    return {stage_members[i], stage_shares.at(i), stage_devices.at(i)};
  return StageGroup::device(stage_devices.at(i));
}

bool PipelineSchedule::hybrid() const {
  return std::any_of(stage_members.begin(), stage_members.end(),
                     [](const std::vector<int>& m) { return m.size() > 1; });
}

void validate_schedule(const PipelineSchedule& s, const ModelConfig& config,
                       const ClusterSpec& cluster) {
  const int U = pipeline::unit_count(config.layers);
  if (s.stage_devices.empty() || s.stage_devices.size() != s.stage_units.size()) {
    throw PlanError(fmt::format("pipeline schedule: {} stage devices but {} unit ranges",
                                s.stage_devices.size(), s.stage_units.size()));
  }
  const std::size_t stages = s.stage_devices.size();
  if ((!s.stage_members.empty() && s.stage_members.size() != stages) ||
      (!s.stage_shares.empty() && s.stage_shares.size() != stages)) {
    throw PlanError(fmt::format("pipeline schedule: {} stages but {} groups and {} share lists",
                                stages, s.stage_members.size(), s.stage_shares.size()));
  }
  std::vector<bool> used(static_cast<std::size_t>(cluster.size()), false);
  int next = 0;
  for (std::size_t i = 0; i < stages; ++i) {
    const std::vector<int> members = s.group(i).members;
    for (const int d : members) {
      if (d < 0 || d >= cluster.size()) {
        throw PlanError(
            fmt::format("pipeline schedule: stage {} is on device {}; the cluster has {}", i, d,
                        cluster.size()));
      }
      if (used[static_cast<std::size_t>(d)]) {
        throw PlanError(
            fmt::format("pipeline schedule: device '{}' holds two stages", cluster.device(d).name));
      }
      used[static_cast<std::size_t>(d)] = true;
    }
    if (members.size() > 1 &&
        (s.stage_shares.empty() || s.stage_shares[i].size() != members.size() ||
         std::find(members.begin(), members.end(), s.stage_devices[i]) == members.end())) {
      throw PlanError(fmt::format(
          "pipeline schedule: stage {}'s group needs one share per member and its leader among "
          "them",
          i));
    }
    const auto [b, e] = s.stage_units[i];
    if (b != next || e <= b || e > U) {
      throw PlanError(fmt::format(
          "pipeline schedule: stage {} has units [{}, {}); expected a non-empty range starting at "
          "{} within the model's {} units",
          i, b, e, next, U));
    }
    next = e;
  }
  if (next != U) {
    throw PlanError(fmt::format(
        "pipeline schedule: the stages cover units [0, {}) of the model's {}", next, U));
  }
  if (s.max_tokens < 1 || s.slices.size() != static_cast<std::size_t>(s.max_tokens)) {
    throw PlanError(fmt::format(
        "pipeline schedule: the slice table has {} entries; it needs one per prompt length "
        "1..{}",
        s.slices.size(), s.max_tokens));
  }
  for (std::size_t n = 1; n <= s.slices.size(); ++n) {
    std::int64_t sum = 0;
    bool positive = !s.slices[n - 1].empty();
    for (const int len : s.slices[n - 1]) sum += len, positive = positive && len >= 1;
    if (!positive || sum != static_cast<std::int64_t>(n)) {
      throw PlanError(fmt::format(
          "pipeline schedule: the slices for a {}-token prompt sum to {} (or one is empty)", n,
          sum));
    }
  }
}

PipelinePrediction predict_pipeline(const CostModel& cost, const ClusterSpec& cluster,
                                    const PipelineSchedule& s, std::int64_t prompt_len) {
  validate_schedule(s, cost.config(), cluster);
  if (prompt_len < 1 || prompt_len > s.max_tokens) {
    throw PlanError(fmt::format("the prompt has {} tokens; the pipeline is planned for 1..{}",
                                prompt_len, s.max_tokens));
  }
  const std::vector<int>& lengths = s.slices[static_cast<std::size_t>(prompt_len - 1)];
  const int longest = *std::max_element(lengths.begin(), lengths.end());
  const StageTable table(cost, cluster, s, std::max<std::int64_t>(longest, 1));
  const std::size_t N = table.stages();
  // Leaders: the first receives the ids, the last runs the head and sends the output.
  const int first = s.stage_devices.front(), last = s.stage_devices.back();
  const double head = cost.head_seconds(cluster.device(last));
  PipelinePrediction p;
  p.stage_busy_s.assign(N, 0.0);
  std::int64_t a = 0;
  for (const int len : lengths) {
    for (std::size_t i = 0; i < N; ++i) p.stage_busy_s[i] += table.time(i, a, a + len);
    a += len;
  }
  p.stage_busy_s.back() += head + output_s(cost, cluster, last, prompt_len);
  p.prefill_s = ids_s(cluster, first, prompt_len) +
                hpipe::flow_shop_makespan(static_cast<int>(N), table.function(), lengths) + head +
                output_s(cost, cluster, last, prompt_len);
  p.decode_s = ids_s(cluster, first, 1) + head + output_s(cost, cluster, last, 1);
  for (std::size_t i = 0; i < N; ++i) p.decode_s += table.time(i, prompt_len, prompt_len + 1);
  return p;
}

namespace {

// uniform-slices over one view of the cluster: Algorithm 1, then k equal slices.
PipelineSchedule uniform_slices_view(const CostModel& cost, const ClusterSpec& cluster,
                                     const std::vector<StageGroup>& view, std::int64_t prompt_len,
                                     std::int64_t max_tokens, const HpipeOptions& options) {
  bool done = false;
  PipelineSchedule s =
      balanced_stages(cost, cluster, view, "uniform-slices", prompt_len, max_tokens, options, done);
  if (done) return s;
  const StageTable table(cost, cluster, s, max_tokens);
  const hpipe::StageTime t = table.function();
  const int N = static_cast<int>(table.stages());
  std::vector<int> lengths;
  for (int n = 1; n <= static_cast<int>(max_tokens); ++n) {
    std::vector<int> best{n};
    double best_s = hpipe::flow_shop_makespan(N, t, best);
    for (int k = 2; k <= std::min(n, std::max(options.max_uniform_slices, 1)); ++k) {
      const std::vector<std::int64_t> equal = equal_slices(n, k);
      lengths.assign(equal.begin(), equal.end());
      const double m = hpipe::flow_shop_makespan(N, t, lengths);
      if (m < best_s) best_s = m, best = lengths;
    }
    s.slices.push_back(std::move(best));
  }
  append_note(s, "HPipe's stages, equal-length slices, the count chosen by the cost model");
  finish_schedule(cost, cluster, s);
  return s;
}

// HPipe over one view of the cluster (hpipe_islands.h): Algorithms 1 and 2.
PipelineSchedule plan_hpipe_view(const CostModel& cost, const ClusterSpec& cluster,
                                 const std::vector<StageGroup>& view, std::int64_t prompt_len,
                                 std::int64_t max_tokens, const HpipeOptions& options) {
  bool done = false;
  PipelineSchedule s =
      balanced_stages(cost, cluster, view, "hpipe", prompt_len, max_tokens, options, done);
  if (done) return s;
  const StageTable table(cost, cluster, s, max_tokens);
  const hpipe::StageTime t = table.function();
  const int N = static_cast<int>(table.stages());
  const int n_max = static_cast<int>(max_tokens);
  const int exact = std::min(n_max, std::max(options.exact_tokens, 1));
  hpipe::SlicingOptions exact_options;
  exact_options.refine = options.refine;
  exact_options.max_equal = options.max_uniform_slices;
  std::vector<hpipe::Slicing> chosen = hpipe::slice_all_lengths(N, exact, t, exact_options);
  // Longer prompts in tiers of up to 4x the lengths covered so far, each on a granule of about
  // 1/64 of its longest length, so a prompt of any length gets 16-64 candidate boundaries.
  std::string tiers;
  for (int covered = exact; covered < n_max;) {
    const int upto = std::min(n_max, 4 * covered);
    const int g = options.granule > 0 ? options.granule : std::max(1, upto / 64);
    hpipe::SlicingOptions coarse_options = exact_options;
    coarse_options.granule = g;
    coarse_options.max_caps = std::max(options.max_caps, 1);
    std::vector<hpipe::Slicing> coarse = hpipe::slice_all_lengths(N, upto, t, coarse_options);
    chosen.insert(chosen.end(), std::make_move_iterator(coarse.begin() + covered),
                  std::make_move_iterator(coarse.end()));
    tiers +=
        fmt::format("{}{}..{} on multiples of {}", tiers.empty() ? "" : ", ", covered + 1, upto, g);
    covered = upto;
  }
  if (!tiers.empty()) {
    append_note(s, fmt::format("slicing exact up to {} tokens; beyond, slice boundaries for "
                               "lengths {} tokens, at most {} candidate caps each",
                               exact, tiers, options.max_caps));
  }
  for (hpipe::Slicing& sl : chosen) s.slices.push_back(std::move(sl.lengths));
  finish_schedule(cost, cluster, s);
  return s;
}

// Whether every device of `s` fits its memory by the exact per-member accounting
// (pipeline_device_memory); the DP's group budget is an estimate (hpipe_islands.h).
bool fits_exactly(const CostModel& cost, const ClusterSpec& cluster, const PipelineSchedule& s) {
  const Plan plan = plan_of_schedule(s, cost.config(), cluster);
  for (int d = 0; d < plan.num_devices(); ++d) {
    const DeviceMemory m = pipeline_device_memory(
        cost.footprint(), cost.config(), cost.unit_weight_bytes(), *plan.pipeline, d, s.max_tokens);
    const std::string& name = plan.devices[static_cast<std::size_t>(d)];
    if (m.total() > cluster.device(cluster.index_of(name)).memory_bytes) return false;
  }
  return true;
}

std::string group_names(const ClusterSpec& cluster, const std::vector<int>& members) {
  std::string out;
  for (const int d : members) out += (out.empty() ? "" : ", ") + cluster.device(d).name;
  return "{" + out + "}";
}

// The plan of every island view of the cluster (the plain view first) by `plan_view`, keeping
// the smallest predicted prefill among those whose members fit their memory exactly. The plain
// view's PlanError (nothing fits, a bad length) is the one thrown when no view gives a plan; a
// view whose groups are wider than the model's heads gives none.
PipelineSchedule best_over_views(
    const CostModel& cost, const ClusterSpec& cluster, const HpipeOptions& options,
    const std::function<PipelineSchedule(const std::vector<StageGroup>&)>& plan_view) {
  const std::vector<std::vector<int>> islands = options.islands
                                                    ? find_islands(cluster, options.island_ratio)
                                                    : std::vector<std::vector<int>>{};
  const std::vector<std::vector<StageGroup>> views = island_views(cluster, islands);
  std::optional<PipelineSchedule> plain, best;
  std::optional<PlanError> plain_error;
  for (std::size_t v = 0; v < views.size(); ++v) {
    try {
      PipelineSchedule s = plan_view(views[v]);
      if (v > 0 && !fits_exactly(cost, cluster, s)) continue;
      if (v == 0) plain = s;
      if (!best || s.predicted_prefill_s < best->predicted_prefill_s) best = std::move(s);
    } catch (const PlanError& e) {
      if (v == 0) plain_error = e;
    }
  }
  if (!best) throw *plain_error;
  if (best->hybrid()) {
    std::string groups;
    for (std::size_t i = 0; i < best->stage_devices.size(); ++i) {
      if (!best->group(i).single())
        groups += (groups.empty() ? "" : ", ") + group_names(cluster, best->group(i).members);
    }
    append_note(*best, fmt::format("hybrid: tensor-parallel island stages {}; {}", groups,
                                   plain ? fmt::format("the plain pipeline is predicted {:.1f} ms",
                                                       plain->predicted_prefill_s * 1e3)
                                         : "no plain pipeline fits"));
  } else if (!islands.empty()) {
    append_note(*best, fmt::format("{} fast island(s) considered; a plain pipeline is faster",
                                   islands.size()));
  }
  return *best;
}

}  // namespace

PipelineSchedule plan_hpipe(const CostModel& cost, const ClusterSpec& cluster,
                            std::int64_t prompt_len, std::int64_t max_tokens,
                            const HpipeOptions& options) {
  return best_over_views(cost, cluster, options, [&](const std::vector<StageGroup>& view) {
    return plan_hpipe_view(cost, cluster, view, prompt_len, max_tokens, options);
  });
}

PipelineSchedule plan_gpipe(const CostModel& cost, const ClusterSpec& cluster,
                            std::int64_t prompt_len, std::int64_t max_tokens) {
  check_lengths(cost, prompt_len, max_tokens);
  const std::int64_t L = cost.config().layers;
  const int U = pipeline::unit_count(L);
  const std::int64_t D = std::min<std::int64_t>(cluster.size(), L);
  std::vector<int> devices;
  std::vector<std::pair<int, int>> units;
  std::int64_t layer = 0;
  for (std::int64_t d = 0; d < D; ++d) {
    const std::int64_t count = L / D + (d < L % D ? 1 : 0);
    const int begin = d == 0 ? 0 : pipeline::attention_unit(layer);
    layer += count;
    const int end = d + 1 == D ? U : pipeline::attention_unit(layer);
    devices.push_back(static_cast<int>(d));
    units.emplace_back(begin, end);
  }
  std::vector<StageGroup> groups;
  for (const int d : devices) groups.push_back(StageGroup::device(d));
  PipelineSchedule s = staged(cost, "gpipe", groups, units, prompt_len, max_tokens);
  for (std::size_t i = 0; i < devices.size(); ++i) {
    const DeviceSpec& d = cluster.device(devices[i]);
    if (s.stage_memory_bytes[i] > d.memory_bytes) {
      throw PlanError(fmt::format(
          "gpipe: stage {} (units [{}, {})) needs {} bytes on '{}', which has {} ({} missing)", i,
          units[i].first, units[i].second, s.stage_memory_bytes[i], d.name, d.memory_bytes,
          s.stage_memory_bytes[i] - d.memory_bytes));
    }
  }
  one_slice_each(s);
  append_note(s, "even layers per device in cluster order, every prompt one slice");
  finish_schedule(cost, cluster, s);
  return s;
}

PipelineSchedule plan_uniform_slices(const CostModel& cost, const ClusterSpec& cluster,
                                     std::int64_t prompt_len, std::int64_t max_tokens,
                                     const HpipeOptions& options) {
  // HPipe's stages, island stages included, so that the two differ only in the slicing.
  return best_over_views(cost, cluster, options, [&](const std::vector<StageGroup>& view) {
    return uniform_slices_view(cost, cluster, view, prompt_len, max_tokens, options);
  });
}

}  // namespace huddle
