#include "planner/hepti_planner.h"

#include "core/error.h"
#include "planner/constants.h"
#include "planner/strategies.h"

#include <fmt/format.h>

#include <cmath>
#include <numeric>

namespace huddle {
namespace {

constexpr int kTiled2DDevices = 16;  // Hepti: 2D tiling pays from 16 devices on

struct Coefficients {
  double kv_per_head = 0;    // bytes of k/v weights and cache per kv head, all layers
  double q_per_head = 0;     // bytes of q/out weights per query head, all layers
  double per_column = 0;     // bytes per FFN column, all layers
  double mlp_whole = 0;      // bytes of every MLP block
  double primary_extra = 0;  // device 0 only: head and row-parallel biases
  double activations = 0;    // a step at full widths (upper bound)
};

Coefficients coefficients(const PlanRequest& r) {
  const ModelConfig& c = r.cost.config();
  const ModelFootprint& f = r.cost.footprint();
  Coefficients k;
  k.primary_extra = static_cast<double>(f.primary_bytes);
  for (std::size_t l = 0; l < f.layers.size(); ++l) {
    const LayerFootprint& lf = f.layers[l];
    // Per unit: a fraction of a byte where a unit is part of a block (footprint.h).
    k.kv_per_head +=
        static_cast<double>(lf.kv_heads_bytes) / static_cast<double>(c.kv_heads) +
        (lf.kv_cache ? 2.0 * static_cast<double>(c.max_positions) * c.head_dim * kF32Bytes : 0);
    k.q_per_head += static_cast<double>(lf.heads_bytes) / static_cast<double>(c.heads);
    k.per_column += static_cast<double>(lf.columns_bytes) / static_cast<double>(c.ffn);
    k.mlp_whole += static_cast<double>(f.mlp_block_bytes(l, c));
    k.primary_extra += static_cast<double>(lf.attn_primary_bytes + lf.mlp_primary_bytes);
  }
  const double T = static_cast<double>(r.seq_len);
  k.activations = T * kF32Bytes *
                  static_cast<double>(3 * c.hidden + (c.heads + 2 * c.kv_heads) * c.head_dim +
                                      c.ffn * (f.gated_mlp ? 2 : 1) + r.seq_len);
  return k;
}

std::vector<std::string> names_of(const ClusterSpec& cluster, const std::vector<int>& active) {
  std::vector<std::string> names;
  for (int i : active) names.push_back(cluster.device(i).name);
  return names;
}

double ring_even(const ClusterSpec& cluster, const std::vector<int>& ring, double bytes,
                 bool gather) {
  const std::vector<double> parts(ring.size(), bytes / static_cast<double>(ring.size()));
  return gather ? ring_all_gather_s(cluster, ring, parts)
                : ring_reduce_scatter_s(cluster, ring, parts);
}

std::string memory_shortfall(const SplitProblem& p, const ClusterSpec& cluster,
                             const std::vector<int>& active) {
  std::string out;
  for (std::size_t i = 0; i < p.devices.size(); ++i) {
    const SplitDevice& d = p.devices[i];
    const double least =
        d.mem_fixed +
        d.mem_per_unit[0] * static_cast<double>(std::max<std::int64_t>(d.min_units[0], 1)) +
        d.mem_per_unit[1] * static_cast<double>(d.min_units[1]);
    if (least > d.mem_budget) {
      out += fmt::format("; '{}' needs at least {:.0f} bytes, has {:.0f}",
                         cluster.device(active[i]).name, least, d.mem_budget);
    }
  }
  return out.empty() ? "; the devices' memory together is too small for the whole model" : out;
}

// A 2D-tiled plan on the request's whole cluster with its estimated cost.
PlanResult plan_2d(const PlanRequest& r) {
  const int n = r.cluster.size();
  const Grid grid = hepti_grid(n);
  std::vector<double> speeds;
  for (int i = 0; i < n; ++i) speeds.push_back(r.cluster.device(i).gflops);
  Plan plan = tiled_2d_plan(r.cost.config(), device_names(r.cluster), grid, speeds);
  PlanResult result;
  result.strategy = "hepti";
  result.mode = "2d-tiled";
  result.prediction = r.cost.predict_tiled_2d(plan, r.cluster, r.seq_len);
  result.notes.push_back(fmt::format(
      "2d-tiled on a {}x{} grid: figures are estimates, not simulated", grid.rows, grid.cols));
  check_memory(result.prediction, r.cluster, "hepti (2d-tiled)");
  result.document = plan.to_json();
  result.plan = std::move(plan);
  return result;
}

std::optional<HeptiMode> forced_mode(const std::string& mode) {
  if (mode.empty()) return std::nullopt;
  if (mode == "ws" || mode == "weight-stationary") return HeptiMode::WeightStationary;
  if (mode == "1d" || mode == "1d-tiled") return HeptiMode::Tiled1D;
  if (mode == "2d" || mode == "2d-tiled") return HeptiMode::Tiled2D;
  throw UsageError(fmt::format("unknown hepti mode '{}' (choose ws, 1d or 2d)", mode));
}

}  // namespace

Grid hepti_grid(int devices) {
  HUDDLE_CHECK(devices >= 1);
  int rows = 1;
  for (int k = 1; k * k <= devices; ++k) {
    if (devices % k == 0) rows = k;
  }
  return Grid{rows, devices / rows};
}

Plan tiled_2d_plan(const ModelConfig& c, const std::vector<std::string>& devices, Grid grid,
                   const std::vector<double>& speeds) {
  const int n = static_cast<int>(devices.size());
  if (grid.rows < 1 || grid.cols < 1 || grid.rows * grid.cols != n ||
      static_cast<int>(speeds.size()) != n) {
    throw PlanError(fmt::format("a {} x {} grid for {} devices ({} speeds)", grid.rows, grid.cols,
                                n, speeds.size()));
  }
  std::vector<double> row_speed(static_cast<std::size_t>(grid.rows), 0),
      col_speed(static_cast<std::size_t>(grid.cols), 0);
  for (int i = 0; i < n; ++i) {
    row_speed[static_cast<std::size_t>(grid.row_of(i))] += speeds[static_cast<std::size_t>(i)];
    col_speed[static_cast<std::size_t>(grid.col_of(i))] += speeds[static_cast<std::size_t>(i)];
  }
  LayerPlan layer;
  layer.attention = layer.mlp = BlockSplit::Tiled2D;
  layer.residual = ResidualLayout::Replicated;
  layer.hidden = split_at_least_one(c.hidden, row_speed, "hidden rows");
  layer.heads = split_at_least_one(c.heads, col_speed, "attention heads");
  layer.columns = split_at_least_one(c.ffn, col_speed, "MLP columns");
  Plan plan;
  plan.strategy = "hepti";
  plan.model = PlanModel::of(c);
  plan.devices = devices;
  plan.token_shares = speeds;
  plan.grid = grid;
  plan.layers.assign(static_cast<std::size_t>(c.layers), layer);
  return plan;
}

const char* hepti_mode_name(HeptiMode mode) {
  switch (mode) {
    case HeptiMode::WeightStationary:
      return "weight-stationary";
    case HeptiMode::Tiled1D:
      return "1d-tiled";
    case HeptiMode::Tiled2D:
      return "2d-tiled";
  }
  return "?";
}

SplitProblem hepti_problem(const PlanRequest& r, HeptiMode mode, const std::vector<int>& active) {
  HUDDLE_CHECK(mode != HeptiMode::Tiled2D && !active.empty());
  const ModelConfig& c = r.cost.config();
  const Coefficients k = coefficients(r);
  const CostModel::UnitFlops u = r.cost.unit_flops(r.seq_len, r.seq_len);
  const double L = static_cast<double>(c.layers), T = static_cast<double>(r.seq_len);
  const double H = static_cast<double>(c.hidden);
  const double group = static_cast<double>(c.heads / c.kv_heads);
  const ClusterSpec cluster = r.cluster.subset(active);
  std::vector<int> ring(active.size());
  std::iota(ring.begin(), ring.end(), 0);
  const bool ws = mode == HeptiMode::WeightStationary;

  SplitProblem p;
  p.units = {c.heads, ws ? 1 : c.ffn};
  p.integer = {true, !ws};
  if (active.size() > 1) {
    const double bytes = T * H * kF32Bytes;
    if (ws) {
      p.comm[0] =
          L * (ring_even(cluster, ring, bytes, true) + ring_even(cluster, ring, bytes, false));
    } else {
      p.comm[0] = p.comm[1] = L * ring_all_reduce_s(cluster, ring, bytes);
    }
  }
  for (std::size_t i = 0; i < active.size(); ++i) {
    const DeviceSpec& dev = cluster.device(static_cast<int>(i));
    SplitDevice d;
    const double att = dev.attention_gflops * 1e9, mlp = dev.mlp_gflops * 1e9,
                 conn = dev.connection_gflops * 1e9;
    d.cost[0] = L * u.per_head / att;
    d.mem_per_unit[0] = k.q_per_head + k.kv_per_head / group;
    // A range of a query heads reads at most (a + 2·group - 2) / group kv heads.
    d.mem_fixed = static_cast<double>(r.cost.footprint().shared_bytes) + k.activations +
                  k.kv_per_head * (2 * group - 2) / group + (i == 0 ? k.primary_extra : 0);
    d.mem_budget = static_cast<double>(dev.memory_bytes);
    if (ws) {
      d.cost[1] = L * T * (u.mlp_per_row / mlp + u.conn_per_row / conn);
      d.mem_fixed += k.mlp_whole;
    } else {
      d.fixed[0] = d.fixed[1] = L * T * u.conn_per_row / 2 / conn;
      d.cost[1] = L * u.per_column / mlp;
      d.mem_per_unit[1] = k.per_column;
    }
    d.min_units = {i == 0 ? 1 : 0, (i == 0 && !ws) ? 1 : 0};
    p.devices.push_back(d);
  }
  return p;
}

PlanResult plan_hepti(const PlanRequest& r) {
  const ModelConfig& c = r.cost.config();
  const int n = r.cluster.size();
  std::vector<int> active(static_cast<std::size_t>(n));
  std::iota(active.begin(), active.end(), 0);

  HeptiMode mode = HeptiMode::WeightStationary;
  if (const std::optional<HeptiMode> forced = forced_mode(r.mode)) {
    mode = *forced;
  } else if (!solve_split(hepti_problem(r, mode, active)).feasible) {
    mode = n < kTiled2DDevices ? HeptiMode::Tiled1D : HeptiMode::Tiled2D;
  }
  if (mode == HeptiMode::Tiled2D) return plan_2d(r);

  std::vector<std::string> notes;
  SplitSolution s;
  bool force_all = false;  // every remaining device takes at least one unit of each block
  while (true) {
    SplitProblem p = hepti_problem(r, mode, active);
    if (force_all) {
      for (SplitDevice& d : p.devices) d.min_units = {1, mode == HeptiMode::Tiled1D ? 1 : 0};
    }
    s = solve_split(p);
    if (!s.feasible) {
      throw PlanError(fmt::format("hepti ({}): no split fits the devices' memory{}",
                                  hepti_mode_name(mode), memory_shortfall(p, r.cluster, active)));
    }
    if (r.deadline_s) {
      p.deadline_s = r.deadline_s;
      const SplitSolution within = solve_split(p);
      if (!within.feasible) {
        throw PlanError(fmt::format(
            "hepti ({}): no split meets the deadline of {:.3f} ms; the fastest takes {:.3f} ms "
            "by the MILP's estimate",
            hepti_mode_name(mode), *r.deadline_s * 1e3, s.objective * 1e3));
      }
      s = within;
    }
    // The slowest device the MILP left idle (λ = 0) is dropped and the problem solved again; one
    // at a time, because when a straggler's fixed cost dominates T the others' split is not
    // unique and may leave fast devices idle too. If the rest cannot hold the model, every
    // remaining device is made to take part instead.
    int idle = -1;
    for (std::size_t i = 1; i < active.size(); ++i) {
      const bool none = s.x[0][i] == 0 || (mode == HeptiMode::Tiled1D && s.x[1][i] == 0);
      if (none &&
          (idle < 0 || r.cluster.device(active[i]).gflops <
                           r.cluster.device(active[static_cast<std::size_t>(idle)]).gflops)) {
        idle = static_cast<int>(i);
      }
    }
    if (idle < 0) break;
    std::vector<int> kept = active;
    kept.erase(kept.begin() + idle);
    if (!solve_split(hepti_problem(r, mode, kept)).feasible) {
      force_all = true;
      continue;
    }
    notes.push_back(fmt::format("device '{}' got no work (λ = 0) and was dropped",
                                r.cluster.device(active[static_cast<std::size_t>(idle)]).name));
    active = std::move(kept);
  }
  notes.push_back(fmt::format("MILP objective (T_attention + T_mlp) {:.3f} ms", s.objective * 1e3));

  Plan plan;
  plan.strategy = "hepti";
  plan.model = PlanModel::of(c);
  plan.devices = names_of(r.cluster, active);
  std::vector<std::int64_t> heads, columns;
  for (std::size_t i = 0; i < active.size(); ++i) {
    heads.push_back(static_cast<std::int64_t>(s.x[0][i]));
    if (mode == HeptiMode::Tiled1D) columns.push_back(static_cast<std::int64_t>(s.x[1][i]));
  }
  if (mode == HeptiMode::WeightStationary) {
    plan.token_shares = s.x[1];
    if (!(std::accumulate(plan.token_shares.begin(), plan.token_shares.end(), 0.0) > 0)) {
      plan.token_shares.assign(active.size(), 1.0);
    }
  } else {
    plan.token_shares.assign(active.size(), 1.0);
  }
  for (std::int64_t l = 0; l < c.layers; ++l) {
    LayerPlan layer;
    layer.attention = BlockSplit::Heads;
    layer.heads = ranges_from_counts(heads);
    if (mode == HeptiMode::WeightStationary) {
      layer.mlp = BlockSplit::Tokens;
      layer.residual = active.size() > 1 ? ResidualLayout::Tokens : ResidualLayout::Replicated;
    } else {
      layer.mlp = BlockSplit::Columns;
      layer.columns = ranges_from_counts(columns);
      layer.residual = ResidualLayout::Replicated;
    }
    plan.layers.push_back(std::move(layer));
  }
  PlanResult result = evaluate_plan(std::move(plan), hepti_mode_name(mode), r);
  result.notes.insert(result.notes.begin(), notes.begin(), notes.end());
  check_memory(result.prediction, r.cluster, fmt::format("hepti ({})", hepti_mode_name(mode)));
  return result;
}

}  // namespace huddle
