// Pipeline plans (HPipe) give the single-device answer: GPT-2 and Llama on 2, 3 and 4 devices
// with uneven unit splits, prompts of 1, 7 and 40 tokens, equal and random slicings, stages in
// any device order (the primary first, in the middle, last or in no stage); BERT pipelined
// without slicing. Devices are threads joined by the in-process transport, running the same
// programs and session protocol as TCP workers.
#include "core/error.h"
#include "io/npy.h"
#include "model/model.h"
#include "pipeline_references.h"
#include "plan/lowering.h"
#include "planner/strategies.h"
#include "reference_generation.h"
#include "runtime/executor.h"
#include "runtime/generate.h"
#include "runtime/in_process_cluster.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <random>

namespace huddle {
namespace {

std::vector<std::string> device_names(std::size_t n) {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < n; ++i) names.push_back("dev" + std::to_string(i));
  return names;
}

using testing::random_slice_table;
using testing::reference_ids;
using testing::reference_rows;

struct Case {
  std::string model;
  std::vector<double> shares;  // units in proportion, stages in device order
};

class PipelinePlans : public ::testing::TestWithParam<Case> {};

TEST_P(PipelinePlans, LogitsAndGreedyMatchTheSingleDeviceAnswer) {
  const Case& c = GetParam();
  const Model model = Model::load(testing::fixture_model(c.model));
  const Plan plan = make_plan("pipeline", model.config(), device_names(c.shares.size()), c.shares);
  plan.validate(model.config(), "test plan");
  ASSERT_TRUE(plan.pipelined());
  ASSERT_EQ(plan.pipeline->stages.size(), c.shares.size());
  for (const std::int64_t n : {1, 7, 40}) {
    const auto ids = reference_ids(c.model, n);
    Tensor out;
    run_in_process(model, plan,
                   [&](StepRunner& runner) { out = runner.forward(ids, true).clone(); });
    const Tensor reference = reference_rows(c.model, n);
    ASSERT_EQ(out.shape(), reference.shape()) << n << " tokens";
    EXPECT_LE(testing::relative_error(out, reference), 1e-4) << n << " tokens";
  }
  // Greedy generation: 16 tokens after prompts of 1, 7 and 40 tokens, each decode step one
  // token through every stage, against the single device.
  for (const std::int64_t n : {1, 7, 40}) {
    const auto prompt = reference_ids(c.model, n);
    GenerationOptions options;
    options.n_predict = 16;
    Executor single(model.graph(), model.weights(), model.config().max_positions);
    const GenerationResult expected = generate(single, prompt, options);
    GenerationResult got;
    run_in_process(model, plan,
                   [&](StepRunner& runner) { got = generate(runner, prompt, options); });
    EXPECT_EQ(got.generated, expected.generated) << n << " tokens";
  }
  testing::expect_reference_greedy(model, plan, c.model);
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const std::string model : {"gpt2-tiny", "llama-tiny"}) {
    for (const std::vector<double>& shares :
         std::vector<std::vector<double>>{{5, 3}, {5, 3, 1}, {4, 1, 2, 3}, {1, 1}}) {
      cases.push_back({model, shares});
    }
  }
  return cases;
}

