// Galaxy planning on the paper's environments A-F (Jetson Nano-S/M/L, speeds 403:825:1470):
// splits proportional to speed within rounding, memory budgets respected after rebalancing,
// and a clear refusal when nothing fits.
#include "core/error.h"
#include "planner/galaxy_planner.h"
#include "planner_test_util.h"

#include <gtest/gtest.h>

#include <numeric>

namespace huddle {
namespace {

void expect_proportional(const std::vector<std::int64_t>& counts, std::int64_t total,
                         const ClusterSpec& c, const std::string& what) {
  double speed_sum = 0;
  for (const DeviceSpec& d : c.devices()) speed_sum += d.gflops;
  EXPECT_EQ(std::accumulate(counts.begin(), counts.end(), std::int64_t{0}), total) << what;
  for (int d = 0; d < c.size(); ++d) {
    const double exact = static_cast<double>(total) * c.device(d).gflops / speed_sum;
    EXPECT_LT(std::abs(static_cast<double>(counts[static_cast<std::size_t>(d)]) - exact), 1.0)
        << what << " device " << d;
  }
}

TEST(Galaxy, PaperEnvironmentsSplitInProportionToSpeed) {
  const testing::PaperModel bert =
      testing::paper_model("bert", "bert-large");  // 16 heads, ffn 4096
  for (const char env : std::string("ABCDEF")) {
    const ClusterSpec c = testing::nano_cluster(testing::galaxy_env(env), testing::kAmpleBytes);
    const PlanResult r = plan_galaxy(PlanRequest{*bert.cost, c, 128, std::nullopt});
    ASSERT_TRUE(r.plan);
    const Plan& plan = *r.plan;
    plan.validate(bert.config, "galaxy plan");
    std::vector<std::int64_t> heads, columns;
    for (const DevicePrediction& d : r.prediction.devices) {
      heads.push_back(d.heads);
      columns.push_back(d.columns);
    }
    expect_proportional(heads, bert.config.heads, c, std::string("heads ") + env);
    expect_proportional(columns, bert.config.ffn, c, std::string("columns ") + env);
    for (int d = 0; d < c.size(); ++d) {
      EXPECT_DOUBLE_EQ(plan.token_shares[static_cast<std::size_t>(d)] / plan.token_shares[0],
                       c.device(d).gflops / c.device(0).gflops);
    }
    EXPECT_EQ(plan.layers.front().residual, ResidualLayout::Tokens);
    // Homogeneous clusters split evenly (within one unit).
    if (env <= 'C') {
      for (const DevicePrediction& d : r.prediction.devices) {
        EXPECT_LE(std::abs(d.columns - r.prediction.devices[0].columns), 1);
        EXPECT_LE(std::abs(d.heads - r.prediction.devices[0].heads), 1);
      }
    }
  }
}

TEST(Galaxy, PerBlockSpeedsDriveEachSplit) {
  const testing::PaperModel bert = testing::paper_model("bert", "bert-large");
  ClusterSpec c = testing::nano_cluster("MM", testing::kAmpleBytes);
  std::vector<DeviceSpec> devices = c.devices();
  devices[1].attention_gflops =
      devices[0].attention_gflops * 3;  // device 1: 3x attention, same MLP
  devices[1].connection_gflops = devices[0].connection_gflops / 2;
  c = ClusterSpec::uniform(devices, {1e9, 0.0005});
  const GalaxySplit s = galaxy_balanced_split(bert.config, c);
  EXPECT_EQ(s.heads, (std::vector<std::int64_t>{4, 12}));
  EXPECT_EQ(s.columns, (std::vector<std::int64_t>{2048, 2048}));
  EXPECT_DOUBLE_EQ(s.token_shares[1] / s.token_shares[0], 0.5);
}

TEST(Galaxy, MemoryStarvedDeviceGivesWorkAway) {
  const testing::PaperModel gpt = testing::paper_model("gpt2", "gpt2-large");
  const ClusterSpec ample = testing::nano_cluster("LMS", testing::kAmpleBytes);
  const PlanRequest free_request{*gpt.cost, ample, 128, std::nullopt};
  const PlanResult balanced = plan_galaxy(free_request);
  // Give the fastest device (L, which would hold most) 70% of what the balanced split needs.
  std::vector<DeviceSpec> devices = ample.devices();
  const std::int64_t need = balanced.prediction.devices[0].memory.total();
  devices[0].memory_bytes = need * 7 / 10;
  const ClusterSpec starved = ClusterSpec::uniform(devices, {1e9, 0.0005});
  const PlanResult r = plan_galaxy(PlanRequest{*gpt.cost, starved, 128, std::nullopt});
  ASSERT_TRUE(r.plan);
  r.plan->validate(gpt.config, "rebalanced plan");
  for (std::size_t d = 0; d < r.prediction.devices.size(); ++d) {
    EXPECT_LE(r.prediction.devices[d].memory.total(), starved.devices()[d].memory_bytes) << d;
  }
  EXPECT_LT(r.prediction.devices[0].columns, balanced.prediction.devices[0].columns);
  EXPECT_GT(r.prediction.devices[1].columns, balanced.prediction.devices[1].columns);
  EXPECT_GT(r.prediction.devices[2].columns, balanced.prediction.devices[2].columns);
  // Slower overall than the unconstrained split, as the work moved to slower devices.
  EXPECT_GT(r.prediction.latency_s, balanced.prediction.latency_s);
}

TEST(Galaxy, MemoryStarvedBeyondMlpMovesHeadsToo) {
  const testing::PaperModel gpt = testing::paper_model("gpt2", "gpt2-large");
  const ClusterSpec ample = testing::nano_cluster("MM", testing::kAmpleBytes);
  const PlanResult balanced = plan_galaxy(PlanRequest{*gpt.cost, ample, 128, std::nullopt});
  const DeviceMemory& m1 = balanced.prediction.devices[1].memory;
  // Device 1 keeps room for about a quarter of its share of the block weights.
  std::vector<DeviceSpec> devices = ample.devices();
  devices[1].memory_bytes = gpt.cost->footprint().shared_bytes + m1.activations +
                            (m1.weights + m1.kv_cache - gpt.cost->footprint().shared_bytes) / 4;
  const ClusterSpec starved = ClusterSpec::uniform(devices, {1e9, 0.0005});
  const PlanResult r = plan_galaxy(PlanRequest{*gpt.cost, starved, 128, std::nullopt});
  EXPECT_LE(r.prediction.devices[1].memory.total(), devices[1].memory_bytes);
  EXPECT_LT(r.prediction.devices[1].heads, balanced.prediction.devices[1].heads);
  EXPECT_GE(r.prediction.devices[1].heads, 1);
  EXPECT_GE(r.prediction.devices[1].columns, 1);
}

TEST(Galaxy, NothingFitsIsRefusedNamingDevices) {
  const testing::PaperModel gpt =
      testing::paper_model("gpt2", "gpt2-large");  // ~3 GB of f32 weights
  const ClusterSpec tiny = testing::nano_cluster("LMS", 500000000);
  try {
    plan_galaxy(PlanRequest{*gpt.cost, tiny, 128, std::nullopt});
    FAIL() << "a 3 GB model fitted in 1.5 GB";
  } catch (const PlanError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("does not fit"), std::string::npos) << what;
    EXPECT_NE(what.find("nano-L0"), std::string::npos) << what;
    EXPECT_NE(what.find("missing"), std::string::npos) << what;
  }
}

TEST(Galaxy, MoreDevicesThanHeadsIsAPlanError) {
  const testing::PaperModel bert = testing::paper_model("bert", "bert-large");
  const ClusterSpec many = testing::nano_cluster(std::string(17, 'M'), testing::kAmpleBytes);
  EXPECT_THROW(plan_galaxy(PlanRequest{*bert.cost, many, 128, std::nullopt}), PlanError);
}

// The chunk count of Galaxy's overlapped gathers comes from the cost model: on a link slower
// than the GEMMs reading the rows, smaller chunks let compute start on arrived rows sooner (the
// prediction falls); where messages cost more than that saves, or the link is fast, one chunk
// per part stays. The chosen count is the best the cost model sees among those tried.
TEST(Galaxy, GatherChunksAreTheCostModelsBest) {
  const testing::PaperModel bert = testing::paper_model("bert", "bert-large");
  struct Link {
    double bps, latency_s;
    bool chunked;  // whether more than one chunk should win
  };
  for (const Link& l : {Link{1e8, 1e-5, true}, Link{1e10, 1e-5, false}, Link{1e8, 5e-2, false}}) {
    const ClusterSpec c =
        testing::nano_cluster("LM", testing::kAmpleBytes, LinkSpec{l.bps, l.latency_s});
    const PlanRequest request{*bert.cost, c, 256, std::nullopt};
    const PlanResult r = plan_galaxy(request);
    ASSERT_TRUE(r.plan);
    EXPECT_EQ(r.plan->gather_chunks > 1, l.chunked) << l.bps << " bit/s, " << l.latency_s << " s";
    Plan other = *r.plan;
    for (const int chunks : {1, 2, 4, 8, 16}) {
      other.gather_chunks = chunks;
      EXPECT_LE(r.prediction.latency_s, bert.cost->predict(other, c, 256).latency_s * 1.001)
          << chunks << " chunks predicted faster than the chosen " << r.plan->gather_chunks;
    }
    if (l.chunked) {
      other.gather_chunks = 1;
      EXPECT_LT(r.prediction.latency_s, bert.cost->predict(other, c, 256).latency_s);
    }
  }
}

// On one-core devices, communication competes with compute for the CPU; once a device's CPU
// cost per byte moved is known, only that part of a collective is charged on top of compute and
// the time waiting on the link overlaps the GEMMs: the prediction falls between no overlap and
// Galaxy's ideal overlap, and the figure round-trips through the cluster file.
TEST(Galaxy, OneCoreDevicesOverlapTheLinkButNotTheirCommunicationCpu) {
  const testing::PaperModel bert = testing::paper_model("bert", "bert-large");
  ClusterSpec c = testing::nano_cluster("LM", testing::kAmpleBytes, LinkSpec{1e8, 1e-5});
  const Plan plan = *plan_galaxy(PlanRequest{*bert.cost, c, 256, std::nullopt}).plan;
  const double ideal = bert.cost->predict(plan, c, 256).latency_s;  // cores unknown: overlap
  for (int d = 0; d < c.size(); ++d) c.mutable_device(d).cores = 1;
  const double serial = bert.cost->predict(plan, c, 256).latency_s;
  for (int d = 0; d < c.size(); ++d) c.mutable_device(d).comm_cpu_s_per_byte = 2e-9;
  const double link_overlapped = bert.cost->predict(plan, c, 256).latency_s;
  EXPECT_LT(ideal, link_overlapped);
  EXPECT_LT(link_overlapped, serial);
  const ClusterSpec back = ClusterSpec::from_json(c.to_json(), "c.json");
  EXPECT_DOUBLE_EQ(back.device(0).comm_cpu_s_per_byte, 2e-9);
  EXPECT_DOUBLE_EQ(bert.cost->predict(plan, back, 256).latency_s, link_overlapped);
}

// The LM head splits by vocabulary (Plan::vocab) in proportion to the devices' FFN columns where
// the cost model predicts a prefill and a decode step faster with it; it stays whole on device 0
// over a link too slow for the logits row, or when a device cannot hold its rows of the head.
TEST(Galaxy, TheHeadSplitsByVocabularyWhereItIsPredictedFasterAndFits) {
  const testing::PaperModel gpt = testing::paper_model("gpt2", "gpt2");
  const std::int64_t V = gpt.config.vocab_size;
  const ClusterSpec fast = testing::nano_cluster("LM", testing::kAmpleBytes);
  const PlanResult r = plan_galaxy(PlanRequest{*gpt.cost, fast, 128, std::nullopt});
  const Plan& plan = *r.plan;
  ASSERT_EQ(plan.vocab.size(), 2u);
  plan.validate(gpt.config, "galaxy plan");
  const auto& columns = plan.layers.back().columns;
  const double column_share = static_cast<double>(columns[0].second - columns[0].first) /
                              static_cast<double>(gpt.config.ffn);
  EXPECT_NEAR(static_cast<double>(plan.vocab[0].second) / static_cast<double>(V), column_share,
              1e-3);
  Plan whole = plan;
  whole.vocab.clear();
  const Prediction with_whole = gpt.cost->predict(whole, fast, 128);
  EXPECT_LT(r.prediction.decode_s, with_whole.decode_s);
  EXPECT_LT(r.prediction.devices[0].compute_s, with_whole.devices[0].compute_s);
  // Device 1 holds its rows of the tied head (device 0 the table whole, for the embedding).
  const std::int64_t head_bytes = gpt.cost->footprint().head_bytes;
  EXPECT_EQ(r.prediction.devices[1].memory.weights - with_whole.devices[1].memory.weights,
            share_bytes(head_bytes, plan.vocab[1].second - plan.vocab[1].first, V));

  // 100 kbit/s: the logits row (V f32) would take seconds.
  const ClusterSpec slow = testing::nano_cluster("LM", testing::kAmpleBytes, LinkSpec{1e5, 1e-3});
  EXPECT_TRUE(plan_galaxy(PlanRequest{*gpt.cost, slow, 128, std::nullopt}).plan->vocab.empty());

  // Device 1 with room for its layers but not for its rows of the head.
  ClusterSpec tight = fast;
  tight.mutable_device(1).memory_bytes = with_whole.devices[1].memory.total() + 1024;
  const PlanResult t = plan_galaxy(PlanRequest{*gpt.cost, tight, 128, std::nullopt});
  EXPECT_TRUE(t.plan->vocab.empty());
  EXPECT_LE(t.prediction.devices[1].memory.total(), tight.device(1).memory_bytes);
}

}  // namespace
}  // namespace huddle
