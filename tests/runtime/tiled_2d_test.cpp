// 2D-tiled plans (Hepti's 2D-tiled mode) on in-process device grids give the single-device
// answer: prefill logits against the fixtures' float64 references, and KV-cache decode steps
// against the single-device executor, step by step. Tolerances are those of distributed_test.
#include "core/error.h"
#include "io/npy.h"
#include "model/model.h"
#include "net/inproc_transport.h"
#include "planner/hepti_planner.h"
#include "reference_generation.h"
#include "runtime/executor.h"
#include "runtime/generate.h"
#include "runtime/in_process_cluster.h"
#include "test_util.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <ostream>

namespace huddle {
namespace {

struct Case {
  std::string model;
  Grid grid;
  std::vector<double> speeds;  // per device; uneven speeds give uneven ranges and token shares
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.model << " on a " << c.grid.rows << "x" << c.grid.cols << " grid";
}

std::string case_name(const Case& c) {
  std::string name = fmt::format("{}_{}x{}", c.model, c.grid.rows, c.grid.cols);
  for (double s : c.speeds) name += fmt::format("_{}", static_cast<int>(s));
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

Plan plan_for(const Model& model, const Case& c) {
  std::vector<std::string> devices;
  for (std::size_t i = 0; i < c.speeds.size(); ++i) devices.push_back(fmt::format("dev{}", i));
  Plan plan = tiled_2d_plan(model.config(), devices, c.grid, c.speeds);
  plan.validate(model.config(), "test plan");
  return plan;
}

class Tiled2D : public ::testing::TestWithParam<Case> {};
class Tiled2DDecode : public ::testing::TestWithParam<Case> {};  // causal models only

TEST_P(Tiled2D, PrefillMatchesReference) {
  const Case& c = GetParam();
  const Model model = Model::load(testing::fixture_model(c.model));
  const Plan plan = plan_for(model, c);
  const std::string stem = "references/" + c.model + ".16";
  const auto ids = testing::read_ids(testing::fixture(stem + ".ids.json"));
  const Tensor reference = io::read_npy(testing::fixture(stem + ".npy"));
  Tensor out;
  run_in_process(model, plan, [&](StepRunner& runner) { out = runner.forward(ids, true).clone(); });
  ASSERT_EQ(out.shape(), reference.shape());
  EXPECT_LE(testing::relative_error(out, reference), 1e-4);
}

TEST_P(Tiled2DDecode, StepsMatchSingleDevice) {
  const Case& c = GetParam();
  const Model model = Model::load(testing::fixture_model(c.model));
  ASSERT_TRUE(model.config().causal);
  const Plan plan = plan_for(model, c);
  const auto ids = testing::read_ids(testing::fixture("references/" + c.model + ".16.ids.json"));
  // A prefill of 10 tokens, then one token per step through the KV cache.
  const std::vector<std::int32_t> prompt(ids.begin(), ids.begin() + 10);
  std::vector<Tensor> expected;
  Executor single(model.graph(), model.weights(), model.config().max_positions);
  expected.push_back(single.forward(prompt, false).clone());
  for (std::size_t t = 10; t < ids.size(); ++t) {
    expected.push_back(single.forward(std::span(&ids[t], 1), false).clone());
  }
  std::vector<Tensor> got;
  run_in_process(model, plan, [&](StepRunner& runner) {
    got.push_back(runner.forward(prompt, false).clone());
    for (std::size_t t = 10; t < ids.size(); ++t) {
      got.push_back(runner.forward(std::span(&ids[t], 1), false).clone());
    }
  });
  ASSERT_EQ(got.size(), expected.size());
  for (std::size_t s = 0; s < got.size(); ++s) {
    ASSERT_EQ(got[s].shape(), expected[s].shape()) << "step " << s;
    EXPECT_LE(testing::relative_error(got[s], expected[s]), 1e-4) << "step " << s;
  }

  testing::expect_reference_greedy(model, plan, c.model);
}

std::vector<Case> cases_for(const std::vector<std::string>& models) {
  std::vector<Case> cases;
  for (const std::string& model : models) {
    cases.push_back({model, Grid{2, 2}, {1, 1, 1, 1}});
    cases.push_back({model, Grid{2, 3}, {5, 3, 1, 2, 2, 4}});  // heads 2/1/1 (llama: split GQA)
    cases.push_back({model, Grid{3, 2}, {4, 1, 2, 3, 1, 1}});
    cases.push_back({model, Grid{1, 3}, {1, 2, 3}});  // one grid row: no hidden split
    cases.push_back({model, Grid{3, 1}, {3, 1, 2}});  // one grid column: hidden split only
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Grids, Tiled2D,
                         ::testing::ValuesIn(cases_for({"gpt2-tiny", "bert-tiny", "llama-tiny"})),
                         [](const auto& p) { return case_name(p.param); });
INSTANTIATE_TEST_SUITE_P(Grids, Tiled2DDecode,
                         ::testing::ValuesIn(cases_for({"gpt2-tiny", "llama-tiny"})),
                         [](const auto& p) { return case_name(p.param); });

// Hand-made uneven hidden ranges that differ per layer: the slices follow each layer's plan.
TEST(Tiled2DPlan, PerLayerRangesMatchReference) {
  const Model model = Model::load(testing::fixture_model("llama-tiny"));
  Plan plan = tiled_2d_plan(model.config(), {"a", "b", "c", "d"}, Grid{2, 2}, {1, 1, 1, 1});
  plan.layers[0].hidden = {{0, 1}, {1, 128}};
  plan.layers[1].hidden = {{0, 100}, {100, 128}};
  plan.layers[1].heads = {{0, 3}, {3, 4}};
  plan.layers[2].columns = {{0, 1}, {1, 344}};
  plan.token_shares = {0, 1, 3, 1};  // device 0 attends for no token of its grid column
  plan.validate(model.config(), "test plan");
  const auto ids = testing::read_ids(testing::fixture("references/llama-tiny.16.ids.json"));
  const Tensor reference = io::read_npy(testing::fixture("references/llama-tiny.16.npy"));
  Tensor out;
  run_in_process(model, plan, [&](StepRunner& runner) { out = runner.forward(ids, true).clone(); });
  ASSERT_EQ(out.shape(), reference.shape());
  EXPECT_LE(testing::relative_error(out, reference), 1e-4);
}

// A program splits its tokens over one device group; groups must hold the device. Checked when
// the executor is built, naming the ops.
TEST(Tiled2DExecutor, RefusesInconsistentGroups) {
  net::InprocCluster cluster(4);
  const WeightMap none;
  const auto build = [](const std::vector<int>& first, const std::vector<int>& second) {
    Graph g;
    const ValueId pos = g.add_input("positions", {kTokens}, DType::I32);
    OpAttrs a;
    a.group = first;
    g.add_op(OpKind::LocalRows, "rows_a", {pos}, a);
    a.group = second;
    g.add_op(OpKind::LocalRows, "rows_b", {pos}, a);
    return g;
  };
  const DeviceGroup group{&cluster.rank(0), {1, 1, 1, 1}};
  const Graph two_groups = build({0, 1}, {0, 2});
  try {
    Executor e(two_groups, none, 8, group);
    FAIL() << "two token groups accepted";
  } catch (const PlanError& e) {
    EXPECT_TRUE(testing::contains(e.what(), "'rows_a' (ranks 0, 1) and 'rows_b' (ranks 0, 2)"))
        << e.what();
  }
  const Graph not_mine = build({1, 2}, {1, 2});
  EXPECT_THROW(Executor(not_mine, none, 8, group), PlanError);
  const Graph fine = build({0, 2}, {0, 2});
  EXPECT_NO_THROW(Executor(fine, none, 8, group));
  EXPECT_THROW(Executor(fine, none, 8), PlanError);  // a group needs a transport
}

}  // namespace
}  // namespace huddle