std::string case_name(const Case& c) {
  std::string name = c.model;
  for (double s : c.shares) {
    name += '_';
    name += std::to_string(static_cast<int>(s));
  }
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

INSTANTIATE_TEST_SUITE_P(Shares, PipelinePlans, ::testing::ValuesIn(all_cases()),
                         [](const auto& p) { return case_name(p.param); });

// Stages in every placement of the primary, with random uneven slicings of every step.
struct OrderCase {
  std::string model;
  int devices;
  std::vector<int> stage_devices;
  std::vector<Range> stage_units;  // over the tiny models' 8 units (3 layers)
};

class PipelineOrders : public ::testing::TestWithParam<OrderCase> {};

TEST_P(PipelineOrders, RandomSlicingsMatchTheSingleDeviceAnswer) {
  const OrderCase& c = GetParam();
  const Model model = Model::load(testing::fixture_model(c.model));
  const Plan plan =
      pipeline_plan("test", model.config(), device_names(static_cast<std::size_t>(c.devices)),
                    c.stage_devices, c.stage_units, random_slice_table(64, 7));
  plan.validate(model.config(), "test plan");
  for (const std::int64_t n : {1, 7, 40}) {
    const auto ids = reference_ids(c.model, n);
    Tensor out;
    run_in_process(model, plan,
                   [&](StepRunner& runner) { out = runner.forward(ids, true).clone(); });
    EXPECT_LE(testing::relative_error(out, reference_rows(c.model, n)), 1e-4) << n << " tokens";
  }
  testing::expect_reference_greedy(model, plan, c.model);
}

INSTANTIATE_TEST_SUITE_P(
    Placements, PipelineOrders,
    ::testing::Values(
        // primary in the middle: stage order 2 -> 0 -> 1
        OrderCase{"gpt2-tiny", 3, {2, 0, 1}, {{0, 2}, {2, 5}, {5, 8}}},
        // primary last (it computes the outputs itself)
        OrderCase{"llama-tiny", 3, {1, 2, 0}, {{0, 1}, {1, 7}, {7, 8}}},
        // primary in no stage: it only sends ids and receives outputs
        OrderCase{"llama-tiny", 3, {1, 2}, {{0, 4}, {4, 8}}},
        // a stage of one unit at each end
        OrderCase{"gpt2-tiny", 4, {0, 1, 2, 3}, {{0, 1}, {1, 4}, {4, 7}, {7, 8}}}),
    [](const auto& p) { return std::string("case") + std::to_string(p.index); });

// BERT attends in both directions: pipelined whole (unsliced), it still gives the reference.
TEST(PipelineBert, UnslicedStagesMatchTheReference) {
  const Model model = Model::load(testing::fixture_model("bert-tiny"));
  const auto ids = testing::read_ids(testing::fixture("references/bert-tiny.16.ids.json"));
  const Tensor reference = io::read_npy(testing::fixture("references/bert-tiny.16.npy"));
  for (const std::vector<double>& shares :
       std::vector<std::vector<double>>{{5, 3}, {5, 3, 1}, {4, 1, 2, 3}}) {
    const Plan plan = make_plan("pipeline", model.config(), device_names(shares.size()), shares);
    plan.validate(model.config(), "test plan");
    ASSERT_FALSE(plan.pipeline->sliced);
    Tensor out;
    run_in_process(model, plan,
                   [&](StepRunner& runner) { out = runner.forward(ids, true).clone(); });
    ASSERT_EQ(out.shape(), reference.shape());
    EXPECT_LE(testing::relative_error(out, reference), 1e-4) << shares.size() << " devices";
  }
}

// A step longer than the slice table, or than the context, is refused before any device starts
// it: the same session then serves the next request with the single-device answer.
TEST(PipelineSession, StepsNoDeviceCanRunAreRefusedAndTheSessionGoesOn) {
  const Model model = Model::load(testing::fixture_model("gpt2-tiny"));
  auto table = random_slice_table(20, 3);
  const Plan plan = pipeline_plan("test", model.config(), device_names(3), {0, 1, 2},
                                  {{0, 3}, {3, 6}, {6, 8}}, table);
  const auto ids = reference_ids("gpt2-tiny", 40);
  run_in_process(model, plan, [&](StepRunner& runner) {
    EXPECT_THROW(runner.forward(ids, true), InputError);  // 40 > the table's 20
    EXPECT_EQ(runner.position(), 0);
    const std::vector<std::int32_t> first(ids.begin(), ids.begin() + 20);
    const Tensor out = runner.forward(first, true).clone();
    EXPECT_LE(testing::relative_error(out, reference_rows("gpt2-tiny", 20)), 1e-4);
    ASSERT_EQ(model.config().max_positions, 128);
    const std::vector<std::int32_t> more(20, 1);
    for (int i = 0; i < 5; ++i) runner.forward(more, false);  // positions 20..120
    EXPECT_THROW(runner.forward(more, false), InputError);    // 140 > the context of 128
    EXPECT_EQ(runner.position(), 120);
    EXPECT_NO_THROW(runner.forward(std::vector<std::int32_t>(8, 1), false));  // exactly 128
  });
}

// Each device holds only its stage's weights: together they hold the model's once.
TEST(PipelineLowering, StagesHoldDisjointWeights) {
  const Model model = Model::load(testing::fixture_model("llama-tiny"));
  const Plan plan = make_plan("pipeline", model.config(), device_names(3), {2, 1, 1});
  const Program whole =
      lower(model.graph(), model.config(), make_plan("local", model.config(), {"a"}, {}), 0);
  std::size_t total = 0;
  for (int r = 0; r < 3; ++r) {
    const Program p = lower(model.graph(), model.config(), plan, r);
    const std::size_t bytes = program_weight_bytes(p);
    EXPECT_GT(bytes, 0u) << r;
    EXPECT_LT(bytes, program_weight_bytes(whole)) << r;
    total += bytes;
  }
  EXPECT_EQ(total, program_weight_bytes(whole));
}

}  // namespace
}  // namespace huddle
