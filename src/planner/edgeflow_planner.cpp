#include "planner/edgeflow_planner.h"

#include "core/error.h"
#include "plan/row_plan.h"
#include "planner/glpk_problem.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <utility>

namespace huddle {
namespace {

using std::size_t;

// Weight of Σ t_i beside λ: among (nearly) λ-optimal cuts, prefer earlier finishes everywhere.
constexpr double kTieWeight = 1e-3;

// A value a layer reads, as held before the layer runs.
struct Source {
  std::vector<Range> held;    // per device
  std::vector<double> ready;  // per device: when it holds those rows
  std::int64_t rows = 0;      // the value's rows (1 for a Whole read)
  std::int64_t bytes_per_row = 0;
};

Source source_of(const rows::RowGraph& g, const EdgeFlowState& s, const rows::RowInput& in,
                 size_t n) {
  Source src;
  const bool whole = in.map.kind == rows::RowMap::Kind::Whole;
  if (in.producer >= 0) {
    const auto m = static_cast<size_t>(in.producer);
    src.held = s.ranges[m];
    src.ready = s.finish[m];
    src.rows = g.layers[m].rows;
    src.bytes_per_row = g.layers[m].bytes_per_row;
  } else {
    src.rows = whole ? 1 : in.map.in_rows;
    src.held.assign(n, Range{0, 0});
    src.held[0] = {0, src.rows};
    src.ready.assign(n, s.external_ready);
    src.bytes_per_row = in.bytes_per_row;
  }
  return src;
}

Range need_of(const rows::RowInput& in, std::int64_t rows, const Range& out) {
  if (empty(out)) return {0, 0};
  if (in.map.kind == rows::RowMap::Kind::Whole) return {0, rows};
  const kernels::RowSpan sp = in.map.input_rows(out.first, out.second);
  return {sp.begin, sp.end};
}

// Per device, when the rows of `src` it needs (`need`) have all arrived: per link, its latency
// plus all the bytes that link carries for this value (0 where nothing comes).
std::vector<double> arrivals(const RowCosts& c, const Source& src, const std::vector<Range>& need) {
  const size_t n = need.size();
  std::vector<std::vector<std::int64_t>> rows(n, std::vector<std::int64_t>(n, 0));
  for (const RowTransfer& x : forwarding_table(src.held, need)) {
    if (x.src != x.dst)
      rows[static_cast<size_t>(x.src)][static_cast<size_t>(x.dst)] += x.end - x.begin;
  }
  std::vector<double> out(n, 0.0);
  for (size_t j = 0; j < n; ++j) {
    for (size_t i = 0; i < n; ++i) {
      if (rows[j][i] == 0) continue;
      const double bytes = static_cast<double>(rows[j][i] * src.bytes_per_row);
      out[i] = std::max(
          out[i], src.ready[j] + c.message_s(static_cast<int>(j), static_cast<int>(i), bytes));
    }
  }
  return out;
}

std::vector<Range> ranges_of_cuts(const std::vector<std::int64_t>& x) {
  std::vector<Range> r;
  for (size_t i = 0; i + 1 < x.size(); ++i) r.emplace_back(x[i], x[i + 1]);
  return r;
}

std::vector<std::int64_t> cuts_of_ranges(const std::vector<Range>& r) {
  std::vector<std::int64_t> x = {0};
  for (const Range& q : r) x.push_back(q.second);
  return x;
}

// The linear reach of a layer input: device i reads [α·x_{i−1} + β_s, α·x_i + β_e).
struct Reach {
  double alpha = 1, beta_s = 0, beta_e = 0;
};

Reach reach_of(const rows::RowInput& in) {
  Reach r;
  switch (in.map.kind) {
    case rows::RowMap::Kind::Window: {
      const kernels::Window2d& w = in.map.window;
      r.alpha = static_cast<double>(w.stride_h);
      r.beta_s = -static_cast<double>(w.pad_top);
      r.beta_e = static_cast<double>(w.dilation_h * (w.kernel_h - 1) + 1 - w.stride_h - w.pad_top);
      break;
    }
    case rows::RowMap::Kind::Resize:
      r.alpha = static_cast<double>(in.map.in_rows) / static_cast<double>(in.map.out_rows);
      r.beta_s = -2;
      r.beta_e = 2;
      break;
    default:
      break;
  }
  return r;
}

// How the LP treats receiver i and producer device j of one input.
enum class Term : std::uint8_t { ES, EA, BS, BA, ApartBelow, ApartAbove };

// A linear form over the cut columns (x_0 = 0 and x_M = H folded into the constant).
struct Lin {
  std::map<int, double> coef;
  double constant = 0;
};

class LayerLp {
 public:
  LayerLp(const rows::RowGraph& g, const RowCosts& c, const EdgeFlowState& s, int layer)
      : g_(g),
        c_(c),
        s_(s),
        l_(static_cast<size_t>(layer)),
        n_(static_cast<size_t>(c.devices())),
        rows_(g.layers[l_].rows) {
    for (const rows::RowInput& in : g.layers[l_].inputs)
      sources_.push_back(source_of(g, s, in, n_));
  }

