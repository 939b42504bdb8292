#include "planner/hepti_milp.h"

#include "core/error.h"
#include "planner/glpk_problem.h"

#include <algorithm>
#include <cmath>
#include <memory>

namespace huddle {

// Memory rows are scaled by their budget and times are in milliseconds (kMs), so every
// coefficient is within a few orders of magnitude of 1.

double split_objective(const SplitProblem& p, const std::array<std::vector<double>, 2>& x) {
  double total = 0;
  for (std::size_t b = 0; b < 2; ++b) {
    double worst = 0;
    for (std::size_t i = 0; i < p.devices.size(); ++i) {
      const SplitDevice& d = p.devices[i];
      worst = std::max(worst, d.fixed[b] + d.cost[b] * x[b][i] + p.comm[b]);
    }
    total += worst;
  }
  return total;
}

SplitSolution solve_split(const SplitProblem& p) {
  const int n = static_cast<int>(p.devices.size());
  HUDDLE_CHECK(n > 0);
  SplitSolution solution;
  for (const SplitDevice& d : p.devices) {
    if (d.mem_fixed > d.mem_budget) return solution;
  }
  glp_term_out(GLP_OFF);
  GlpkProblem owner(glp_create_prob());
  glp_prob* lp = owner.get();
  glp_set_obj_dir(lp, GLP_MIN);
  // Columns: x_{b,i} at 1 + b*n + i, then T_0, T_1.
  const auto x_col = [n](std::size_t b, int i) { return 1 + static_cast<int>(b) * n + i; };
  const int t_col = 2 * n + 1;
  glp_add_cols(lp, 2 * n + 2);
  for (std::size_t b = 0; b < 2; ++b) {
    for (int i = 0; i < n; ++i) {
      const SplitDevice& d = p.devices[static_cast<std::size_t>(i)];
      const double lo = static_cast<double>(d.min_units[b]), hi = static_cast<double>(p.units[b]);
      if (lo > hi) return solution;
      glp_set_col_bnds(lp, x_col(b, i), lo == hi ? GLP_FX : GLP_DB, lo, hi);
      glp_set_col_kind(lp, x_col(b, i), p.integer[b] ? GLP_IV : GLP_CV);
    }
    glp_set_col_bnds(lp, t_col + static_cast<int>(b), GLP_LO, 0.0, 0.0);
    glp_set_obj_coef(lp, t_col + static_cast<int>(b), 1.0);
  }
  std::vector<int> ia = {0}, ja = {0};
  std::vector<double> ar = {0};
  const auto entry = [&](int row, int col, double v) {
    ia.push_back(row);
    ja.push_back(col);
    ar.push_back(v);
  };
  // T_b - cost_bi x_bi >= fixed_bi + comm_b
  for (std::size_t b = 0; b < 2; ++b) {
    for (int i = 0; i < n; ++i) {
      const SplitDevice& d = p.devices[static_cast<std::size_t>(i)];
      const int row = glp_add_rows(lp, 1);
      glp_set_row_bnds(lp, row, GLP_LO, (d.fixed[b] + p.comm[b]) * kMs, 0.0);
      entry(row, t_col + static_cast<int>(b), 1.0);
      entry(row, x_col(b, i), -d.cost[b] * kMs);
    }
  }
  // sum_i x_bi = units_b
  for (std::size_t b = 0; b < 2; ++b) {
    const int row = glp_add_rows(lp, 1);
    glp_set_row_bnds(lp, row, GLP_FX, static_cast<double>(p.units[b]),
                     static_cast<double>(p.units[b]));
    for (int i = 0; i < n; ++i) entry(row, x_col(b, i), 1.0);
  }
  // Memory, scaled by the budget.
  for (int i = 0; i < n; ++i) {
    const SplitDevice& d = p.devices[static_cast<std::size_t>(i)];
    const double scale = std::max(d.mem_budget, 1.0);
    const int row = glp_add_rows(lp, 1);
    glp_set_row_bnds(lp, row, GLP_UP, 0.0, (d.mem_budget - d.mem_fixed) / scale);
    for (std::size_t b = 0; b < 2; ++b) entry(row, x_col(b, i), d.mem_per_unit[b] / scale);
  }
  if (p.deadline_s) {
    const int row = glp_add_rows(lp, 1);
    glp_set_row_bnds(lp, row, GLP_UP, 0.0, *p.deadline_s * kMs);
    entry(row, t_col, 1.0);
    entry(row, t_col + 1, 1.0);
  }
  glp_load_matrix(lp, static_cast<int>(ia.size()) - 1, ia.data(), ja.data(), ar.data());

  glp_iocp params;
  glp_init_iocp(&params);
  params.presolve = GLP_ON;
  params.msg_lev = GLP_MSG_OFF;
  params.tm_lim = 20000;
  const int rc = glp_intopt(lp, &params);
  const int status = glp_mip_status(lp);
  if ((rc != 0 && rc != GLP_ETMLIM) || (status != GLP_OPT && status != GLP_FEAS)) return solution;

  solution.feasible = true;
  for (std::size_t b = 0; b < 2; ++b) {
    double sum = 0;
    for (int i = 0; i < n; ++i) {
      double v = glp_mip_col_val(lp, x_col(b, i));
      if (p.integer[b]) v = std::round(v);
      v = std::max(v, 0.0);
      solution.x[b].push_back(v);
      sum += v;
    }
    HUDDLE_CHECK(!p.integer[b] || sum == static_cast<double>(p.units[b]),
                 "MILP split sums to {} not {}", sum, p.units[b]);
  }
  solution.objective = split_objective(p, solution.x);
  return solution;
}

}  // namespace huddle
