// The Llama-family fixtures (tests/fixtures/make_arch_fixtures.py) under every strategy give the
// single-device answer: megatron (heads and MLP columns cut inside Phi-3's fused tensors, GQA
// groups split), sp and galaxy (token-split attention with local queries: the sliding window
// and per-position rope frequencies at absolute positions), pipelines (prompt slices over the KV
// cache) and 2D tiles. Devices are threads joined by the in-process transport, running the
// programs and session protocol TCP workers run. Prefill logits within 1e-4 x max|ref| of the
// float64 reference with identical argmax; greedy ids identical.
#include "io/npy.h"
#include "model/model.h"
#include "planner/hepti_planner.h"
#include "planner/strategies.h"
#include "reference_generation.h"
#include "runtime/in_process_cluster.h"
#include "strategy_case.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

namespace huddle {
namespace {

using ArchCase = testing::StrategyCase;
using testing::case_name;

Plan plan_for(const Model& model, const ArchCase& c) {
  std::vector<std::string> devices;
  for (std::size_t i = 0; i < c.shares.size(); ++i) devices.push_back("dev" + std::to_string(i));
  Plan plan = c.strategy == "tiled-2d"
                  ? tiled_2d_plan(model.config(), devices, Grid{2, 2}, c.shares)
                  : make_plan(c.strategy, model.config(), devices, c.shares);
  plan.validate(model.config(), "test plan");
  return plan;
}

class ArchDistributed : public ::testing::TestWithParam<ArchCase> {};

TEST_P(ArchDistributed, PrefillAndGreedyMatchTheReference) {
  const ArchCase& c = GetParam();
  const Model model = Model::load(testing::fixture_model(c.model));
  const Plan plan = plan_for(model, c);
  const std::string stem = "references/" + c.model + ".40";
  const auto ids = testing::read_ids(testing::fixture(stem + ".ids.json"));
  const Tensor reference = io::read_npy(testing::fixture(stem + ".npy"));
  Tensor out;
  run_in_process(model, plan, [&](StepRunner& runner) { out = runner.forward(ids, true).clone(); });
  ASSERT_EQ(out.shape(), reference.shape());
  EXPECT_LE(testing::relative_error(out, reference), 1e-4);
  EXPECT_EQ(testing::row_argmax(out), testing::row_argmax(reference));
  testing::expect_reference_greedy(model, plan, c.model);
}

std::vector<ArchCase> arch_cases() {
  std::vector<ArchCase> cases;
  for (const std::string model : {"llama3-tiny", "llama-linear-tiny", "llama-dynamic-tiny",
                                  "qwen2-tiny", "mistral-tiny", "phi3-tiny"}) {
    cases.push_back({model, "megatron", {5, 3, 1}});
    cases.push_back({model, "sp", {4, 1, 2, 3}});
    cases.push_back({model, "galaxy", {5, 3, 1}});
    cases.push_back({model, "galaxy", {4, 1, 2, 3}});
    cases.push_back({model, "pipeline", {5, 3, 1}});
    cases.push_back({model, "pipeline", {4, 1, 2, 3}});
    cases.push_back({model, "tiled-2d", {5, 3, 1, 2}});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Strategies, ArchDistributed, ::testing::ValuesIn(arch_cases()),
                         [](const auto& p) { return case_name(p.param); });

}  // namespace
}  // namespace huddle