  size_t inputs() const { return sources_.size(); }

  // The paper's first guess for every (input, receiver, producer device).
  Term initial(size_t k, size_t i, size_t j) const {
    if (g_.layers[l_].inputs[k].producer < 0) return Term::ES;
    return j < i ? Term::BS : Term::EA;
  }

  // The term that is exact at integer cuts `x` (or keeps the ranges apart when they do not meet).
  Term exact_at(size_t k, size_t i, size_t j, const std::vector<std::int64_t>& x) const {
    if (x[i] == x[i + 1]) return initial(k, i, j);
    const Reach r = reach_of(g_.layers[l_].inputs[k]);
    const double s = r.alpha * static_cast<double>(x[i]) + r.beta_s;
    const double e = r.alpha * static_cast<double>(x[i + 1]) + r.beta_e;
    const auto [a, b] = sources_[k].held[j];
    const double ad = static_cast<double>(a), bd = static_cast<double>(b);
    if (e <= ad) return Term::ApartBelow;
    if (s >= bd) return Term::ApartAbove;
    const double t[4] = {e - s, e - ad, bd - s, bd - ad};
    return static_cast<Term>(std::min_element(t, t + 4) - t);
  }

  // Solves the LP with the terms `term(k, i, j)`; the cut points x_0..x_M and λ (seconds).
  template <typename TermOf>
  std::optional<std::pair<std::vector<double>, double>> solve(const TermOf& term) const {
    const int m = static_cast<int>(n_);
    const double h = static_cast<double>(rows_);
    glp_term_out(GLP_OFF);
    GlpkProblem owner(glp_create_prob());
    glp_prob* lp = owner.get();
    glp_set_obj_dir(lp, GLP_MIN);
    // Columns: x_1..x_{M−1} at 1..M−1, λ at M, t_i at M+1+i, then the p's.
    glp_add_cols(lp, 2 * m);
    for (int i = 1; i < m; ++i) glp_set_col_bnds(lp, i, GLP_DB, 0.0, h);
    const int lambda = m;
    glp_set_col_bnds(lp, lambda, GLP_FR, 0.0, 0.0);
    glp_set_obj_coef(lp, lambda, 1.0);
    for (int i = 0; i < m; ++i) {
      glp_set_col_bnds(lp, m + 1 + i, GLP_FR, 0.0, 0.0);
      glp_set_obj_coef(lp, m + 1 + i, kTieWeight);
    }
    std::vector<int> ia = {0}, ja = {0};
    std::vector<double> ar = {0};
    // Adds `form >= rhs`.
    const auto add_row = [&](const Lin& form, double rhs) {
      const int row = glp_add_rows(lp, 1);
      glp_set_row_bnds(lp, row, GLP_LO, rhs - form.constant, 0.0);
      for (const auto& [col, v] : form.coef) {
        if (v == 0) continue;
        ia.push_back(row);
        ja.push_back(col);
        ar.push_back(v);
      }
    };
    // Adds coef·x_idx to `form`.
    const auto add_x = [&](Lin& form, size_t idx, double coef) {
      if (idx == 0) return;
      if (idx == n_) {
        form.constant += coef * h;
      } else {
        form.coef[static_cast<int>(idx)] += coef;
      }
    };
    for (size_t i = 2; i < n_; ++i) {  // x_i − x_{i−1} >= 0
      Lin f;
      add_x(f, i, 1);
      add_x(f, i - 1, -1);
      add_row(f, 0);
    }
    // t_i − a_i·(x_{i+1} − x_i) in ms (device i owns [x_i, x_{i+1}) here, 0-based).
    const auto busy = [&](size_t i) {
      Lin f;
      f.coef[m + 1 + static_cast<int>(i)] = 1;
      const double a = c_.per_row[l_][i] * kMs;
      add_x(f, i + 1, -a);
      add_x(f, i, a);
      return f;
    };
    for (size_t i = 0; i < n_; ++i) {
      Lin f;
      f.coef[lambda] = 1;
      f.coef[m + 1 + static_cast<int>(i)] = -1;
      add_row(f, 0);
      add_row(busy(i), (s_.device_free[i] + c_.fixed[l_][i]) * kMs);
    }
    for (size_t k = 0; k < sources_.size(); ++k) {
      const rows::RowInput& in = g_.layers[l_].inputs[k];
      const Source& src = sources_[k];
      const Reach r = reach_of(in);
      for (size_t i = 0; i < n_; ++i) {
        for (size_t j = 0; j < n_; ++j) {
          if (i == j || empty(src.held[j])) continue;
          const double wait = (src.ready[j] + c_.latency_s[j][i] + c_.fixed[l_][i]) * kMs;
          const double per_row = static_cast<double>(src.bytes_per_row) *
                                 c_.transfer_s_per_byte(static_cast<int>(j), static_cast<int>(i)) *
                                 kMs;
          const double a = static_cast<double>(src.held[j].first);
          const double b = static_cast<double>(src.held[j].second);
          if (in.map.kind == rows::RowMap::Kind::Whole) {  // all of j's rows, a constant
            add_row(busy(i), wait + per_row * (b - a));
            continue;
          }
          const Term t = term(k, i, j);
          if (t == Term::ApartBelow || t == Term::ApartAbove) {
            Lin f;  // below: a_j − e_i >= 0; above: s_i − b_j >= 0
            if (t == Term::ApartBelow) {
              add_x(f, i + 1, -r.alpha);
              add_row(f, r.beta_e - a);
            } else {
              add_x(f, i, r.alpha);
              add_row(f, b - r.beta_s);
            }
            continue;
          }
          const int p = glp_add_cols(lp, 1);
          glp_set_col_bnds(lp, p, GLP_LO, 0.0, 0.0);
          Lin bound;  // p − term >= 0
          bound.coef[p] = 1;
          switch (t) {
            case Term::ES:
              add_x(bound, i + 1, -r.alpha);
              add_x(bound, i, r.alpha);
              bound.constant -= r.beta_e - r.beta_s;
              break;
            case Term::EA:
              add_x(bound, i + 1, -r.alpha);
              bound.constant -= r.beta_e - a;
              break;
            case Term::BS:
              add_x(bound, i, r.alpha);
              bound.constant -= b - r.beta_s;
              break;
            default:
              bound.constant -= b - a;
          }
          add_row(bound, 0);
          Lin f = busy(i);
          f.coef[p] = -per_row;
          add_row(f, wait);
        }
      }
    }
    glp_load_matrix(lp, static_cast<int>(ia.size()) - 1, ia.data(), ja.data(), ar.data());
    glp_smcp parm;
    glp_init_smcp(&parm);
    parm.presolve = GLP_ON;
    parm.msg_lev = GLP_MSG_OFF;
    if (glp_simplex(lp, &parm) != 0 || glp_get_status(lp) != GLP_OPT) return std::nullopt;
    std::vector<double> x(n_ + 1, 0.0);
    for (int i = 1; i < m; ++i) x[static_cast<size_t>(i)] = glp_get_col_prim(lp, i);
    x[n_] = h;
    return std::make_pair(x, glp_get_col_prim(lp, lambda) / kMs);
  }

