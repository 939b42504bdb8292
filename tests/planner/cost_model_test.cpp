// Cost model: ring collective times against hand-computed values, and properties that follow
// from the model's definition (speed scaling, overlap never slower, links matter).
#include "planner/cost_model.h"
#include "core/error.h"
#include "model/model.h"
#include "planner/strategies.h"
#include "planner_test_util.h"
#include "test_util.h"

#include <gtest/gtest.h>

namespace huddle {
namespace {

DeviceSpec device(const std::string& name, double gflops) {
  DeviceSpec d;
  d.name = name;
  d.gflops = gflops;
  d.memory_bytes = 1000000000;
  return d;
}

TEST(CostModel, RingTimesByHand) {
  // 1e6 bytes/s, 1 ms latency: a part of B bytes takes 0.001 + B / 1e6 s.
  const ClusterSpec c =
      ClusterSpec::uniform({device("a", 1), device("b", 1), device("c", 1)}, {8e6, 0.001});
  const std::vector<int> ring = {0, 1, 2};
  // All-gather: step 0 sends parts (0,1,2), step 1 parts (2,0,1): each step the 3000-byte part.
  EXPECT_NEAR(ring_all_gather_s(c, ring, {1000, 2000, 3000}), 2 * 0.004, 1e-12);
  EXPECT_NEAR(ring_reduce_scatter_s(c, ring, {1000, 2000, 3000}), 2 * 0.004, 1e-12);
  // All-reduce of 3000 bytes: 2 (n-1) steps of 1000 bytes.
  EXPECT_NEAR(ring_all_reduce_s(c, ring, 3000), 4 * 0.002, 1e-12);
  // The slowest link bounds a step.
  ClusterSpec slow = c;
  slow.set_link(1, 2, {8e5, 0.001});  // 1e5 bytes/s
  EXPECT_NEAR(ring_all_gather_s(slow, ring, {1000, 1000, 1000}), 2 * (0.001 + 0.01), 1e-12);
  EXPECT_EQ(ring_all_gather_s(c, {0}, {1000}), 0.0);
}

class CostModelOnModel : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = std::make_unique<Model>(Model::load(testing::fixture_model("gpt2-tiny")));
    cost_ = std::make_unique<CostModel>(model_->config(), model_->graph());
  }
  std::unique_ptr<Model> model_;
  std::unique_ptr<CostModel> cost_;
};

TEST_F(CostModelOnModel, LocalScalesWithSpeedAndIgnoresLinks) {
  const Plan plan = make_plan("local", model_->config(), {"a"}, {});
  const ClusterSpec slow = ClusterSpec::uniform({device("a", 10)}, {1e3, 1});
  const ClusterSpec fast = ClusterSpec::uniform({device("a", 20)}, {1e12, 0});
  const Prediction p1 = cost_->predict(plan, slow, 32), p2 = cost_->predict(plan, fast, 32);
  EXPECT_GT(p1.latency_s, 0);
  EXPECT_NEAR(p1.latency_s / p2.latency_s, 2.0, 1e-9);
  EXPECT_EQ(p1.devices[0].comm_s, 0);
  EXPECT_LT(p1.decode_s, p1.latency_s);
}

TEST_F(CostModelOnModel, TensorParallelOnFastLinksHalvesTheBlocks) {
  const ClusterSpec fast = ClusterSpec::uniform({device("a", 10), device("b", 10)}, {1e15, 0});
  const double local =
      cost_->predict(make_plan("local", model_->config(), {"a"}, {}), fast, 64).latency_s;
  for (const std::string s : {"megatron", "galaxy", "sp"}) {
    const double two =
        cost_->predict(make_plan(s, model_->config(), {"a", "b"}, {}), fast, 64).latency_s;
    EXPECT_LT(two, local) << s;
    EXPECT_GT(two, local / 2 * 0.999) << s;  // nothing is faster than a perfect halving
  }
}

TEST_F(CostModelOnModel, SlowLinksCostAndOverlapHides) {
  const ClusterSpec fast = ClusterSpec::uniform({device("a", 10), device("b", 10)}, {1e9, 0.0001});
  const ClusterSpec slow = ClusterSpec::uniform({device("a", 10), device("b", 10)}, {1e6, 0.01});
  const Plan galaxy = make_plan("galaxy", model_->config(), {"a", "b"}, {});
  const Prediction pf = cost_->predict(galaxy, fast, 64), ps = cost_->predict(galaxy, slow, 64);
  EXPECT_GT(ps.latency_s, pf.latency_s);
  for (const DevicePrediction& d : ps.devices) {
    EXPECT_GT(d.comm_s, 0);
    EXPECT_LE(d.exposed_comm_s, d.comm_s);
  }
  // Latency is at least every device's own busy time and at most compute plus all comm.
  for (const DevicePrediction& d : pf.devices) {
    EXPECT_GE(pf.latency_s, d.busy_s() * 0.999);
    EXPECT_LE(pf.latency_s, (d.compute_s + d.comm_s) * 4);
  }
}

TEST_F(CostModelOnModel, UnknownDeviceIsNamed) {
  const ClusterSpec c = ClusterSpec::uniform({device("a", 10)}, {1e9, 0});
  try {
    cost_->predict(make_plan("megatron", model_->config(), {"a", "zz"}, {}), c, 8);
    FAIL();
  } catch (const PlanError& e) {
    EXPECT_NE(std::string(e.what()).find("'zz'"), std::string::npos);
  }
}

TEST(CostModelPaper, UnitFlopsAgreeWithTheSimulator) {
  // A local plan's compute is the sum of the unit costs the optimising planners use.
  const testing::PaperModel m = testing::paper_model("gpt2", "gpt2-large");
  const ClusterSpec c = ClusterSpec::uniform({device("a", 100)}, {1e9, 0});
  const std::int64_t T = 64;
  const Prediction p = m.cost->predict(make_plan("local", m.config, {"a"}, {}), c, T);
  const CostModel::UnitFlops u = m.cost->unit_flops(T, T);
  const double L = static_cast<double>(m.config.layers);
  const double blocks =
      L * (u.per_head * m.config.heads + u.per_column * static_cast<double>(m.config.ffn) +
           static_cast<double>(T) * u.conn_per_row);
  const double outside = p.devices[0].compute_s * 100e9 - blocks;  // embedding, final norm, head
  EXPECT_GT(outside, 0);
  EXPECT_LT(outside, 0.05 * blocks);
  // The whole-block per-row figures match the per-unit ones at one query row.
  const CostModel::UnitFlops one = m.cost->unit_flops(1, T);
  EXPECT_NEAR(one.attention_per_row, one.per_head * m.config.heads, 1e-6 * one.attention_per_row);
  EXPECT_NEAR(one.mlp_per_row, one.per_column * static_cast<double>(m.config.ffn),
              1e-6 * one.mlp_per_row);
}

}  // namespace
}  // namespace huddle
