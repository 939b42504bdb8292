// Operator-assignment plans of imported ONNX CNNs give the single-device answer: vgg-tiny (a
// chain), resnet-tiny (residual joins) and yolo-tiny (concat, resize, two outputs) under the
// optimal assignment profiled on cpu1 and cpuN (its profiling runs include each provider alone)
// and an alternating assignment that crosses between the providers at nearly every op; with a
// remote provider (a worker thread joined by the in-process transport: the same programs and
// session protocol as a TCP worker) an alternating assignment and the DP's under random costs,
// N-D values sent both ways with the token-less receive; every output within the fixture's
// tol_abs (1e-4 x max|ref|) of the float64 reference and of the single-device run. Plans that do
// not fit (another CNN's or a transformer's, unknown / missing / misplaced ops, the image read on
// a remote), a remote without the key and misshapen inputs are refused naming the cause.
#include "core/error.h"
#include "model/model.h"
#include "onnx/cnn_fixtures.h"
#include "onnx/onnx_model.h"
#include "planner/assign_planner.h"
#include "runtime/assign_cnn.h"
#include "runtime/executor.h"
#include "runtime/in_process_cluster.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <functional>
#include <map>
#include <random>
#include <string>

namespace huddle {
namespace {

using assign::Assignment;
using assign::Dcg;
using onnx_import::OnnxModel;

// Op i on the (i mod P)-th provider able to run it.
Assignment alternating_cnn(const Dcg& dcg) {
  const auto& p = dcg.problem();
  Assignment a;
  for (int op = 0; op < p.num_ops(); ++op) {
    std::vector<int> capable;
    for (int pr = 0; pr < p.num_providers(); ++pr) {
      if (dcg.node(op, pr) >= 0) capable.push_back(pr);
    }
    a.push_back(capable[static_cast<std::size_t>(op) % capable.size()]);
  }
  return a;
}

// Runs `plan` (after a JSON round trip) on the fixture's input and checks every output against
// the float64 reference and the single-device outputs `single`, within tol_abs.
void expect_cnn_answer(const OnnxModel& model, const nlohmann::json& entry, const Plan& plan,
                       const std::map<std::string, Tensor>& single, const std::string& what) {
  SCOPED_TRACE(what);
  const Plan reloaded = Plan::from_json(plan.to_json(), "plan.json");
  const Program program = assign::lower_cnn_assignment(model, reloaded, "plan.json");
  std::map<std::string, Tensor> outputs;
  if (reloaded.num_devices() == 1) {
    Executor executor(program.graph, model.weights(), 0);
    outputs = executor.run(testing::cnn_input(entry));
  } else {
    outputs = run_in_process(model.graph(), model.weights(), reloaded, testing::cnn_input(entry));
  }
  ASSERT_EQ(outputs.size(), entry["outputs"].size());
  for (const auto& out : entry["outputs"]) {
    const std::string name = out["onnx_name"].get<std::string>();
    const auto it = outputs.find(name);
    ASSERT_NE(it, outputs.end()) << name;
    const Tensor ref = io::read_npy(testing::fixture("cnn/" + out["file"].get<std::string>()));
    const double tol = out["tol_abs"].get<double>();
    EXPECT_LE(testing::max_abs_diff(it->second, ref), tol) << name;
    EXPECT_LE(testing::max_abs_diff(it->second, single.at(name)), tol) << name;
  }
}

class AssignCnnRun : public ::testing::TestWithParam<std::string> {};

TEST_P(AssignCnnRun, EveryAssignmentGivesTheSingleDeviceAnswer) {
  const nlohmann::json entry = testing::cnn_entry(GetParam());
  const OnnxModel model = OnnxModel::load(testing::cnn_model(GetParam()));
  Executor alone(model.graph(), model.weights(), 0);
  const auto single = alone.run(testing::cnn_input(entry));
  const auto providers = assign::parse_providers("cpu1,cpuN");

  const assign::AssignOutcome outcome =
      assign::plan_cnn_assignment(model, providers, testing::cnn_input(entry), 1);
  EXPECT_EQ(outcome.node_runs, 2u);
  EXPECT_GE(outcome.edge_runs, 1u);
  EXPECT_TRUE(outcome.exact);
  ASSERT_EQ(outcome.profiled.size(), outcome.node_runs + outcome.edge_runs);
  for (const assign::MeasuredRun& m : outcome.profiled) {
    EXPECT_GT(m.measured_s, 0);
    EXPECT_GT(m.predicted_s, 0);
  }
  ASSERT_EQ(outcome.baselines.size(), 4u);  // each provider alone, both priority orders
  for (const auto& [b, predicted] : outcome.baselines) {
    EXPECT_LE(outcome.optimal.cost, predicted + 1e-12) << b.name;
  }
  EXPECT_EQ(outcome.plan.model.architecture, "onnx");
  expect_cnn_answer(model, entry, outcome.plan, single, "optimal");

  const Dcg dcg(assign::make_problem(model.graph(), providers, 1));
  const Plan alternating = assign::assignment_plan(assign::cnn_plan_model(model.graph()),
                                                   model.graph(), providers, alternating_cnn(dcg));
  // It really alternates: about half the lowered ops serial (cpu1), the rest on the pool.
  const Program program = assign::lower_cnn_assignment(model, alternating, "alternating");
  std::size_t serial = 0;
  for (const Op& op : program.graph.ops()) serial += op.attrs.threads == 1;
  EXPECT_EQ(program.graph.ops().size(), model.graph().ops().size());
  EXPECT_EQ(serial, (model.graph().ops().size() + 1) / 2);
  expect_cnn_answer(model, entry, alternating, single, "alternating");
}

// The number of ops of `program` of kind `kind` (and, for pipe_recv, token-less: no input).
std::size_t count_cnn_ops(const Program& program, OpKind kind) {
  std::size_t n = 0;
  for (const Op& op : program.graph.ops())
    n += op.kind == kind && op.inputs.empty() == (kind == OpKind::PipeRecv);
  return n;
}

TEST_P(AssignCnnRun, RemoteProviderTakesNdValues) {
  const nlohmann::json entry = testing::cnn_entry(GetParam());
  const OnnxModel model = OnnxModel::load(testing::cnn_model(GetParam()));
  Executor alone(model.graph(), model.weights(), 0);
  const auto single = alone.run(testing::cnn_input(entry));
  const auto providers = assign::parse_providers("cpuN,remote:127.0.0.1:7001,cpu1");
  const Dcg dcg(assign::make_problem(model.graph(), providers, 1));
  // The remote runs every op but those reading the image.
  std::size_t on_remote = 0;
  for (int op = 0; op < dcg.problem().num_ops(); ++op) on_remote += dcg.node(op, 1) >= 0;
  EXPECT_GT(on_remote, model.graph().ops().size() / 2);
  EXPECT_LT(on_remote, model.graph().ops().size());
  EXPECT_GT(dcg.num_da(), 0);

  const Plan alternating = assign::assignment_plan(assign::cnn_plan_model(model.graph()),
                                                   model.graph(), providers, alternating_cnn(dcg));
  // Values cross both ways, received without the ids.
  const Program p0 = assign::lower_cnn_assignment(model, alternating, "alternating", 0);
  const Program p1 = assign::lower_cnn_assignment(model, alternating, "alternating", 1);
  EXPECT_GT(p1.graph.ops().size(), 3u);
  EXPECT_GT(count_cnn_ops(p0, OpKind::PipeSend), 0u);
  EXPECT_GT(count_cnn_ops(p0, OpKind::PipeRecv), 0u);
  EXPECT_GT(count_cnn_ops(p1, OpKind::PipeSend), 0u);
  EXPECT_GT(count_cnn_ops(p1, OpKind::PipeRecv), 0u);
  EXPECT_TRUE(p1.graph.outputs().empty());
  expect_cnn_answer(model, entry, alternating, single, "alternating with a remote");

  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0.1, 1.0);
  assign::Costs costs;
  for (std::size_t n = 0; n < dcg.nodes().size(); ++n) costs.node.push_back(u(rng));
  for (int d = 0; d < dcg.num_da(); ++d) costs.da.push_back(u(rng) * 0.1);
  expect_cnn_answer(
      model, entry,
      assign::assignment_plan(assign::cnn_plan_model(model.graph()), model.graph(), providers,
                              assign::optimal_assignment(dcg, costs).assignment),
      single, "dp under random costs");
}

INSTANTIATE_TEST_SUITE_P(Fixtures, AssignCnnRun,
                         ::testing::Values("vgg-tiny", "resnet-tiny", "yolo-tiny"),
                         [](const auto& p) {
                           std::string name = p.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

std::string cnn_plan_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(AssignCnnErrors, BadPlansAndProvidersAreNamed) {
  const OnnxModel vgg = OnnxModel::load(testing::cnn_model("vgg-tiny"));
  const OnnxModel resnet = OnnxModel::load(testing::cnn_model("resnet-tiny"));
  const auto providers = assign::parse_providers("cpuN,cpu1");
  const Dcg dcg(assign::make_problem(vgg.graph(), providers, 1));
  const Plan plan = assign::assignment_plan(assign::cnn_plan_model(vgg.graph()), vgg.graph(),
                                            providers, assign::priority_assignment(dcg, {0}));
  const auto lower_json = [&](const OnnxModel& m, const nlohmann::json& j) {
    return cnn_plan_error(
        [&] { (void)assign::lower_cnn_assignment(m, Plan::from_json(j, "a.json"), "a.json"); });
  };
  EXPECT_EQ(lower_json(vgg, plan.to_json()), "no error");

  // Another CNN's plan: its model facts, or (same facts) its op names.
  const std::string other = lower_json(resnet, plan.to_json());
  EXPECT_TRUE(testing::contains(other, "a.json: ")) << other;
  EXPECT_TRUE(testing::contains(other, "the plan is for a onnx") ||
              testing::contains(other, "a plan for another model?"))
      << other;
  // A transformer's assignment plan.
  const Model gpt2 = Model::load(testing::fixture_model("gpt2-tiny"));
  const auto gpt2_providers = assign::parse_providers("cpuN");
  const Plan gpt2_plan = assign::assignment_plan(gpt2.config(), gpt2.graph(), gpt2_providers,
                                                 Assignment(gpt2.graph().ops().size(), 0));
  EXPECT_TRUE(testing::contains(lower_json(vgg, gpt2_plan.to_json()), "the plan is for a gpt2"));
  // Unknown, missing and misplaced ops.
  const std::string first_op = vgg.graph().ops().front().name;
  nlohmann::json j = plan.to_json();
  j["assignment"]["ops"]["conv9"] = 0;
  EXPECT_TRUE(testing::contains(lower_json(vgg, j), "the model has no op 'conv9'"));
  j = plan.to_json();
  j["assignment"]["ops"].erase(first_op);
  EXPECT_TRUE(testing::contains(lower_json(vgg, j), "op '" + first_op + "' has no provider"));
  j = plan.to_json();
  j["assignment"]["providers"] = {"cpuN", "cpu1:relu"};
  j["assignment"]["ops"][first_op] = 1;
  EXPECT_TRUE(testing::contains(lower_json(vgg, j),
                                "a.json: assignment.ops." + first_op +
                                    ": provider 1 ('cpu1:relu') cannot run this conv2d op"))
      << lower_json(vgg, j);
  // The image read on a remote (only device 0 holds it); profiling a remote without the key.
  j = plan.to_json();
  j["assignment"]["providers"] = {"cpuN", "remote:127.0.0.1:7001"};
  j["devices"] = {{{"name", "primary"}}, {{"name", "127.0.0.1:7001"}}};
  j["token_shares"] = {1, 1};
  EXPECT_EQ(lower_json(vgg, j), "no error");
  j["assignment"]["ops"][first_op] = 1;
  EXPECT_TRUE(testing::contains(
      lower_json(vgg, j),
      "assignment.ops." + first_op + ": provider 1 ('remote:127.0.0.1:7001') cannot run"))
      << lower_json(vgg, j);
  EXPECT_TRUE(testing::contains(cnn_plan_error([&] {
                                  (void)assign::plan_cnn_assignment(
                                      vgg, assign::parse_providers("cpuN,remote:h:7001"),
                                      assign::profiling_inputs(vgg), 1);
                                }),
                                "profiling a remote provider needs the cluster key"));
  EXPECT_TRUE(testing::contains(cnn_plan_error([&] {
                                  (void)assign::plan_cnn_assignment(
                                      vgg, {}, assign::profiling_inputs(vgg), 1);
                                }),
                                "empty"));
  // Inputs that do not fit the graph.
  EXPECT_TRUE(testing::contains(cnn_plan_error([&] {
                                  (void)assign::plan_cnn_assignment(
                                      vgg, providers, {{"input", Tensor::empty(DType::F32, {1})}},
                                      1);
                                }),
                                "input 'input' is F32 [1]"));
}

}  // namespace
}  // namespace huddle
