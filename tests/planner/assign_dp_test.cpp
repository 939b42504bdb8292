// The assignment DPs against brute force over every assignment of small random DCGs (<= 10 ops,
// 2-3 providers, about a quarter of the nodes incapable), under the same cost model.
//   chains (the paper's setting):      assembly-line DP == frontier DP == brute force;
//   DAGs (joins, branches, residuals): frontier DP == brute force (exact); the assembly-line DP
//                                      is a heuristic there: its result is a feasible assignment
//                                      whose reported cost is its true cost, >= the optimum.
//   fixed device costs:                optimal_assignment (the DP over subsets of the devices
//                                      with a fixed cost) == brute force.
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

// GPT-2's attention in small: a norm only the local device runs (device 0, provider 0), read by
// q, k and v, which attn joins; each of those costs 3 s locally, 1 s on the remote (device 1,
// provider 1); a crossing costs 5 s. The norm's value travels to the remote once however many of
// its readers are there, so q, k, v and attn all go remote: 4 + 5 + 1 (attn's output back) = 10 s,
// against 12 s at home. Counting the crossing per reader (the paper's model) would price the
// remote at 20 s and keep everything local.
TEST(AssignDp, AValueCrossesToADeviceOnceForAllItsReadersThere) {
  AssignProblem p;
  p.op_names = {"norm", "q", "k", "v", "attn"};
  p.capable = {{true, false}, {true, true}, {true, true}, {true, true}, {true, true}};
  p.provider_device = {0, 1};
  p.edges = {{0, 1, DType::F32, 4, "n"},   {0, 2, DType::F32, 4, "n"}, {0, 3, DType::F32, 4, "n"},
             {1, 4, DType::F32, 4, "q"},   {2, 4, DType::F32, 4, "k"}, {3, 4, DType::F32, 4, "v"},
             {4, kEnd, DType::F32, 4, "a"}};
  const Dcg dcg(p);
  Costs costs;
  costs.node.assign(dcg.nodes().size(), 0.0);
  for (int op = 1; op < 5; ++op) {
    costs.node[at(dcg.node(op, 0))] = 3;
    costs.node[at(dcg.node(op, 1))] = 1;
  }
  costs.da.assign(at(dcg.num_da()), 0.0);
  const int to_remote = dcg.da_of(0, 0, 1), to_end = dcg.da_of(6, 1, 1);
  ASSERT_GE(to_remote, 0);
  ASSERT_GE(to_end, 0);
  costs.da[at(to_remote)] = 5;
  costs.da[at(to_end)] = 1;
  const Assignment remote = {0, 1, 1, 1, 1};
  const CostBreakdown b = cost_breakdown(dcg, costs, remote);
  EXPECT_EQ(b.crossings_by_da[at(to_remote)], 1);
  EXPECT_DOUBLE_EQ(b.total(), 10);
  // q and v remote, k at home: the norm's value crosses once, k's for attn once more.
  EXPECT_EQ(cost_breakdown(dcg, costs, {0, 1, 0, 1, 1}).crossings_by_da[at(to_remote)], 2);
  EXPECT_DOUBLE_EQ(assignment_cost(dcg, costs, {0, 0, 0, 0, 0}), 12);
  const std::optional<DpResult> frontier = frontier_dp(dcg, costs);
  ASSERT_TRUE(frontier.has_value());
  EXPECT_EQ(frontier->assignment, remote);
  EXPECT_DOUBLE_EQ(frontier->cost, 10);
  EXPECT_EQ(optimal_assignment(dcg, costs).assignment, remote);
  const DpResult als = assembly_line_dp(dcg, costs);
  EXPECT_DOUBLE_EQ(als.cost, assignment_cost(dcg, costs, als.assignment));
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

// A chain of 3 ops over a local provider (device 0, 3 s an op) and a remote (device 1, 1 s an
// op; every crossing 0.1 s): without a fixed cost every op goes to the remote; with it only
// where it pays for itself.
struct LocalOrRemote {
  Dcg dcg = make();
  Costs costs;

  LocalOrRemote() {
    costs.node.assign(dcg.nodes().size(), 0.0);
    for (int op = 0; op < 3; ++op) {
      costs.node[at(dcg.node(op, 0))] = 3;
      costs.node[at(dcg.node(op, 1))] = 1;
    }
    costs.da.assign(at(dcg.num_da()), 0.1);
  }
  static Dcg make() {
    AssignProblem p;
    p.op_names = {"a", "b", "c"};
    p.capable = {{true, true}, {true, true}, {true, true}};
    p.provider_device = {0, 1};
    p.edges = {
        {0, 1, DType::F32, 4, "x"}, {1, 2, DType::F32, 4, "y"}, {2, kEnd, DType::F32, 4, "z"}};
    return Dcg(p);
  }
};

TEST(AssignDp, ALargeFixedCostOfARemoteKeepsEveryOpLocal) {
  LocalOrRemote m;
  DpResult r = optimal_assignment(m.dcg, m.costs);
  EXPECT_EQ(r.assignment, (Assignment{1, 1, 1}));
  EXPECT_NEAR(r.cost, 3.1, 1e-12);  // 3 ops + the output's return
  m.costs.device_fixed = {0, 4};    // still cheaper than 9 s in process
  r = optimal_assignment(m.dcg, m.costs);
  EXPECT_EQ(r.assignment, (Assignment{1, 1, 1}));
  EXPECT_NEAR(r.cost, 7.1, 1e-12);
  m.costs.device_fixed = {0, 10};
  bool exact = false;
  r = optimal_assignment(m.dcg, m.costs, &exact);
  EXPECT_TRUE(exact);
  EXPECT_EQ(r.assignment, (Assignment{0, 0, 0}));
  EXPECT_NEAR(r.cost, 9, 1e-12);
  EXPECT_NEAR(assignment_cost(m.dcg, m.costs, {1, 1, 1}), 13.1, 1e-12);  // paid once, not per op
  // The DPs alone ignore the fixed cost while choosing, and report it in the cost.
  const std::optional<DpResult> blind = frontier_dp(m.dcg, m.costs);
  ASSERT_TRUE(blind.has_value());
  EXPECT_EQ(blind->assignment, (Assignment{1, 1, 1}));
  EXPECT_NEAR(blind->cost, 13.1, 1e-12);
  EXPECT_NEAR(assembly_line_dp(m.dcg, m.costs).cost, 13.1, 1e-12);
}

TEST(AssignDp, FixedDeviceCostsOptimalEqualsBruteForce) {
  // 2-3 providers over 1-2 remote devices ({0,1}, {0,1,2}, {0,0,1}, {0,1,1}), each remote with a
  // fixed cost of up to about half an all-local run's time (sometimes none).
  std::mt19937 rng(21);
  const std::vector<std::vector<int>> layouts = {{0, 1}, {0, 1, 2}, {0, 0, 1}, {0, 1, 1}};
  int changed = 0;  // trials where the fixed costs change the optimum
  for (int trial = 0; trial < 400; ++trial) {
    const std::vector<int>& devices = layouts[at(trial % 4)];
    RandomShape s;
    s.ops = 2 + trial % 8;
    s.providers = static_cast<int>(devices.size());
    s.chain = trial % 3 == 0;
    s.sizes = 1 + trial % 3;
    AssignProblem p = testing::random_problem(s, rng);
    p.provider_device = devices;
    const Dcg dcg(p);
    Costs costs = testing::random_costs(dcg, rng);
    std::uniform_real_distribution<double> u(0, 1);
    const int num_devices = devices.back() + 1;
    costs.device_fixed.assign(at(num_devices), 0.0);
    for (int d = 1; d < num_devices; ++d) {
      if (u(rng) < 0.8) costs.device_fixed[at(d)] = u(rng) * 3.0 * s.ops;
    }
    const Brute brute = brute_force(dcg, costs);
    bool exact = false;
    const DpResult best = optimal_assignment(dcg, costs, &exact);
    EXPECT_TRUE(exact);
    expect_capable(dcg, best.assignment);
    EXPECT_NEAR(best.cost, brute.cost, 1e-9) << "trial " << trial;
    EXPECT_NEAR(assignment_cost(dcg, costs, best.assignment), best.cost, 1e-9);
    const std::optional<DpResult> blind = frontier_dp(dcg, costs);
    ASSERT_TRUE(blind.has_value());
    if (blind->cost > brute.cost + 1e-9) ++changed;
  }
  // The fixed costs matter on a fair share of these problems (the DP that ignores them is worse).
  EXPECT_GT(changed, 40);
}

TEST(AssignDp, PastTheSubsetLimitAGreedyDescentDropsCostlyDevices) {
  // 1 local provider and kMaxFixedCostDevices + 1 remotes, each its own device with a fixed
  // cost; a chain every provider can run. The greedy descent is not exact, but its result is
  // never worse than using every device, nor than everything in process.
  std::mt19937 rng(8);
  for (int trial = 0; trial < 20; ++trial) {
    RandomShape s;
    s.ops = 6;
    s.providers = kMaxFixedCostDevices + 2;
    s.incapable = 0;
    AssignProblem p = testing::random_problem(s, rng);
    for (int pr = 0; pr < s.providers; ++pr) p.provider_device[at(pr)] = pr;
    const Dcg dcg(p);
    Costs costs = testing::random_costs(dcg, rng);
    std::uniform_real_distribution<double> u(0, 20);
    costs.device_fixed.assign(at(s.providers), 0.0);
    for (int d = 1; d < s.providers; ++d) costs.device_fixed[at(d)] = u(rng);
    bool exact = true;
    const DpResult best = optimal_assignment(dcg, costs, &exact);
    EXPECT_FALSE(exact);
    expect_capable(dcg, best.assignment);
    EXPECT_NEAR(assignment_cost(dcg, costs, best.assignment), best.cost, 1e-9);
    EXPECT_LE(best.cost, frontier_dp(dcg, costs)->cost + 1e-9);
    EXPECT_LE(best.cost, assignment_cost(dcg, costs, Assignment(at(s.ops), 0)) + 1e-9);
  }
}

}  // namespace
}  // namespace huddle::assign
