// Re-planning after lost devices (session/survivor_plan.h): the same family on the devices left,
// the primary always among them, and a clear error when the model fits on none. Re-planning with
// a device that joins: the same family with it, its share from its speed measured next to the
// primary's.
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
  // The chunks its gathers travel in (--gather-chunks) outlive the device.
  Planned chunked = fixed("galaxy", {5, 3, 2, 1});
  chunked.plan.gather_chunks = 4;
  EXPECT_EQ(plan_without(chunked, {"10.0.0.2:7001"}, gpt2(), 16).plan.gather_chunks, 4);
}

TEST(SurvivorPlan, ThePrimaryAloneRunsLocal) {
  const Planned before = fixed("galaxy", {});
  const Planned after = plan_without(before, before.all_workers, gpt2(), 16);
  EXPECT_EQ(after.plan.strategy, "local");
  EXPECT_EQ(after.plan.num_devices(), 1);
  EXPECT_TRUE(after.all_workers.empty());
  EXPECT_TRUE(plan_workers(after).empty());
}

// The galaxy planner's plan of gpt2 on four devices (a primary and three workers) of 1 GB.
Planned galaxy_on_four() {
  Planned planned;
  planned.all_workers = {"w1:1", "w2:2", "w3:3"};
  planned.cluster = cluster(1'000'000'000);
  planned.planner = "galaxy";
  const CostModel cost(gpt2().config(), gpt2().graph());
  planned.plan = run_planner("galaxy", PlanRequest{cost, *planned.cluster, 16, {}}).runnable();
  return planned;
}

TEST(SurvivorPlan, APlannerPlansAgainOnTheClusterWithoutTheLostDevice) {
  Planned before = galaxy_on_four();
  ASSERT_EQ(before.plan.num_devices(), 4);
  const Planned after = plan_without(before, {"w2:2"}, gpt2(), 16);
  ASSERT_TRUE(after.cluster);
  EXPECT_EQ(device_names(*after.cluster), (std::vector<std::string>{"P", "A", "C"}));
  EXPECT_EQ(after.planner, "galaxy");
  EXPECT_EQ(after.plan.devices, (std::vector<std::string>{"P", "A", "C"}));
  EXPECT_EQ(plan_workers(after), (std::vector<std::string>{"w1:1", "w3:3"}));
}

// --gather-chunks outlives a planner's re-plans: on the devices left and with a joiner, where
// the planner would choose its own count, the user's stays (and without it, the planner's).
TEST(SurvivorPlan, TheUsersGatherChunksOutliveAPlannersReplans) {
  Planned before = galaxy_on_four();
  const int planners = plan_without(before, {"w2:2"}, gpt2(), 16).plan.gather_chunks;
  const int users = planners == 7 ? 5 : 7;  // a count the planner does not choose here
  before.gather_chunks = users;
  before.plan.gather_chunks = users;
  const Planned after = plan_without(before, {"w2:2"}, gpt2(), 16);
  EXPECT_EQ(after.plan.gather_chunks, users);
  EXPECT_EQ(after.gather_chunks, users);
  JoinedDevice j;
  j.address = "w4:4";
  j.measured.name = "w4:4";
  j.measured.gflops = 10;
  j.measured.memory_bytes = 1'000'000'000;
  j.primary = j.measured;
  j.link = LinkSpec{1e9, 5e-4};
  EXPECT_EQ(plan_with(after, j, gpt2(), 16).plan.gather_chunks, users);
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

// A joiner measured at `relative` times the primary's speed, with `memory_bytes` free.
JoinedDevice joiner(const std::string& address, double relative, std::int64_t memory_bytes) {
  JoinedDevice j;
  j.address = address;
  j.primary.name = "primary";
  j.primary.gflops = 40;
  j.primary.memory_bytes = 1'000'000'000;
  j.measured.name = address;
  j.measured.gflops = 40 * relative;
  j.measured.memory_bytes = memory_bytes;
  j.link = LinkSpec{1e9, 5e-4};
  return j;
}

// Device d's attention heads in the first layer.
std::int64_t heads_of(const Plan& plan, int d) {
  const Range& r = plan.layers.at(0).heads.at(static_cast<std::size_t>(d));
  return r.second - r.first;
}

// gpt2-tiny has 4 heads: at most 4 devices. Two workers, so that one more fits.
Planned fixed_two(const std::string& strategy, std::vector<double> shares) {
  Planned p;
  p.all_workers = {"10.0.0.1:7001", "10.0.0.2:7001"};
  p.shares = shares;
  p.plan =
      make_plan(strategy, gpt2().config(), {"primary", "10.0.0.1:7001", "10.0.0.2:7001"}, shares);
  return p;
}

TEST(JoinPlan, AFixedStrategyGivesTheJoinerAShareFromItsMeasuredSpeed) {
  for (const std::string strategy : {"galaxy", "megatron", "sp", "pipeline"}) {
    const Planned before = fixed_two(strategy, {4, 2, 2});
    const Planned after = plan_with(before, joiner("10.0.0.9:7001", 0.5, 1 << 30), gpt2(), 16);
    EXPECT_EQ(after.plan.strategy, strategy);
    EXPECT_EQ(after.shares, (std::vector<double>{4, 2, 2, 2})) << strategy;
    ASSERT_EQ(after.plan.num_devices(), 4) << strategy;
    EXPECT_EQ(after.plan.devices.back(), "10.0.0.9:7001");
    EXPECT_EQ(plan_workers(after).back(), "10.0.0.9:7001");
    EXPECT_GT(after.plan.token_shares.back(), 0) << strategy;
  }
  // Even shares stay even, the joiner included.
  const Planned even =
      plan_with(fixed_two("galaxy", {}), joiner("10.0.0.9:7001", 3, 1 << 30), gpt2(), 16);
  EXPECT_TRUE(even.shares.empty());
  ASSERT_EQ(even.plan.num_devices(), 4);
  EXPECT_EQ(heads_of(even.plan, 3), heads_of(even.plan, 1));
}

TEST(JoinPlan, APrimaryThatRanAloneGrowsIntoGalaxy) {
  Planned alone;
  alone.plan = make_plan("local", gpt2().config(), {"primary"}, {});
  const Planned after = plan_with(alone, joiner("10.0.0.9:7001", 1, 1 << 30), gpt2(), 16);
  EXPECT_EQ(after.plan.strategy, "galaxy");
  EXPECT_EQ(after.plan.devices, (std::vector<std::string>{"primary", "10.0.0.9:7001"}));
  EXPECT_EQ(after.all_workers, std::vector<std::string>{"10.0.0.9:7001"});
  EXPECT_GT(heads_of(after.plan, 1), 0);
}

TEST(JoinPlan, APlannerPlansAgainOnTheClusterWithTheJoiner) {
  Planned before;
  before.all_workers = {"w1:1", "w2:2"};
  before.cluster = cluster(1'000'000'000).subset({0, 1, 2});  // 10 GFLOP/s each
  before.planner = "galaxy";
  const CostModel cost(gpt2().config(), gpt2().graph());
  before.plan = run_planner("galaxy", PlanRequest{cost, *before.cluster, 16, {}}).runnable();
  // Measured at 2x this primary's speed: 20 GFLOP/s in the cluster's units.
  const Planned after = plan_with(before, joiner("w3:3", 2, 1'000'000'000), gpt2(), 16);
  ASSERT_TRUE(after.cluster);
  EXPECT_EQ(device_names(*after.cluster), (std::vector<std::string>{"P", "A", "B", "w3:3"}));
  EXPECT_DOUBLE_EQ(after.cluster->device(3).gflops, 20);
  EXPECT_EQ(after.cluster->device(3).memory_bytes, 1'000'000'000);
  EXPECT_EQ(after.planner, "galaxy");
  ASSERT_EQ(after.plan.num_devices(), 4);
  EXPECT_EQ(plan_workers(after), (std::vector<std::string>{"w1:1", "w2:2", "w3:3"}));
  EXPECT_GT(heads_of(after.plan, 3), 0);
}

TEST(JoinPlan, AJoinerNoPlanCanTakeIsRefusedByName) {
  // Every device holds about half of gpt2-tiny; a joiner with 1 KB cannot take its share.
  Planned before;
  before.all_workers = {"w1:1"};
  before.cluster = cluster(1'500'000).subset({0, 1});
  before.planner = "";
  before.shares = {1, 1};
  before.plan = make_plan("galaxy", gpt2().config(), {"P", "A"}, {1, 1});
  try {
    plan_with(before, joiner("w9:9", 1, 1000), gpt2(), 16);
    FAIL() << "expected a PlanError";
  } catch (const PlanError& e) {
    const std::string what = e.what();
    EXPECT_TRUE(testing::contains(what, "cannot admit w9:9")) << what;
    EXPECT_TRUE(testing::contains(what, "fit")) << what;
  }
}

}  // namespace
}  // namespace huddle
