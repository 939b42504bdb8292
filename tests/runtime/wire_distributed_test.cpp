// Activations on the wire in f16, bf16 and int8 (Plan::wire, core/wire_format.h): every
// strategy family (token and head splits, a pipeline) on 3 devices with uneven shares stays
// within the tolerance docs/distributed.md states for the format against the float64-checked
// single-device reference, and generates the reference's greedy ids. The f32 default is the
// exact path every other distributed test covers.
#include "core/error.h"
#include "io/npy.h"
#include "model/model.h"
#include "plan/lowering.h"
#include "planner/strategies.h"
#include "reference_generation.h"
#include "runtime/in_process_cluster.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>

namespace huddle {
namespace {

struct WireCase {
  std::string model;
  std::string strategy;
  WireFormat wire;
};

// Largest |logit error| / max |logit| allowed, per format (docs/distributed.md).
double wire_tolerance(WireFormat wire) {
  switch (wire) {
    case WireFormat::F16:
      return 2e-3;
    case WireFormat::BF16:
      return 1e-2;
    default:
      return 4e-2;
  }
}

class WireDistributed : public ::testing::TestWithParam<WireCase> {};

TEST_P(WireDistributed, StaysWithinTheFormatsToleranceAndKeepsTheGreedyIds) {
  const WireCase& c = GetParam();
  const Model model = Model::load(testing::fixture_model(c.model));
  Plan plan = make_plan(c.strategy, model.config(), {"dev0", "dev1", "dev2"}, {5, 3, 1});
  plan.wire = c.wire;
  plan.validate(model.config(), "test plan");

  const std::string stem = "references/" + c.model + ".16";
  const auto ids = testing::read_ids(testing::fixture(stem + ".ids.json"));
  const Tensor reference = io::read_npy(testing::fixture(stem + ".npy"));
  Tensor out;
  run_in_process(model, plan, [&](StepRunner& runner) { out = runner.forward(ids, true).clone(); });
  ASSERT_EQ(out.shape(), reference.shape());
  const double error = testing::relative_error(out, reference);
  EXPECT_LE(error, wire_tolerance(c.wire));
  EXPECT_GT(error, 0.0) << "a lossy wire format left the logits exact: was it used?";
  if (model.config().causal) testing::expect_reference_greedy(model, plan, c.model);
}

std::vector<WireCase> wire_cases() {
  std::vector<WireCase> cases;
  for (const std::string model : {"gpt2-tiny", "bert-tiny", "llama-tiny"}) {
    for (const std::string strategy : {"galaxy", "megatron", "pipeline"}) {
      for (WireFormat wire : {WireFormat::F16, WireFormat::BF16, WireFormat::Int8})
        cases.push_back({model, strategy, wire});
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Formats, WireDistributed, ::testing::ValuesIn(wire_cases()),
                         [](const auto& p) {
                           std::string name = p.param.model + "_" + p.param.strategy + "_" +
                                              std::string(wire_format_name(p.param.wire));
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(WirePlan, TheFormatRoundTripsThroughJsonAndAnUnknownOneIsRefused) {
  const Model model = Model::load(testing::fixture_model("gpt2-tiny"));
  Plan plan = make_plan("galaxy", model.config(), {"a", "b"}, {1, 1});
  EXPECT_FALSE(plan.to_json().contains("wire"));  // f32 plans read as before
  plan.wire = WireFormat::Int8;
  nlohmann::json j = plan.to_json();
  EXPECT_EQ(j["wire"], "int8");
  EXPECT_EQ(Plan::from_json(j, "p.json").wire, WireFormat::Int8);
  j["wire"] = "fp8";
  try {
    Plan::from_json(j, "p.json");
    ADD_FAILURE() << "an unknown wire format was accepted";
  } catch (const PlanError& e) {
    EXPECT_NE(std::string(e.what()).find("wire"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("f32, f16, bf16, int8"), std::string::npos) << e.what();
  }
}

TEST(WirePlan, TheModelsOutputsTravelExactly) {
  const Model model = Model::load(testing::fixture_model("llama-tiny"));
  Plan plan = make_plan("pipeline", model.config(), {"a", "b"}, {1, 1});
  plan.wire = WireFormat::F16;
  int lossy = 0;
  for (int rank = 0; rank < 2; ++rank) {
    const Program p = lower(model.graph(), model.config(), plan, rank);
    for (const Op& op : p.graph.ops()) {
      if (op.kind != OpKind::PipeSend) continue;
      const bool output = op.name.find("@output") != std::string::npos;
      EXPECT_EQ(op.attrs.wire, output ? WireFormat::F32 : WireFormat::F16) << op.name;
      lossy += output ? 0 : 1;
    }
  }
  EXPECT_GT(lossy, 0);
}

}  // namespace
}  // namespace huddle
