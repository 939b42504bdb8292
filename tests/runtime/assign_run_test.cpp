// Operator-assignment plans give the single-device answer: GPT-2, BERT and Llama fixtures under
// the optimal assignment `huddle assign` computes (profiled on cpu1 and cpuN), every baseline
// (each provider alone, every priority order) and an alternating assignment that crosses between
// providers at almost every op; with a remote provider (a worker thread joined by the in-process
// transport, the same programs and session protocol as a TCP worker) too. Logits (BERT: hidden
// states) of a 16-token prompt within 1e-4 x max|ref| of the float64 reference; greedy ids of the
// reference prompt identical to the reference's.
#include "core/error.h"
#include "io/npy.h"
#include "model/model.h"
#include "plan/lowering.h"
#include "planner/assign_planner.h"
#include "reference_generation.h"
#include "runtime/assign_profiler.h"
#include "runtime/in_process_cluster.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <map>
#include <random>

namespace huddle {
namespace {

using assign::Assignment;
using assign::Dcg;

void expect_reference_answer(const Model& model, const Plan& plan, const std::string& name,
                             const std::string& what) {
  SCOPED_TRACE(what);
  const Plan reloaded = Plan::from_json(plan.to_json(), "plan");  // plain data, round trip
  reloaded.validate(model.config(), "plan");
  const auto ids = testing::read_ids(testing::fixture("references/" + name + ".16.ids.json"));
  const Tensor reference = io::read_npy(testing::fixture("references/" + name + ".16.npy"));
  Tensor out;
  run_in_process(model, reloaded,
                 [&](StepRunner& runner) { out = runner.forward(ids, true).clone(); });
  ASSERT_EQ(out.shape(), reference.shape());
  EXPECT_LE(testing::relative_error(out, reference), 1e-4);
  if (name != "bert-tiny") testing::expect_reference_greedy(model, reloaded, name);
}

// Op i on the (i mod P)-th provider able to run it: a crossing at nearly every edge.
Assignment alternating(const Dcg& dcg) {
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

struct Case {
  std::string model;
  std::string providers;
};

class AssignRun : public ::testing::TestWithParam<Case> {};

TEST_P(AssignRun, EveryAssignmentGivesTheSingleDeviceAnswer) {
  const Case& c = GetParam();
  const Model model = Model::load(testing::fixture_model(c.model));
  const auto providers = assign::parse_providers(c.providers);
  const Dcg dcg(assign::make_problem(model.graph(), providers, 16));
  std::vector<std::pair<std::string, Assignment>> runs;
  const bool remote = c.providers.find("remote") != std::string::npos;
  if (!remote) {
    const assign::AssignOutcome outcome = assign::plan_assignment(model, providers, 16, 1);
    EXPECT_EQ(outcome.node_runs, providers.size());
    EXPECT_TRUE(outcome.exact);
    ASSERT_EQ(outcome.profiled.size(), outcome.node_runs + outcome.edge_runs);
    for (const assign::MeasuredRun& m : outcome.profiled) {
      EXPECT_GT(m.measured_s, 0);
      EXPECT_GT(m.predicted_s, 0);
    }
    for (const auto& [b, predicted] : outcome.baselines) {
      EXPECT_LE(outcome.optimal.cost, predicted + 1e-12) << b.name;
    }
    expect_reference_answer(model, outcome.plan, c.model, "optimal");
  } else {
    // No worker to profile in process (tests/cli/assign_cli_test.cpp profiles a real one): the
    // DP's choice under random costs stands in.
    std::mt19937 rng(4);
    std::uniform_real_distribution<double> u(0.1, 1.0);
    assign::Costs costs;
    for (std::size_t n = 0; n < dcg.nodes().size(); ++n) costs.node.push_back(u(rng));
    for (int d = 0; d < dcg.num_da(); ++d) costs.da.push_back(u(rng) * 0.1);
    runs.emplace_back("dp under random costs", assign::optimal_assignment(dcg, costs).assignment);
  }
  for (const assign::Baseline& b : assign::baselines(dcg, providers)) {
    runs.emplace_back(b.name, b.assignment);
  }
  runs.emplace_back("alternating", alternating(dcg));
  // The alternating plan really splits the work: ops on every device, cpu1 ops serial, and
  // with a remote, values sent both ways.
  {
    const Plan plan =
        assign::assignment_plan(model.config(), model.graph(), providers, alternating(dcg));
    std::map<OpKind, int> kinds0;
    int serial = 0;
    const Program p0 = lower(model.graph(), model.config(), plan, 0);
    for (const Op& op : p0.graph.ops()) {
      ++kinds0[op.kind];
      serial += op.attrs.threads == 1;
    }
    if (c.providers.find("cpu1") != std::string::npos) {
      EXPECT_GT(serial, 0);
    }
    if (remote) {
      const Program p1 = lower(model.graph(), model.config(), plan, 1);
      EXPECT_GT(p1.graph.ops().size(), 10u);
      EXPECT_GT(kinds0[OpKind::PipeSend], 0);
      EXPECT_GT(kinds0[OpKind::PipeRecv], 0);
    }
  }
  for (const auto& [name, a] : runs) {
    expect_reference_answer(
        model, assign::assignment_plan(model.config(), model.graph(), providers, a), c.model, name);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, AssignRun,
    ::testing::Values(Case{"gpt2-tiny", "cpu1,cpuN"}, Case{"bert-tiny", "cpu1,cpuN"},
                      Case{"llama-tiny", "cpuN,cpu1"},
                      Case{"gpt2-tiny", "cpuN,remote:127.0.0.1:7001,cpu1"},
                      Case{"bert-tiny", "remote:127.0.0.1:7001,cpuN"},
                      Case{"llama-tiny", "cpuN,remote:127.0.0.1:7001:linear,attention,cpu1"}),
    [](const auto& p) {
      std::string name = p.param.model + "_" + std::to_string(p.index);
      std::replace(name.begin(), name.end(), '-', '_');
      return name;
    });

std::string plan_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(AssignErrors, BadPlansAndInputsAreNamed) {
  const Model gpt2 = Model::load(testing::fixture_model("gpt2-tiny"));
  const Model llama = Model::load(testing::fixture_model("llama-tiny"));
  const auto providers = assign::parse_providers("cpuN,remote:127.0.0.1:7001");
  const Dcg dcg(assign::make_problem(gpt2.graph(), providers, 8));
  const Plan plan = assign::assignment_plan(gpt2.config(), gpt2.graph(), providers,
                                            assign::priority_assignment(dcg, {0}));
  // A plan for another model.
  EXPECT_NE(
      plan_error([&] { plan.validate(llama.config(), "a.json"); }).find("the plan is for a gpt2"),
      std::string::npos);
  // An op on a provider that cannot run it: the head after last_row on the remote.
  nlohmann::json j = plan.to_json();
  j["assignment"]["ops"]["logits"] = 1;
  const Plan bad = Plan::from_json(j, "a.json");
  EXPECT_NE(plan_error([&] {
              (void)lower(gpt2.graph(), gpt2.config(), bad, 0);
            }).find("assignment.ops.logits: provider 1 ('remote:127.0.0.1:7001') cannot run"),
            std::string::npos);
  // Unknown and missing ops.
  j = plan.to_json();
  j["assignment"]["ops"]["blk.9.q"] = 0;
  EXPECT_NE(plan_error([&] {
              (void)lower(gpt2.graph(), gpt2.config(), Plan::from_json(j, "a.json"), 0);
            }).find("the model has no op 'blk.9.q'"),
            std::string::npos);
  j = plan.to_json();
  j["assignment"]["ops"].erase("logits");
  EXPECT_NE(plan_error([&] {
              (void)lower(gpt2.graph(), gpt2.config(), Plan::from_json(j, "a.json"), 0);
            }).find("op 'logits' has no provider"),
            std::string::npos);
  // Malformed assignment fields.
  j = plan.to_json();
  j["assignment"]["ops"]["logits"] = 5;
  EXPECT_NE(
      plan_error([&] { (void)Plan::from_json(j, "a.json"); }).find("ops.logits: provider 5 of 2"),
      std::string::npos);
  j = plan.to_json();
  j["assignment"]["providers"] = nlohmann::json::array();
  EXPECT_NE(plan_error([&] { (void)Plan::from_json(j, "a.json"); }).find("empty"),
            std::string::npos);
  j = plan.to_json();
  j["devices"] = {{{"name", "primary"}}};
  EXPECT_NE(plan_error([&] { (void)Plan::from_json(j, "a.json"); }).find("1 devices"),
            std::string::npos);
  // Empty provider list; a remote without the cluster key.
  EXPECT_NE(plan_error([&] { (void)assign::plan_assignment(gpt2, {}, 8); }).find("empty"),
            std::string::npos);
  EXPECT_NE(plan_error([&] {
              (void)assign::plan_assignment(gpt2, providers, 8);
            }).find("needs the cluster key"),
            std::string::npos);
  EXPECT_NE(plan_error([&] {
              (void)assign::plan_assignment(gpt2, assign::parse_providers("cpuN"), 0);
            }).find("--prompt-len 0"),
            std::string::npos);
}

}  // namespace
}  // namespace huddle