 private:
  const rows::RowGraph& g_;
  const RowCosts& c_;
  const EdgeFlowState& s_;
  size_t l_, n_;
  std::int64_t rows_;
  std::vector<Source> sources_;
};

std::vector<std::int64_t> round_cuts(const std::vector<double>& x, std::int64_t rows) {
  std::vector<std::int64_t> out(x.size(), 0);
  for (size_t i = 1; i < x.size(); ++i) {
    out[i] = std::clamp(static_cast<std::int64_t>(std::llround(x[i])), out[i - 1], rows);
  }
  out.back() = rows;
  return out;
}

// Exact evaluation: (latest finish over devices with rows, Σ finish over all devices).
struct CutScore {
  double makespan = 0, total = 0;
  bool better_than(const CutScore& o) const {
    const double tol = 1e-12 + 1e-9 * std::abs(o.makespan);
    if (makespan < o.makespan - tol) return true;
    return makespan <= o.makespan + tol && total < o.total - tol;
  }
};

// Whether device 0 gathers row layer `layer`'s output whole: a graph output, or read by a tail op.
bool gathered_to_primary(const rows::RowGraph& g, int layer) {
  if (std::find(g.output_layers.begin(), g.output_layers.end(), layer) != g.output_layers.end())
    return true;
  for (const rows::TailOp& t : g.tail) {
    if (std::find(t.row_inputs.begin(), t.row_inputs.end(), layer) != t.row_inputs.end())
      return true;
  }
  return false;
}

class Evaluator {
 public:
  Evaluator(const rows::RowGraph& g, const RowCosts& c, const EdgeFlowState& s, int layer)
      : g_(g), c_(c), s_(s), layer_(layer), to_primary_(gathered_to_primary(g, layer)) {}
  // A column layer's columns all go on (to device 0, or to every device of the next column
  // layer): its score counts, per device, the message of its columns to device 0 too, so that a
  // small layer is not spread over devices whose messages cost more than their columns save.
  // So does a row layer whose output device 0 gathers whole (a graph output, or the input of an
  // op that runs on device 0 after the row layers): a layer that writes more bytes than it reads
  // (YOLO's detection convolutions write twice) is kept off a device where shipping its rows to
  // device 0 costs more than computing them there saves.
  CutScore operator()(const std::vector<std::int64_t>& x) const {
    std::vector<double> finish;
    CutScore sc;
    const std::vector<Range> ranges = ranges_of_cuts(x);
    sc.makespan = layer_finish(g_, c_, s_, layer_, ranges, &finish);
    const rows::RowLayer& layer = g_.layers[static_cast<size_t>(layer_)];
    if (!layer.columns && to_primary_) {
      const Source out{ranges, finish, layer.rows, layer.bytes_per_row};
      std::vector<Range> need(ranges.size(), Range{0, 0});
      need[0] = {0, layer.rows};
      sc.makespan = std::max(sc.makespan, arrivals(c_, out, need)[0]);
    }
    if (layer.columns) {
      for (size_t d = 1; d < ranges.size(); ++d) {
        const double bytes =
            static_cast<double>((ranges[d].second - ranges[d].first) * layer.bytes_per_row);
        if (bytes > 0) {
          sc.makespan =
              std::max(sc.makespan, finish[d] + c_.message_s(static_cast<int>(d), 0, bytes));
        }
      }
    }
    for (double f : finish) sc.total += f;
    return sc;
  }

