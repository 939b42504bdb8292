// Hybrid HPipe plans (planner/hpipe_islands.h): islands found from the links, a group's unit
// costs, and plan_hpipe choosing tensor-parallel island stages where they are predicted faster
// than every plain pipeline, and not on a uniform cluster.
#include "planner/hpipe_islands.h"

#include "core/error.h"
#include "plan/pipeline_units.h"
#include "planner/hpipe_planner.h"
#include "planner/pipeline_planners.h"
#include "planner_test_util.h"

#include <gtest/gtest.h>

namespace huddle {
namespace {

using testing::paper_model;

DeviceSpec island_device(const std::string& name, double gflops) {
  DeviceSpec d;
  d.name = name;
  d.gflops = d.attention_gflops = d.mlp_gflops = d.connection_gflops = gflops;
  d.memory_bytes = 8000000000;
  return d;
}

// Devices P, A, B, C, D: P alone, {A, B} and {C, D} islands on `inner` bit/s links, every other
// pair on `outer`.
ClusterSpec two_islands(double inner, double outer) {
  ClusterSpec c =
      ClusterSpec::uniform({island_device("P", 10), island_device("A", 20), island_device("B", 20),
                            island_device("C", 20), island_device("D", 20)},
                           {outer, 0.001});
  c.set_link(1, 2, {inner, 20e-6});
  c.set_link(3, 4, {inner, 20e-6});
  return c;
}

TEST(Islands, AreSetsWhoseLinksAreMuchFasterThanTheirWayOut) {
  EXPECT_EQ(find_islands(two_islands(10e9, 100e6)),
            (std::vector<std::vector<int>>{{1, 2}, {3, 4}}));
  // 4x the bandwidth is the threshold (default ratio).
  EXPECT_EQ(find_islands(two_islands(400e6, 100e6)).size(), 2u);
  EXPECT_TRUE(find_islands(two_islands(300e6, 100e6)).empty());
  EXPECT_TRUE(find_islands(two_islands(300e6, 100e6), 2.0).size() == 2u);
  // A uniform cluster has none (the whole cluster is not an island).
  EXPECT_TRUE(find_islands(ClusterSpec::uniform({island_device("P", 1), island_device("A", 1),
                                                 island_device("B", 1)},
                                                {1e9, 0}))
                  .empty());
  // Views: plain, {A, B}, both, {C, D}.
  const ClusterSpec c = two_islands(10e9, 100e6);
  const auto views = island_views(c, find_islands(c));
  ASSERT_EQ(views.size(), 4u);
  EXPECT_EQ(views[0].size(), 5u);
  EXPECT_EQ(views[1].size(), 4u);
  ASSERT_EQ(views[2].size(), 3u);
  EXPECT_EQ(views[2][0].members, (std::vector<int>{1, 2}));
  EXPECT_EQ(views[2][0].leader, 1);
  EXPECT_EQ(views[2][0].shares, (std::vector<double>{20, 20}));
  EXPECT_EQ(views[2][1].members, (std::vector<int>{3, 4}));
  EXPECT_EQ(views[3][0].members, (std::vector<int>{3, 4}));
}

TEST(Islands, AGroupSplitsTheWorkOfAUnitAndPaysItsAllReduce) {
  const auto m = paper_model("gpt2", "gpt2");
  // A free link: two equal devices take about half a layer's time (norms and residuals whole).
  ClusterSpec c = ClusterSpec::uniform({island_device("A", 20), island_device("B", 20)}, {1e15, 0});
  const StageGroup g = StageGroup::island(c, {0, 1});
  const StageGroup one = StageGroup::device(0);
  for (const int unit : {pipeline::attention_unit(3), pipeline::mlp_unit(3)}) {
    const double whole = group_unit_seconds(*m.cost, c, one, unit, 128, 128);
    const double half = group_unit_seconds(*m.cost, c, g, unit, 128, 128);
    EXPECT_GT(half, 0.5 * whole);
    EXPECT_LT(half, 0.52 * whole);
  }
  // A slow link: the all-reduce of [128, 768] floats, 2 x 1/2 of 393 kB over 10 Mbit/s each way.
  const double fast = group_unit_seconds(*m.cost, c, g, pipeline::mlp_unit(3), 128, 128);
  c.set_link(0, 1, {10e6, 0});
  const double slow = group_unit_seconds(*m.cost, c, g, pipeline::mlp_unit(3), 128, 128);
  EXPECT_NEAR(slow - fast, 2 * (128.0 * 768 * 4 / 2) * 8 / 10e6, 1e-6);
}

// Island stages pay where a pipeline's slicing cannot: a short prompt leaves nothing to overlap,
// so a pipeline runs its stages one after another while an island splits each layer.
TEST(HpipeIslands, AFastIslandIsChosenAndPredictedFasterThanEveryPlainPipeline) {
  const auto m = paper_model("gpt2", "gpt2");
  const ClusterSpec cluster = two_islands(10e9, 100e6);
  for (const std::int64_t prompt : {1, 8}) {
    HpipeOptions o{.exact_tokens = 16};
    const PipelineSchedule hybrid = plan_hpipe(*m.cost, cluster, prompt, 64, o);
    o.islands = false;
    const PipelineSchedule plain = plan_hpipe(*m.cost, cluster, prompt, 64, o);
    EXPECT_FALSE(plain.hybrid());
    ASSERT_TRUE(hybrid.hybrid()) << prompt << ": " << hybrid.note;
    EXPECT_LT(hybrid.predicted_prefill_s, plain.predicted_prefill_s) << prompt;
    EXPECT_NE(hybrid.note.find("hybrid: tensor-parallel island stages {A, B}"), std::string::npos)
        << hybrid.note;
    // The plan: group stages over plan devices, validated; predicted the same through the plan.
    const Plan plan = plan_of_schedule(hybrid, m.config, cluster);
    EXPECT_NO_THROW(plan.validate(m.config, "hybrid"));
    bool grouped = false;
    for (const PipelineStage& s : plan.pipeline->stages) grouped = grouped || s.grouped();
    EXPECT_TRUE(grouped);
    const Prediction p = m.cost->predict(plan, cluster, prompt);
    EXPECT_NEAR(p.latency_s, hybrid.predicted_prefill_s, 1e-9 + 1e-9 * p.latency_s);
    EXPECT_NEAR(p.decode_s, hybrid.predicted_decode_s, 1e-9 + 1e-9 * p.decode_s);
    // Each member holds about its share of its stage.
    for (std::size_t d = 0; d < p.devices.size(); ++d) {
      const int stage = plan.pipeline->stage_of(static_cast<int>(d));
      if (stage >= 0 && plan.pipeline->stages[static_cast<std::size_t>(stage)].grouped()) {
        EXPECT_EQ(p.devices[d].heads, 6) << p.devices[d].name;
      }
    }
    // The schedule of the plan is the schedule.
    const PipelineSchedule back = schedule_of_plan(plan, cluster, 64);
    EXPECT_EQ(back.stage_units, hybrid.stage_units);
    EXPECT_TRUE(back.hybrid());
  }
}

TEST(HpipeIslands, AUniformClusterGetsAPlainPipeline) {
  const auto m = paper_model("gpt2", "gpt2");
  const ClusterSpec cluster = ClusterSpec::uniform({island_device("P", 10), island_device("A", 20),
                                                    island_device("B", 20), island_device("C", 20)},
                                                   {1e9, 0.0005});
  const PipelineSchedule s = plan_hpipe(*m.cost, cluster, 8, 64, {.exact_tokens = 16});
  EXPECT_FALSE(s.hybrid());
  const PipelineSchedule off =
      plan_hpipe(*m.cost, cluster, 8, 64, {.exact_tokens = 16, .islands = false});
  EXPECT_EQ(s.stage_devices, off.stage_devices);
  EXPECT_DOUBLE_EQ(s.predicted_prefill_s, off.predicted_prefill_s);
}

// Islands whose members cannot hold a share of any layer leave the plan to the devices that can.
TEST(HpipeIslands, IslandsWithoutMemoryAreLeftOut) {
  const auto m = paper_model("gpt2", "gpt2");
  ClusterSpec cluster = two_islands(10e9, 100e6);
  for (int d = 1; d < cluster.size(); ++d) cluster.mutable_device(d).memory_bytes = 1000000;
  const PipelineSchedule s = plan_hpipe(*m.cost, cluster, 8, 64, {.exact_tokens = 16});
  EXPECT_FALSE(s.hybrid());
  EXPECT_EQ(s.stage_devices, (std::vector<int>{0}));
}

TEST(HpipeIslands, MalformedGroupSchedulesAreRefused) {
  const auto m = paper_model("gpt2", "gpt2");
  const ClusterSpec cluster = two_islands(10e9, 100e6);
  PipelineSchedule s = plan_hpipe(*m.cost, cluster, 8, 16, {.exact_tokens = 16});
  ASSERT_TRUE(s.hybrid());
  std::size_t g = 0;
  while (s.stage_members[g].size() < 2) ++g;
  PipelineSchedule bad = s;
  bad.stage_shares[g].pop_back();
  EXPECT_THROW(validate_schedule(bad, m.config, cluster), PlanError);
  bad = s;
  bad.stage_devices[g] = 0;  // not a member
  if (std::find(s.stage_members[g].begin(), s.stage_members[g].end(), 0) ==
      s.stage_members[g].end()) {
    EXPECT_THROW(validate_schedule(bad, m.config, cluster), PlanError);
  }
  bad = s;
  bad.stage_members[g].push_back(bad.stage_members[g].front());  // a device twice
  bad.stage_shares[g].push_back(1);
  EXPECT_THROW(validate_schedule(bad, m.config, cluster), PlanError);
}

}  // namespace
}  // namespace huddle
