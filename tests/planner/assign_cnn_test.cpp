// The DCG of imported ONNX CNNs (resnet-tiny: residual joins; yolo-tiny: concat and resize
// branches): node counts, DA classes against an independent count of tensor sizes (with a remote
// provider too, which takes every op but those reading the image), Algorithm 1's coverage and the
// exact DP on them.
#include "onnx/onnx_model.h"
#include "planner/assignment_dp.h"
#include "planner/profiling_paths.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
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

  // A remote provider takes every op but those reading the image (only device 0 holds it). Its DA
  // classes: (cpuN -> remote, bytes) for a tensor edge into an op the remote can run, (remote ->
  // cpuN, bytes) for one out of such an op, (remote -> end, bytes) for an output it can make.
  const Dcg with_remote(make_problem(g, parse_providers("cpuN,remote:127.0.0.1:7001"), 1));
  std::vector<bool> remote_ok;
  for (const Op& op : g.ops()) {
    remote_ok.push_back(std::none_of(op.inputs.begin(), op.inputs.end(), [&](ValueId in) {
      return g.value(in).kind == ValueKind::Input;
    }));
  }
  const auto on_remote =
      static_cast<std::size_t>(std::count(remote_ok.begin(), remote_ok.end(), true));
  EXPECT_LT(on_remote, ops);
  EXPECT_GT(on_remote, ops / 2);
  EXPECT_EQ(with_remote.nodes().size(), ops + on_remote + 2);
  std::set<std::pair<int, std::int64_t>> classes;  // (0: to the remote, 1: from it, 2: to the end)
  for (const TensorEdge& e : with_remote.problem().edges) {
    const bool from_ok = remote_ok[static_cast<std::size_t>(e.from)];
    if (e.to == kEnd) {
      if (from_ok) classes.emplace(2, e.bytes);
      continue;
    }
    if (remote_ok[static_cast<std::size_t>(e.to)]) classes.emplace(0, e.bytes);
    if (from_ok) classes.emplace(1, e.bytes);
  }
  EXPECT_EQ(static_cast<std::size_t>(with_remote.num_da()), classes.size());
  EXPECT_TRUE(covers_every_da_edge(with_remote, profiling_paths(with_remote).all()));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, AssignCnn, ::testing::Values("resnet-tiny", "yolo-tiny"));

}  // namespace
}  // namespace huddle::assign
