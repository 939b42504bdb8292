// Re-planning after lost devices (session/survivor_plan.h): the same family on the devices left,
// the primary always among them, and a clear error when the model fits on none.
#include "session/survivor_plan.h"
#include "core/error.h"
#include "planner/planners.h"
#include "planner/strategies.h"
#include "test_util.h"

#include <gtest/gtest.h>

namespace huddle {
namespace {

const Model& gpt2() {
  static const Model model = Model::load(testing::fixture_model("gpt2-tiny"));
  return model;
}

Planned fixed(const std::string& strategy, std::vector<double> shares) {
  Planned p;
  p.all_workers = {"10.0.0.1:7001", "10.0.0.2:7001", "10.0.0.3:7001"};
  std::vector<std::string> devices = {"primary"};
  devices.insert(devices.end(), p.all_workers.begin(), p.all_workers.end());
  p.shares = shares;
  p.plan = make_plan(strategy, gpt2().config(), devices, shares);
  return p;
}

ClusterSpec cluster(std::int64_t memory_bytes) {
  std::vector<DeviceSpec> devices;
  for (const std::string name : {"P", "A", "B", "C"}) {
    DeviceSpec d;
    d.name = name;
    d.gflops = 10;
    d.memory_bytes = memory_bytes;
    devices.push_back(d);
  }
  return ClusterSpec::uniform(devices, LinkSpec{1e9, 5e-4});
}

TEST(SurvivorPlan, FixedStrategyKeepsItsFamilyAndTheOtherShares) {
  for (const std::string strategy : {"galaxy", "megatron", "sp", "pipeline", "gpipe"}) {
    const Planned before = fixed(strategy, {5, 3, 2, 1});
    const Planned after = plan_without(before, {"10.0.0.2:7001"}, gpt2(), 16);
    EXPECT_EQ(after.plan.strategy, strategy);
    EXPECT_EQ(after.plan.devices,
              (std::vector<std::string>{"primary", "10.0.0.1:7001", "10.0.0.3:7001"}))
        << strategy;
    EXPECT_EQ(after.shares, (std::vector<double>{5, 3, 1})) << strategy;
    EXPECT_EQ(plan_workers(after), (std::vector<std::string>{"10.0.0.1:7001", "10.0.0.3:7001"}));
  }
  // Even shares stay even.
  const Planned even = plan_without(fixed("galaxy", {}), {"10.0.0.1:7001"}, gpt2(), 16);
  EXPECT_TRUE(even.shares.empty());
  EXPECT_EQ(even.plan.num_devices(), 3);
}

TEST(SurvivorPlan, ThePrimaryAloneRunsLocal) {
  const Planned before = fixed("galaxy", {});
  const Planned after = plan_without(before, before.all_workers, gpt2(), 16);
  EXPECT_EQ(after.plan.strategy, "local");
  EXPECT_EQ(after.plan.num_devices(), 1);
  EXPECT_TRUE(after.all_workers.empty());
  EXPECT_TRUE(plan_workers(after).empty());
}

TEST(SurvivorPlan, APlannerPlansAgainOnTheClusterWithoutTheLostDevice) {
  Planned before;
  before.all_workers = {"w1:1", "w2:2", "w3:3"};
  before.cluster = cluster(1'000'000'000);
  before.planner = "galaxy";
  const CostModel cost(gpt2().config(), gpt2().graph());
  before.plan = run_planner("galaxy", PlanRequest{cost, *before.cluster, 16, {}}).runnable();
  ASSERT_EQ(before.plan.num_devices(), 4);
  const Planned after = plan_without(before, {"w2:2"}, gpt2(), 16);
  ASSERT_TRUE(after.cluster);
  EXPECT_EQ(device_names(*after.cluster), (std::vector<std::string>{"P", "A", "C"}));
  EXPECT_EQ(after.planner, "galaxy");
  EXPECT_EQ(after.plan.devices, (std::vector<std::string>{"P", "A", "C"}));
  EXPECT_EQ(plan_workers(after), (std::vector<std::string>{"w1:1", "w3:3"}));
}

TEST(SurvivorPlan, NoDeviceLeftThatHoldsTheModelIsAClearError) {
  // Each device holds about a third of gpt2-tiny (2.7 MB): four fit, two do not.
  Planned before;
  before.all_workers = {"w1:1", "w2:2", "w3:3"};
  before.cluster = cluster(1'300'000);
  before.planner = "galaxy";
  before.plan = make_plan("galaxy", gpt2().config(), {"P", "A", "B", "C"}, {});
  try {
    plan_without(before, {"w1:1", "w3:3"}, gpt2(), 16);
    FAIL() << "expected a PlanError";
  } catch (const PlanError& e) {
    const std::string what = e.what();
    EXPECT_TRUE(testing::contains(what, "cannot go on without w1:1, w3:3")) << what;
    EXPECT_TRUE(testing::contains(what, "fit")) << what;
  }
  // The primary alone is checked too.
  EXPECT_THROW(plan_without(before, before.all_workers, gpt2(), 16), PlanError);
}

}  // namespace
}  // namespace huddle
