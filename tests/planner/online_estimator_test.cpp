#include "planner/online_estimator.h"

#include "model/model.h"
#include "planner/planners.h"
#include "planner/strategies.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cmath>

namespace huddle {
namespace {

class OnlineEstimatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = std::make_unique<Model>(Model::load(testing::fixture_model("gpt2-tiny")));
    cost_ = std::make_unique<CostModel>(model_->config(), model_->graph());
    cluster_ = ClusterSpec::uniform({{"A", 10, 4'000'000'000}, {"B", 10, 4'000'000'000}},
                                    LinkSpec{1e9, 1e-4});
    plan_ = make_plan("galaxy", model_->config(), {"A", "B"}, {1, 1});
  }

  // What each device would report if it really ran at `true_gflops`.
  std::vector<DeviceObservation> observations(const std::vector<double>& true_gflops) const {
    std::vector<DevicePrediction> predicted;
    cost_->simulate_step(plan_, cluster_, 16, 16, &predicted);
    std::vector<DeviceObservation> out;
    for (std::size_t d = 0; d < predicted.size(); ++d)
      out.push_back({predicted[d].compute_s * 10 / true_gflops[d], 0, 0});
    return out;
  }

  std::unique_ptr<Model> model_;
  std::unique_ptr<CostModel> cost_;
  ClusterSpec cluster_;
  Plan plan_;
};

TEST_F(OnlineEstimatorTest, ConvergesToTheMeasuredSpeeds) {
  OnlineEstimator estimate(*cost_, cluster_, 0.5);
  const auto seen = observations({10, 5});  // B runs at half its profiled speed
  estimate.observe(plan_, 16, 16, seen);
  EXPECT_NEAR(estimate.speed_factor(0), 1.0, 1e-9);
  EXPECT_NEAR(estimate.speed_factor(1), std::sqrt(0.5), 1e-9);  // halfway, in log space
  for (int i = 0; i < 30; ++i) estimate.observe(plan_, 16, 16, observations({10, 5}));
  EXPECT_NEAR(estimate.speed_factor(1), 0.5, 1e-6);
  EXPECT_NEAR(estimate.cluster().device(1).speed(BlockType::Mlp), 5.0, 1e-5);
  EXPECT_EQ(estimate.steps_observed(), 31);
}

// A step many times longer than predicted is a stall (a stopped process) and teaches no speed;
// a second one in a row does, as a device that really got that much slower.
TEST_F(OnlineEstimatorTest, OneStallTeachesNoSpeedTwoInARowDo) {
  OnlineEstimator estimate(*cost_, cluster_, 1.0);  // trust each step fully
  const double predicted = cost_->simulate_step(plan_, cluster_, 16, 16, nullptr);
  auto seen = observations({10, 1});  // B computed 10x slower than believed
  for (DeviceObservation& d : seen) d.wall_s = 10 * predicted;
  EXPECT_FALSE(estimate.observe(plan_, 16, 16, seen));
  EXPECT_EQ(estimate.speed_factor(1), 1.0);
  EXPECT_TRUE(estimate.observe(plan_, 16, 16, seen));
  EXPECT_NEAR(estimate.speed_factor(1), 0.1, 1e-6);
  // A step within the factor is timed at once, after a stall or not.
  seen = observations({10, 5});
  for (DeviceObservation& d : seen) d.wall_s = predicted;
  EXPECT_TRUE(estimate.observe(plan_, 16, 16, seen));
  EXPECT_NEAR(estimate.speed_factor(1), 0.5, 1e-6);
}

