// The DCG of imported ONNX CNNs (resnet-tiny: residual joins; yolo-tiny: concat and resize
// branches): node counts, DA classes against an independent count of tensor sizes, the remote's
// refusal of N-D values, Algorithm 1's coverage and the exact DP on them.
#include "onnx/onnx_model.h"
#include "planner/assignment_dp.h"
#include "planner/profiling_paths.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

namespace huddle::assign {
namespace {

class AssignCnn : public ::testing::TestWithParam<std::string> {};

TEST_P(AssignCnn, DcgPathsAndDp) {
  const auto model =
      onnx_import::OnnxModel::load(huddle::testing::fixture("cnn/" + GetParam() + ".onnx"));
  const Graph& g = model.graph();
  const std::size_t ops = g.ops().size();
  const Dcg dcg(make_problem(g, parse_providers("cpu1,cpuN"), 1));
  EXPECT_EQ(dcg.nodes().size(), 2 * ops + 2);
  // DA classes: each direction between the two providers, per distinct byte size of a tensor
  // one op passes to another (outputs go to the end on device 0: free).
  std::set<std::int64_t> sizes;
  for (const TensorEdge& e : dcg.problem().edges) {
    if (e.to != kEnd) sizes.insert(e.bytes);
  }
  EXPECT_EQ(static_cast<std::size_t>(dcg.num_da()), 2 * sizes.size());
  EXPECT_GT(sizes.size(), 3u);

  const ProfilingRuns runs = profiling_paths(dcg);
  EXPECT_EQ(runs.node_runs.size(), 2u);
  EXPECT_TRUE(covers_every_da_edge(dcg, runs.all()));

  std::mt19937 rng(1);
  std::uniform_real_distribution<double> u(0.1, 1.0);
  Costs costs;
  for (const DcgNode& n : dcg.nodes()) costs.node.push_back(n.op < 0 ? 0.0 : u(rng));
  for (int d = 0; d < dcg.num_da(); ++d) costs.da.push_back(0.05 * u(rng));
  bool exact = false;
  const DpResult best = optimal_assignment(dcg, costs, &exact);
  EXPECT_TRUE(exact);
  for (const std::vector<int>& order : std::vector<std::vector<int>>{{0}, {1}, {0, 1}, {1, 0}}) {
    EXPECT_LE(best.cost, assignment_cost(dcg, costs, priority_assignment(dcg, order)) + 1e-9);
  }
  EXPECT_GE(assembly_line_dp(dcg, costs).cost, best.cost - 1e-9);

  // A remote provider takes only [tokens, width] matrices: no op of a CNN.
  const Dcg with_remote(make_problem(g, parse_providers("cpuN,remote:127.0.0.1:7001"), 1));
  EXPECT_EQ(with_remote.nodes().size(), ops + 2);
  EXPECT_EQ(with_remote.num_da(), 0);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, AssignCnn, ::testing::Values("resnet-tiny", "yolo-tiny"));

}  // namespace
}  // namespace huddle::assign
