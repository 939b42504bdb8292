// Every strategy on 2, 3 and 4 devices with uneven shares gives the single-device answer.
// Devices are threads joined by the in-process transport; the programs, collectives and session
// protocol are the ones the TCP workers run.
#include "core/error.h"
#include "io/npy.h"
#include "model/model.h"
#include "net/inproc_transport.h"
#include "plan/lowering.h"
#include "planner/strategies.h"
#include "reference_generation.h"
#include "runtime/executor.h"
#include "runtime/generate.h"
#include "runtime/in_process_cluster.h"
#include "runtime/session.h"
#include "strategy_case.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <exception>
#include <thread>

namespace huddle {
namespace {

using Case = testing::StrategyCase;
using testing::case_name;

class Distributed : public ::testing::TestWithParam<Case> {};

TEST_P(Distributed, MatchesSingleDeviceReference) {
  const Case& c = GetParam();
  const Model model = Model::load(testing::fixture_model(c.model));
  std::vector<std::string> devices;
  for (std::size_t i = 0; i < c.shares.size(); ++i) devices.push_back("dev" + std::to_string(i));
  const Plan plan = make_plan(c.strategy, model.config(), devices, c.shares);
  plan.validate(model.config(), "test plan");

  const std::string stem = "references/" + c.model + ".16";
  const auto ids = testing::read_ids(testing::fixture(stem + ".ids.json"));
  const Tensor reference = io::read_npy(testing::fixture(stem + ".npy"));
  Tensor out;
  run_in_process(model, plan, [&](StepRunner& runner) { out = runner.forward(ids, true).clone(); });
  ASSERT_EQ(out.shape(), reference.shape());
  EXPECT_LE(testing::relative_error(out, reference), 1e-4);

  if (!model.config().causal) return;
  testing::expect_reference_greedy(model, plan, c.model);
}

// Galaxy's gathers in chunks (Plan::gather_chunks): the linears run on each chunk of rows as it
// lands, down to one row per chunk, and the answer stays the single-device one.
TEST(DistributedChunks, GalaxyWithChunkedGathersMatchesTheReference) {
  for (const std::string model_name : {"gpt2-tiny", "llama-tiny"}) {
    const Model model = Model::load(testing::fixture_model(model_name));
    const std::string stem = "references/" + model_name + ".16";
    const auto ids = testing::read_ids(testing::fixture(stem + ".ids.json"));
    const Tensor reference = io::read_npy(testing::fixture(stem + ".npy"));
    for (const std::vector<double>& shares :
         std::vector<std::vector<double>>{{5, 3, 1}, {4, 1, 2, 3}}) {
      for (const int chunks : {3, Plan::kMaxGatherChunks}) {
        std::vector<std::string> devices;
        for (std::size_t i = 0; i < shares.size(); ++i) devices.push_back("d" + std::to_string(i));
        Plan plan = make_plan("galaxy", model.config(), devices, shares);
        plan.gather_chunks = chunks;
        plan.validate(model.config(), "test plan");
        Tensor out;
        run_in_process(model, plan,
                       [&](StepRunner& runner) { out = runner.forward(ids, true).clone(); });
        ASSERT_EQ(out.shape(), reference.shape());
        EXPECT_LE(testing::relative_error(out, reference), 1e-4)
            << model_name << " " << shares.size() << " devices, " << chunks << " chunks";
        testing::expect_reference_greedy(model, plan, model_name);
      }
    }
  }
}

TEST(DistributedChunks, GatherChunksRoundTripThroughJsonAndOutOfRangeCountsAreRefused) {
  const Model model = Model::load(testing::fixture_model("gpt2-tiny"));
  Plan plan = make_plan("galaxy", model.config(), {"a", "b"}, {1, 1});
  EXPECT_FALSE(plan.to_json().contains("gather_chunks"));  // plans without it read as before
  plan.gather_chunks = 8;
  nlohmann::json j = plan.to_json();
  EXPECT_EQ(j["gather_chunks"], 8);
  EXPECT_EQ(Plan::from_json(j, "p.json").gather_chunks, 8);
  for (const int bad : {0, -1, Plan::kMaxGatherChunks + 1}) {
    j["gather_chunks"] = bad;
    try {
      Plan::from_json(j, "p.json");
      ADD_FAILURE() << bad << " chunks accepted";
    } catch (const PlanError& e) {
      EXPECT_NE(std::string(e.what()).find("p.json: gather_chunks"), std::string::npos) << e.what();
    }
  }
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const std::string model : {"gpt2-tiny", "bert-tiny", "llama-tiny"}) {
    for (const std::string strategy : {"megatron", "sp", "galaxy"}) {
      for (const std::vector<double>& shares :
           std::vector<std::vector<double>>{{5, 3}, {5, 3, 1}, {4, 1, 2, 3}}) {
        cases.push_back({model, strategy, shares});
      }
    }
    cases.push_back({model, "galaxy", {1}});
    cases.push_back({model, "local", {1, 1}});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Strategies, Distributed, ::testing::ValuesIn(all_cases()),
                         [](const auto& p) { return case_name(p.param); });

}  // namespace
}  // namespace huddle