TEST_F(OnlineEstimatorTest, TooShortStepsTeachNothingAndMemoryFollowsReports) {
  OnlineEstimator estimate(*cost_, cluster_);
  auto seen = observations({10, 5});
  seen[1].compute_s = 1e-6;  // below the timer-noise floor
  seen[1].free_memory_bytes = 1'000'000'000;
  seen[1].held_bytes = 500'000'000;
  estimate.observe(plan_, 16, 16, seen);
  EXPECT_EQ(estimate.speed_factor(1), 1.0);
  // Held plus free, less the headroom kept for the rest of the device (5% of 4 GB).
  EXPECT_EQ(estimate.cluster().device(1).memory_bytes, 1'300'000'000);
  EXPECT_EQ(estimate.cluster().device(0).memory_bytes, 4'000'000'000);
}

// A device under a CPU quota computes in bursts and stops: its op times say little. Its speed
// follows its quota instead (its share of the CPU over the share it had when first seen), and op
// times teach nothing while the quota holds it below its threads' CPU.
TEST_F(OnlineEstimatorTest, ACutQuotaSlowsTheDeviceWhateverItsOpTimesSay) {
  OnlineEstimator estimate(*cost_, cluster_, 1.0);
  auto seen = observations({10, 10});
  seen[0].cpu_share = 1;    // A: no quota
  seen[1].cpu_share = 0.6;  // B: 0.6 of a core for its one thread, as profiled
  estimate.observe(plan_, 16, 16, seen);
  EXPECT_DOUBLE_EQ(estimate.speed_factor(1), 1.0);
  // The quota is cut to 0.1 core; B's ops happen to run between its stops (timed at 3x its
  // profiled speed), and a decode step (memory and quota only) shows the cut too.
  seen = observations({10, 30});
  seen[0].cpu_share = 1;
  seen[1].cpu_share = 0.1;
  estimate.observe_resources(plan_, seen);
  EXPECT_NEAR(estimate.speed_factor(1), 0.1 / 0.6, 1e-12);
  estimate.observe(plan_, 16, 16, seen);
  EXPECT_NEAR(estimate.speed_factor(1), 0.1 / 0.6, 1e-12);
  EXPECT_NEAR(estimate.cluster().device(1).speed(BlockType::Mlp), 10 * 0.1 / 0.6, 1e-9);
  EXPECT_DOUBLE_EQ(estimate.speed_factor(0), 1.0);
  // The quota returns past B's one thread: timed again, what it measures is its speed.
  seen = observations({10, 5});
  seen[0].cpu_share = 1;
  seen[1].cpu_share = 1;
  estimate.observe(plan_, 16, 16, seen);
  EXPECT_NEAR(estimate.speed_factor(1), 0.5, 1e-9);
  ReplanAdvice advice = advise_replan(*cost_, estimate, plan_, "galaxy", 16, 0.1);
  EXPECT_TRUE(advice.reason.find("B computes at") != std::string::npos) << advice.reason;
}

// The share a device was profiled at is the reference: a quota cut between the profile and the
// first step shows from that step on.
TEST_F(OnlineEstimatorTest, TheQuotaIsComparedWithTheProfiles) {
  ClusterSpec profiled = cluster_;
  profiled.mutable_device(1).quota_share = 0.6;
  OnlineEstimator estimate(*cost_, profiled, 1.0);
  auto seen = observations({10, 10});
  seen[0].cpu_share = 1;
  seen[1].cpu_share = 0.1;
  estimate.observe_resources(plan_, seen);
  EXPECT_NEAR(estimate.speed_factor(1), 0.1 / 0.6, 1e-12);
  EXPECT_DOUBLE_EQ(estimate.speed_factor(0), 1.0);
}

TEST_F(OnlineEstimatorTest, AdvisesReplanningOnlyPastTheThreshold) {
  OnlineEstimator estimate(*cost_, cluster_, 1.0);  // trust each step fully
  ReplanAdvice advice = advise_replan(*cost_, estimate, plan_, "galaxy", 16, 0.1);
  EXPECT_FALSE(advice.replan) << advice.reason;
  EXPECT_TRUE(advice.reason.find("within 10%") != std::string::npos) << advice.reason;

  estimate.observe(plan_, 16, 16, observations({10, 2.5}));  // B is 4x slower than believed
  advice = advise_replan(*cost_, estimate, plan_, "galaxy", 16, 0.1);
  EXPECT_TRUE(advice.replan) << advice.reason;
  ASSERT_TRUE(advice.plan.has_value());
  EXPECT_LT(advice.proposed_s, advice.current_s);
  EXPECT_TRUE(advice.reason.find("B computes at 0.25x") != std::string::npos) << advice.reason;
  // The new plan gives B fewer heads than the even one.
  const LayerPlan& layer = advice.plan->layers.front();
  EXPECT_LT(layer.heads[1].second - layer.heads[1].first,
            layer.heads[0].second - layer.heads[0].first);
  // A huge threshold keeps the plan.
  EXPECT_FALSE(advise_replan(*cost_, estimate, plan_, "galaxy", 16, 100.0).replan);
}

// Hepti's mode switch: when a device's free memory falls below what the weight-stationary plan
// needs of it, re-planning is advised whatever the speed, to a 1d-tiled plan that fits; once the
// memory is back, back to weight-stationary.
TEST_F(OnlineEstimatorTest, MemoryShortageSwitchesHeptiModeAndBack) {
  const PlanResult ws = run_planner("hepti", PlanRequest{*cost_, cluster_, 16, std::nullopt});
  ASSERT_TRUE(ws.plan.has_value());
  const Plan ws_plan = ws.runnable();
  ASSERT_EQ(memory_mode(ws_plan), "weight-stationary");
  PlanRequest tiled{*cost_, cluster_, 16, std::nullopt};
  tiled.mode = "1d";
  const Plan tiled_plan = run_planner("hepti", tiled).runnable();
  ASSERT_EQ(memory_mode(tiled_plan), "1d-tiled");
  const auto need = [&](const Plan& plan) {
    return cost_->predict(plan, cluster_, 16).devices[1].memory.total();
  };
  const std::int64_t ws_need = need(ws_plan), tiled_need = need(tiled_plan);
  ASSERT_LT(tiled_need, ws_need);

  OnlineEstimator estimate(*cost_, cluster_);
  std::vector<DeviceObservation> seen(2);
  // B holds as much as the headroom kept free on it (5% of its 4 GB): its budget is its free
  // memory.
  seen[1].held_bytes = static_cast<std::int64_t>(OnlineEstimator::kMemoryHeadroom * 4e9);
  // B's free memory shrinks to what the even 1d-tiled plan needs of it: below any
  // weight-stationary split (B would hold every MLP weight).
  seen[1].free_memory_bytes = tiled_need + tiled_need / 100;
  estimate.observe_resources(ws_plan, seen);
  ReplanAdvice advice = advise_replan(*cost_, estimate, ws_plan, "hepti", 16, 0.1);
  EXPECT_TRUE(advice.replan) << advice.reason;
  EXPECT_TRUE(advice.memory) << advice.reason;
  EXPECT_EQ(advice.cause, "memory");
  EXPECT_EQ(advice.mode_before, "weight-stationary");
  EXPECT_EQ(advice.mode_after, "1d-tiled") << advice.reason;
  EXPECT_NE(advice.reason.find("mode weight-stationary -> 1d-tiled"), std::string::npos)
      << advice.reason;
  EXPECT_NE(advice.reason.find("B has"), std::string::npos) << advice.reason;
  ASSERT_TRUE(advice.plan.has_value());
  ASSERT_EQ(advice.plan->num_devices(), 2);
  EXPECT_LE(
      cost_->predict(*advice.plan, estimate.cluster(), 16).first_over_budget(estimate.cluster()),
      -1);

  // Memory returns: back to weight-stationary, though the speeds did not change.
  seen[1].free_memory_bytes = 4'000'000'000;
  estimate.observe_resources(*advice.plan, seen);
  const ReplanAdvice back = advise_replan(*cost_, estimate, *advice.plan, "hepti", 16, 0.1);
  EXPECT_TRUE(back.replan) << back.reason;
  EXPECT_FALSE(back.memory);
  EXPECT_EQ(back.cause, "memory returned");
  EXPECT_EQ(back.mode_after, "weight-stationary") << back.reason;
  // And with memory plentiful and the plan weight-stationary, nothing to do.
  EXPECT_FALSE(advise_replan(*cost_, estimate, *back.plan, "hepti", 16, 0.1).replan);
}

}  // namespace
}  // namespace huddle
