// The assignment DPs against brute force over every assignment of small random DCGs (<= 10 ops,
// 2-3 providers, about a quarter of the nodes incapable), under the same cost model.
//   chains (the paper's setting):      assembly-line DP == frontier DP == brute force;
//   DAGs (joins, branches, residuals): frontier DP == brute force (exact); the assembly-line DP
//                                      is a heuristic there: its result is a feasible assignment
//                                      whose reported cost is its true cost, >= the optimum.
#include "assign_test_util.h"
#include "planner/assignment_dp.h"

#include <gtest/gtest.h>

#include <limits>

namespace huddle::assign {
namespace {

using testing::RandomShape;

struct Brute {
  double cost = std::numeric_limits<double>::infinity();
  Assignment best;
};

Brute brute_force(const Dcg& dcg, const Costs& costs) {
  Brute b;
  testing::for_each_assignment(dcg, [&](const Assignment& a) {
    const double c = assignment_cost(dcg, costs, a);
    if (c < b.cost) b = {c, a};
  });
  return b;
}

void expect_capable(const Dcg& dcg, const Assignment& a) {
  ASSERT_EQ(a.size(), static_cast<std::size_t>(dcg.problem().num_ops()));
  for (std::size_t op = 0; op < a.size(); ++op) {
    EXPECT_GE(dcg.node(static_cast<int>(op), a[op]), 0) << "op " << op << " on " << a[op];
  }
}

TEST(AssignDp, ChainsAssemblyLineAndFrontierEqualBruteForce) {
  std::mt19937 rng(14);
  for (int trial = 0; trial < 300; ++trial) {
    RandomShape s;
    s.ops = 2 + trial % 9;
    s.providers = 2 + trial % 2;
    s.sizes = 1 + trial % 3;
    s.remote_last = trial % 4 == 0;
    const Dcg dcg(testing::random_problem(s, rng));
    const Costs costs = testing::random_costs(dcg, rng);
    const Brute brute = brute_force(dcg, costs);
    const DpResult als = assembly_line_dp(dcg, costs);
    const std::optional<DpResult> frontier = frontier_dp(dcg, costs);
    ASSERT_TRUE(frontier.has_value());
    expect_capable(dcg, als.assignment);
    expect_capable(dcg, frontier->assignment);
    EXPECT_NEAR(als.cost, brute.cost, 1e-9) << "trial " << trial;
    EXPECT_NEAR(frontier->cost, brute.cost, 1e-9) << "trial " << trial;
    EXPECT_NEAR(assignment_cost(dcg, costs, als.assignment), als.cost, 1e-9);
  }
}

TEST(AssignDp, DagsFrontierIsExactAndAssemblyLineIsAnUpperBound) {
  std::mt19937 rng(7);
  int als_optimal = 0, trials = 0;
  for (int trial = 0; trial < 400; ++trial, ++trials) {
    RandomShape s;
    s.ops = 3 + trial % 8;
    s.providers = 2 + trial % 2;
    s.chain = false;
    s.sizes = 1 + trial % 3;
    s.remote_last = trial % 3 == 0;
    const Dcg dcg(testing::random_problem(s, rng));
    const Costs costs = testing::random_costs(dcg, rng);
    const Brute brute = brute_force(dcg, costs);
    const std::optional<DpResult> frontier = frontier_dp(dcg, costs);
    ASSERT_TRUE(frontier.has_value());
    expect_capable(dcg, frontier->assignment);
    EXPECT_NEAR(frontier->cost, brute.cost, 1e-9) << "trial " << trial;
    EXPECT_NEAR(assignment_cost(dcg, costs, frontier->assignment), frontier->cost, 1e-9);
    const DpResult als = assembly_line_dp(dcg, costs);
    expect_capable(dcg, als.assignment);
    EXPECT_NEAR(assignment_cost(dcg, costs, als.assignment), als.cost, 1e-9);
    EXPECT_GE(als.cost, brute.cost - 1e-9);
    if (als.cost <= brute.cost + 1e-9) ++als_optimal;
  }
  // The heuristic is usually optimal on these graphs but not always: both facts are checked so
  // that a change making the chain DP exact on DAGs (or much worse) is noticed.
  EXPECT_LT(als_optimal, trials);
  EXPECT_GT(als_optimal, trials / 2);
}

TEST(AssignDp, OptimalBeatsOrTiesEveryBaseline) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 100; ++trial) {
    RandomShape s;
    s.ops = 4 + trial % 7;
    s.providers = 3;
    s.chain = trial % 2 == 0;
    const Dcg dcg(testing::random_problem(s, rng));
    const Costs costs = testing::random_costs(dcg, rng);
    bool exact = false;
    const DpResult best = optimal_assignment(dcg, costs, &exact);
    EXPECT_TRUE(exact);
    for (const std::vector<int>& order :
         std::vector<std::vector<int>>{{0}, {1}, {2}, {1, 2, 0}, {2, 1, 0}}) {
      const Assignment base = priority_assignment(dcg, order);
      expect_capable(dcg, base);
      EXPECT_LE(best.cost, assignment_cost(dcg, costs, base) + 1e-9);
    }
  }
}

TEST(AssignDp, PriorityOrderTakesTheFirstCapableProvider) {
  AssignProblem p;
  p.op_names = {"a", "b", "c"};
  p.capable = {{true, true, false}, {true, false, true}, {false, false, true}};
  p.provider_device = {0, 0, 1};
  p.edges = {{0, 1, DType::F32, 4, "x"}, {1, 2, DType::F32, 4, "y"}, {2, kEnd, DType::F32, 4, "z"}};
  const Dcg dcg(p);
  EXPECT_EQ(priority_assignment(dcg, {1, 2, 0}), (Assignment{1, 2, 2}));
  EXPECT_EQ(priority_assignment(dcg, {1}), (Assignment{1, 0, 2}));  // then list order
  EXPECT_EQ(priority_assignment(dcg, {0, 2}), (Assignment{0, 0, 2}));
}

TEST(AssignDp, FrontierGivesUpPastItsStateLimit) {
  std::mt19937 rng(5);
  RandomShape s;
  s.ops = 8;
  s.providers = 3;
  s.chain = false;
  s.incapable = 0;
  const Dcg dcg(testing::random_problem(s, rng));
  const Costs costs = testing::random_costs(dcg, rng);
  EXPECT_FALSE(frontier_dp(dcg, costs, /*max_states=*/2).has_value());
  bool exact = true;
  (void)optimal_assignment(dcg, costs, &exact);
  EXPECT_TRUE(exact);  // the default limit is far above 3^live here
}

}  // namespace
}  // namespace huddle::assign
