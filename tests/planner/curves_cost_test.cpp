// The cost model with measured op curves (the rich cluster form `huddle profile` writes).
#include "core/error.h"
#include "model/model.h"
#include "planner/cost_model.h"
#include "planner/strategies.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace huddle {
namespace {

// Every op class at `gflops` with `overhead_s` per op; reading weights (the GEMV curve) at
// `read_gflops`.
ClusterSpec with_curves(double gflops, double overhead_s, double read_gflops = 1e15) {
  DeviceSpec d{"A", 10, 4'000'000'000};
  d.curves = OpCurves{
      {gflops, overhead_s}, {gflops, overhead_s}, {gflops, overhead_s}, {read_gflops, overhead_s}};
  return ClusterSpec::uniform({d}, LinkSpec{1e9, 0});
}

TEST(CurvesCost, CurvesReplaceBlockSpeedsAndChargeOverheadPerOp) {
  const Model model = Model::load(testing::fixture_model("gpt2-tiny"));
  const CostModel cost(model.config(), model.graph());
  const Plan local = make_plan("local", model.config(), {"A"}, {});
  const double plain =
      cost.predict(local, ClusterSpec::uniform({{"A", 10, 4'000'000'000}}, LinkSpec{1e9, 0}), 32)
          .latency_s;
  // Same throughput, no overhead, free weight reads: the same prediction, but for the one-row
  // head, which is all weight read.
  const double head_s =
      2.0 * static_cast<double>(model.config().hidden * model.config().vocab_size) / 10e9;
  const double same = plain - head_s;
  EXPECT_NEAR(cost.predict(local, with_curves(10, 0), 32).latency_s, same, plain * 1e-9);
  // Twice the throughput halves it; a fixed cost per op adds to it.
  EXPECT_NEAR(cost.predict(local, with_curves(20, 0), 32).latency_s, same / 2, plain * 1e-9);
  EXPECT_GT(cost.predict(local, with_curves(10, 1e-3), 32).latency_s, plain + 10 * 1e-3);
  // Linears also read their weights: a slow read adds to every linear, and a sequence split
  // (fewer rows over the same weights) gains less than its share of the FLOPs.
  EXPECT_GT(cost.predict(local, with_curves(10, 0, 1), 32).latency_s, plain * 1.2);
  const double rows32 = cost.predict(local, with_curves(10, 0, 5), 32).latency_s;
  const double rows16 = cost.predict(local, with_curves(10, 0, 5), 16).latency_s;
  EXPECT_GT(rows16, rows32 / 2);
}

// A multi-row linear fetches its weights at the "gemm_weights" curve where the profile measured
// it; the GEMV curve stands in where not (older profiles), and still prices one-row linears.
TEST(CurvesCost, MultiRowLinearsFetchWeightsAtTheirOwnCurve) {
  DeviceSpec d{"A", 10, 4'000'000'000};
  d.curves = OpCurves{{100, 0}, {100, 0}, {100, 0}, {20, 0}};
  const double weight_flops = 2.0 * 768 * 3072;
  const double flops = 128 * weight_flops;
  EXPECT_DOUBLE_EQ(d.linear_seconds(BlockType::Mlp, 128, flops, 1),
                   flops / 100e9 + weight_flops / 20e9);
  d.curves->gemm_weights = {5, 0};
  EXPECT_DOUBLE_EQ(d.linear_seconds(BlockType::Mlp, 128, flops, 1),
                   flops / 100e9 + weight_flops / 5e9);
  EXPECT_DOUBLE_EQ(d.linear_seconds(BlockType::Mlp, 1, weight_flops, 1), weight_flops / 20e9);
  d.scale_speed(0.5);
  EXPECT_DOUBLE_EQ(d.curves->gemm_weights.gflops, 2.5);
  // The cluster file carries it, and a file without it reads as before.
  const ClusterSpec c = ClusterSpec::uniform({d}, LinkSpec{1e9, 0});
  const nlohmann::json j = c.to_json();
  ASSERT_TRUE(j["devices"][0]["op_curves"].contains("gemm_weights"));
  EXPECT_DOUBLE_EQ(ClusterSpec::from_json(j, "c.json").device(0).curves->gemm_weights.gflops, 2.5);
  nlohmann::json old = j;
  old["devices"][0]["op_curves"].erase("gemm_weights");
  const DeviceSpec read = ClusterSpec::from_json(old, "c.json").device(0);
  EXPECT_DOUBLE_EQ(read.curves->weights_of_gemm().gflops, read.curves->gemv.gflops);
}

TEST(CurvesCost, OneCoreDevicesCannotHideCommunicationBehindCompute) {
  const Model model = Model::load(testing::fixture_model("gpt2-tiny"));
  const CostModel cost(model.config(), model.graph());
  const Plan galaxy = make_plan("galaxy", model.config(), {"A", "B"}, {1, 1});
  const auto cluster = [](double cores) {
    DeviceSpec a{"A", 1, 4'000'000'000}, b{"B", 1, 4'000'000'000};
    a.cores = b.cores = cores;
    return ClusterSpec::uniform({a, b}, LinkSpec{1e7, 1e-3});
  };
  const Prediction spare = cost.predict(galaxy, cluster(4), 32);
  const Prediction single = cost.predict(galaxy, cluster(1), 32);
  EXPECT_EQ(cost.predict(galaxy, cluster(0), 32).latency_s, spare.latency_s);  // unknown: overlap
  EXPECT_GT(single.latency_s, spare.latency_s);
  for (const DevicePrediction& d : single.devices) EXPECT_DOUBLE_EQ(d.exposed_comm_s, d.comm_s);
  EXPECT_LT(spare.devices[0].exposed_comm_s, spare.devices[0].comm_s);
}

TEST(CurvesCost, RingStepsUseTheDuplexBandwidth) {
  const auto cluster = [](double duplex) {
    nlohmann::json j = {
        {"devices",
         {{{"name", "A"}, {"gflops", 10}, {"memory_bytes", 1e9}},
          {{"name", "B"}, {"gflops", 10}, {"memory_bytes", 1e9}}}},
        {"links", {{{"from", "A"}, {"to", "B"}, {"bandwidth_bps", 8e6}, {"latency_s", 0}}}}};
    if (duplex > 0) j["links"][0]["duplex_bandwidth_bps"] = duplex;
    return ClusterSpec::from_json(j, "c.json");
  };
  // 1 MB each way in one step: 1 s at 8 Mbit/s, 2 s when both directions share 4 Mbit/s each.
  EXPECT_DOUBLE_EQ(ring_all_gather_s(cluster(0), {0, 1}, {1e6, 1e6}), 1.0);
  EXPECT_DOUBLE_EQ(ring_all_gather_s(cluster(4e6), {0, 1}, {1e6, 1e6}), 2.0);
  EXPECT_DOUBLE_EQ(cluster(4e6).link(1, 0).duplex_bandwidth_bps, 4e6);  // symmetric by default
  EXPECT_DOUBLE_EQ(cluster(4e6).link(0, 1).transfer_s(1e6), 1.0);       // one way: unchanged
}

TEST(CurvesCost, ClusterFilesCarryCurvesAndRefuseBadOnes) {
  nlohmann::json j = {{"devices",
                       {{{"name", "A"},
                         {"gflops", 10},
                         {"memory_bytes", 1e9},
                         {"op_curves",
                          {{"gemm", {{"gflops", 50}, {"overhead_us", 4}}},
                           {"attention", {{"gflops", 20}, {"overhead_us", 2}}},
                           {"elementwise", {{"gflops", 3}, {"overhead_us", 1}}}}}}}}};
  const ClusterSpec c = ClusterSpec::from_json(j, "c.json");
  ASSERT_TRUE(c.device(0).curves.has_value());
  EXPECT_DOUBLE_EQ(c.device(0).curves->gemm.gflops, 50);
  EXPECT_DOUBLE_EQ(c.device(0).curves->attention.overhead_s, 2e-6);
  // Written and read back the same.
  const ClusterSpec again = ClusterSpec::from_json(c.to_json(), "again");
  EXPECT_DOUBLE_EQ(again.device(0).curves->elementwise.gflops, 3);

  j["devices"][0]["op_curves"]["attention"]["gflops"] = 0;
  try {
    ClusterSpec::from_json(j, "c.json");
    FAIL() << "expected a LoadError";
  } catch (const LoadError& e) {
    EXPECT_NE(std::string(e.what()).find("devices[0].op_curves.attention.gflops"),
              std::string::npos)
        << e.what();
  }
  j["devices"][0]["op_curves"].erase("gemm");
  EXPECT_THROW(ClusterSpec::from_json(j, "c.json"), LoadError);
}

}  // namespace
}  // namespace huddle
