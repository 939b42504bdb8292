// Hepti's workload partitioning problem P2 (papers/hepti-parallel-transformer-inference, §4.3)
// over two blocks b (attention, then MLP), solved with GLPK (docs/planner.md has the notation):
//
//   minimise   T_0 + T_1
//   subject to T_b >= fixed_bi + cost_bi · x_bi + comm_b     for every device i and block b
//              sum_i x_bi = units_b                           (exact: integers that sum)
//              mem_fixed_i + sum_b mem_bi · x_bi <= budget_i   (memory, Eq. 4)
//              min_bi <= x_bi <= units_b,  x_bi integer where integer_b (Eq. 1-2, 9-10)
//              T_0 + T_1 <= D                                  (deadline, when given)
//
// x_bi = λ_bi · units_b is device i's share of block b (heads, FFN columns, or a continuous token
// fraction when units_b = 1 and !integer_b).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

namespace huddle {

struct SplitDevice {
  std::array<double, 2> cost{};          // seconds per unit of block b
  std::array<double, 2> fixed{};         // seconds independent of the split
  std::array<double, 2> mem_per_unit{};  // bytes per unit of block b
  double mem_fixed = 0;                  // bytes independent of the split
  double mem_budget = 0;
  std::array<std::int64_t, 2> min_units{};
};

struct SplitProblem {
  std::array<std::int64_t, 2> units{};
  std::array<bool, 2> integer{true, true};
  std::array<double, 2> comm{};  // seconds per block, the same for every device
  std::optional<double> deadline_s;
  std::vector<SplitDevice> devices;
};

struct SplitSolution {
  bool feasible = false;
  std::array<std::vector<double>, 2> x;  // per block, per device (integral when integer)
  double objective = 0;                  // T_0 + T_1, seconds
};

// Solves the MILP exactly (branch and bound); `feasible` is false when no split satisfies the
// constraints. Integral blocks come back as exact integers summing to units_b.
SplitSolution solve_split(const SplitProblem& problem);

// The objective of a given split (max over devices per block, plus comm), for checking.
double split_objective(const SplitProblem& problem, const std::array<std::vector<double>, 2>& x);

}  // namespace huddle