 private:
  const rows::RowGraph& g_;
  const RowCosts& c_;
  const EdgeFlowState& s_;
  int layer_;
  bool to_primary_;  // device 0 gathers this row layer's output whole
};

// Moves single cut points by ±1, ±2, ±4, ... rows (pushing the neighbours along) while that
// improves the score.
std::vector<std::int64_t> local_search(const Evaluator& eval, std::vector<std::int64_t> x,
                                       CutScore& score) {
  const std::int64_t rows = x.back();
  const size_t m = x.size() - 1;
  for (int round = 0; round < 100; ++round) {
    bool improved = false;
    for (size_t i = 1; i < m; ++i) {
      for (std::int64_t step = 1; step <= rows; step *= 2) {
        for (const std::int64_t dir : {step, -step}) {
          std::vector<std::int64_t> y = x;
          y[i] = std::clamp<std::int64_t>(x[i] + dir, 0, rows);
          for (size_t k = i + 1; k < m; ++k) y[k] = std::max(y[k], y[i]);
          for (size_t k = 1; k < i; ++k) y[k] = std::min(y[k], y[i]);
          if (y == x) continue;
          const CutScore sc = eval(y);
          if (sc.better_than(score)) {
            x = std::move(y);
            score = sc;
            improved = true;
          }
        }
      }
    }
    if (!improved) break;
  }
  return x;
}

}  // namespace

std::vector<Range> column_shares(const rows::RowGraph& graph, const RowCosts& costs,
                                 const EdgeFlowState& state, int layer) {
  const size_t n = static_cast<size_t>(costs.devices());
  const auto l = static_cast<size_t>(layer);
  const rows::RowLayer& lay = graph.layers[l];
  // Per device: when a unit of its could start (free, and its inputs arrived: the finish of a
  // one-column unit less that column), and the seconds per column and fixed seconds of its unit
  // with the gather of its columns to device 0.
  std::vector<double> ready(n), per_col(n), fixed(n);
  for (size_t d = 0; d < n; ++d) {
    std::vector<Range> one(n, Range{0, 0});
    one[d] = {0, 1};
    std::vector<double> finish;
    layer_finish(graph, costs, state, layer, one, &finish);
    ready[d] = finish[d] - costs.unit_s(layer, static_cast<int>(d), 1);
    per_col[d] =
        std::max(costs.per_row[l][d] + static_cast<double>(lay.bytes_per_row) *
                                           costs.transfer_s_per_byte(static_cast<int>(d), 0),
                 1e-300);
    fixed[d] = costs.fixed[l][d] + (d == 0 ? 0.0 : costs.message_s(static_cast<int>(d), 0, 1e-300));
  }
  const double width = static_cast<double>(lay.rows);
  const auto columns_by = [&](double lambda) {
    std::vector<double> x(n);
    for (size_t d = 0; d < n; ++d)
      x[d] = std::max(0.0, (lambda - ready[d] - fixed[d]) / per_col[d]);
    return x;
  };
  const auto total = [&](double lambda) {
    double t = 0;
    for (double x : columns_by(lambda)) t += x;
    return t;
  };
  double lo = ready[0] + fixed[0], hi = lo;
  for (size_t d = 0; d < n; ++d) {
    lo = std::min(lo, ready[d] + fixed[d]);
    hi = std::max(hi, ready[d] + fixed[d] + width * per_col[d]);
  }
  for (int it = 0; it < 100; ++it) {  // the λ at which the columns sum to the width
    const double mid = 0.5 * (lo + hi);
    (total(mid) < width ? lo : hi) = mid;
  }
  std::vector<double> x = columns_by(hi);
  if (std::all_of(x.begin(), x.end(), [](double v) { return v <= 0; })) x[0] = 1;
  return split_ranges(lay.rows, x);
}

EdgeFlowState EdgeFlowState::start(int devices) {
  EdgeFlowState s;
  s.device_free.assign(static_cast<size_t>(devices), 0.0);
  return s;
}

double layer_finish(const rows::RowGraph& graph, const RowCosts& costs, const EdgeFlowState& state,
                    int layer, const std::vector<Range>& ranges, std::vector<double>* finish) {
  const size_t n = static_cast<size_t>(costs.devices());
  HUDDLE_CHECK(ranges.size() == n);
  std::vector<double> start = state.device_free;
  for (const rows::RowInput& in : graph.layers[static_cast<size_t>(layer)].inputs) {
    const Source src = source_of(graph, state, in, n);
    std::vector<Range> need(n);
    for (size_t d = 0; d < n; ++d) need[d] = need_of(in, src.rows, ranges[d]);
    const std::vector<double> arrive = arrivals(costs, src, need);
    for (size_t d = 0; d < n; ++d) start[d] = std::max(start[d], arrive[d]);
  }
  double makespan = 0;
  std::vector<double> out(n);
  for (size_t d = 0; d < n; ++d) {
    const std::int64_t rows = ranges[d].second - ranges[d].first;
    out[d] =
        rows > 0 ? start[d] + costs.unit_s(layer, static_cast<int>(d), rows) : state.device_free[d];
    if (rows > 0) makespan = std::max(makespan, out[d]);
  }
  if (finish) *finish = std::move(out);
  return makespan;
}

LayerChoice plan_layer(const rows::RowGraph& graph, const RowCosts& costs,
                       const EdgeFlowState& state, int layer, const EdgeFlowOptions& options) {
  const size_t n = static_cast<size_t>(costs.devices());
  const auto l = static_cast<size_t>(layer);
  const std::int64_t rows = graph.layers[l].rows;
  const Evaluator eval(graph, costs, state, layer);
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> candidates;
  LayerChoice choice;
  if (n > 1 && graph.layers[l].columns) {
    candidates.emplace_back("columns", cuts_of_ranges(column_shares(graph, costs, state, layer)));
  } else if (n > 1) {
    const LayerLp lp(graph, costs, state, layer);
    const auto first = lp.solve([&](size_t k, size_t i, size_t j) { return lp.initial(k, i, j); });
    if (first) {
      choice.lp_lambda = first->second;
      std::vector<std::int64_t> at = round_cuts(first->first, rows);
      candidates.emplace_back("lp", at);
      for (int r = 0; options.refine && r < kEdgeFlowRefinements; ++r) {
        const auto next =
            lp.solve([&](size_t k, size_t i, size_t j) { return lp.exact_at(k, i, j, at); });
        if (!next) break;
        std::vector<std::int64_t> y = round_cuts(next->first, rows);
        if (y == at) break;
        candidates.emplace_back("lp", y);
        at = std::move(y);
      }
    }
  }
  if (options.alternatives || candidates.empty()) {
    std::vector<double> speed(n);
    for (size_t d = 0; d < n; ++d) speed[d] = 1.0 / std::max(costs.per_row[l][d], 1e-300);
    candidates.emplace_back("proportional", cuts_of_ranges(split_ranges(rows, speed)));
    candidates.emplace_back("equal",
                            cuts_of_ranges(split_ranges(rows, std::vector<double>(n, 1.0))));
    for (size_t d = 0; d < n; ++d) {
      std::vector<std::int64_t> x(n + 1, 0);
      for (size_t k = d + 1; k <= n; ++k) x[k] = rows;
      candidates.emplace_back("device " + std::to_string(d), x);
    }
  }
  size_t best = 0;
  CutScore best_score = eval(candidates[0].second);
  for (size_t i = 1; i < candidates.size(); ++i) {
    const CutScore sc = eval(candidates[i].second);
    if (sc.better_than(best_score)) {
      best = i;
      best_score = sc;
    }
  }
  std::vector<std::int64_t> x = candidates[best].second;
  choice.source = candidates[best].first;
  if (options.local_search && n > 1) {
    std::vector<std::int64_t> y = local_search(eval, x, best_score);
    if (y != x) choice.source += "+search";
    x = std::move(y);
  }
  choice.ranges = ranges_of_cuts(x);
  choice.makespan = layer_finish(graph, costs, state, layer, choice.ranges, &choice.finish);
  return choice;
}

void advance_tails(const rows::RowGraph& graph, const RowCosts& costs, EdgeFlowState& state,
                   std::size_t before_op) {
  const size_t n = static_cast<size_t>(costs.devices());
  for (; state.tails_done < graph.tail.size() && graph.tail[state.tails_done].op < before_op;
       ++state.tails_done) {
    const rows::TailOp& t = graph.tail[state.tails_done];
    double start = state.device_free[0];
    for (int m : t.row_inputs) {
      const auto mi = static_cast<size_t>(m);
      Source src{state.ranges[mi], state.finish[mi], graph.layers[mi].rows,
                 graph.layers[mi].bytes_per_row};
      std::vector<Range> need(n, Range{0, 0});
      need[0] = {0, src.rows};
      start = std::max(start, arrivals(costs, src, need)[0]);
    }
    state.device_free[0] = start + costs.tail[state.tails_done];
    state.external_ready = state.device_free[0];
  }
}

void commit_layer(EdgeFlowState& state, const LayerChoice& choice) {
  state.ranges.push_back(choice.ranges);
  state.finish.push_back(choice.finish);
  for (size_t d = 0; d < choice.ranges.size(); ++d) {
    if (!empty(choice.ranges[d])) state.device_free[d] = choice.finish[d];
  }
}

std::vector<std::vector<Range>> plan_edgeflow(const rows::RowGraph& graph, const RowCosts& costs,
                                              const EdgeFlowOptions& options) {
  EdgeFlowState state = EdgeFlowState::start(costs.devices());
  for (size_t l = 0; l < graph.layers.size(); ++l) {
    advance_tails(graph, costs, state, graph.layers[l].op);
    commit_layer(state, plan_layer(graph, costs, state, static_cast<int>(l), options));
  }
  return state.ranges;
}

}  // namespace huddle
