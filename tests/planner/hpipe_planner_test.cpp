// HPipe planning on models and clusters (planner/hpipe_planner.h): the per-unit costs against the
// simulator, stage balance, memory, links, the slice table, the baselines, refusals.
#include "planner/hpipe_planner.h"

#include "core/error.h"
#include "model/model.h"
#include "plan/pipeline_units.h"
#include "planner/strategies.h"
#include "planner_test_util.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <memory>
#include <numeric>

namespace huddle {
namespace {

using testing::paper_model;

DeviceSpec device(const std::string& name, double gflops, std::int64_t memory = 8000000000) {
  DeviceSpec d;
  d.name = name;
  d.gflops = d.attention_gflops = d.mlp_gflops = d.connection_gflops = gflops;
  d.memory_bytes = memory;
  return d;
}

DeviceSpec with_curves(DeviceSpec d) {
  OpCurves c;
  c.gemm = {d.gflops, 20e-6};
  c.gemv = {d.gflops / 4, 10e-6};
  c.attention = {d.gflops / 2, 15e-6};
  c.elementwise = {d.gflops / 8, 5e-6};
  d.curves = c;
  return d;
}

struct Fixture {
  std::unique_ptr<Model> model;
  std::unique_ptr<CostModel> cost;
};

Fixture fixture(const std::string& name) {
  Fixture f;
  f.model = std::make_unique<Model>(Model::load(testing::fixture_model(name)));
  f.cost = std::make_unique<CostModel>(f.model->config(), f.model->graph());
  return f;
}

int transformer_units(const std::pair<int, int>& r, std::int64_t layers) {
  int n = 0;
  for (int u = r.first; u < r.second; ++u) {
    const pipeline::UnitKind k = pipeline::unit_kind(u, layers);
    n += k == pipeline::UnitKind::Attention || k == pipeline::UnitKind::Mlp ? 1 : 0;
  }
  return n;
}

// A heterogeneous 4-device cluster: speeds 40, 20, 10, 5 GFLOP/s, 1 Gbit/s links.
ClusterSpec hetero4(bool curves) {
  std::vector<DeviceSpec> d = {device("L", 40), device("M", 20), device("S", 10), device("XS", 5)};
  if (curves)
    for (DeviceSpec& x : d) x = with_curves(x);
  return ClusterSpec::uniform(d, {1e9, 0.0005});
}

TEST(PipelineUnits, Layout) {
  EXPECT_EQ(pipeline::unit_count(12), 26);
  EXPECT_EQ(pipeline::attention_unit(0), 1);
  EXPECT_EQ(pipeline::mlp_unit(11), 24);
  EXPECT_EQ(pipeline::head_unit(12), 25);
  EXPECT_EQ(pipeline::unit_name(3, 12), "layer 1 attention");
  EXPECT_EQ(pipeline::unit_name(25, 12), "head");
  EXPECT_EQ(pipeline::unit_layer(4, 12), 1);
  EXPECT_EQ(pipeline::describe_units(0, 10, 12), "embedding, layers 0-3, layer 4 attention");
  EXPECT_EQ(pipeline::describe_units(10, 26, 12), "layer 4 mlp, layers 5-11, head");
  EXPECT_EQ(pipeline::describe_units(5, 7, 12), "layer 2");
  EXPECT_EQ(pipeline::describe_units(4, 6, 12), "layer 1 mlp, layer 2 attention");
  EXPECT_EQ(pipeline::describe_units(0, 1, 12), "embedding");
  EXPECT_EQ(pipeline::describe_units(25, 26, 12), "head");
  EXPECT_EQ(pipeline::describe_units(0, 4, 1), "embedding, layer 0, head");
}

TEST(PipelineUnits, EveryOpHasAUnitInOrder) {
  for (const std::string name : {"gpt2-tiny", "llama-tiny", "bert-tiny"}) {
    const Fixture f = fixture(name);
    const std::int64_t L = f.model->config().layers;
    const std::vector<int> units = pipeline::unit_of_ops(f.model->graph(), L);
    ASSERT_EQ(units.size(), f.model->graph().ops().size());
    // Units never go backwards in execution order (ops are stored in it), and every unit has ops
    // except perhaps the last of an encoder without a head.
    std::vector<int> count(static_cast<std::size_t>(pipeline::unit_count(L)), 0);
    for (std::size_t i = 0; i < units.size(); ++i) {
      if (i > 0) {
        EXPECT_GE(units[i], units[i - 1]) << name << " op " << i;
      }
      ++count[static_cast<std::size_t>(units[i])];
    }
    for (int u = 0; u + 1 < pipeline::unit_count(L); ++u)
      EXPECT_GT(count[static_cast<std::size_t>(u)], 0) << name << " unit " << u;
  }
}

TEST(HpipeCosts, UnitsSumToTheLocalStep) {
  for (const std::string name : {"gpt2-tiny", "llama-tiny", "bert-tiny"}) {
    const Fixture f = fixture(name);
    const ModelConfig& c = f.model->config();
    for (const bool curves : {false, true}) {
      const DeviceSpec d = curves ? with_curves(device("a", 10)) : device("a", 10);
      const ClusterSpec cluster = ClusterSpec::uniform({d}, {1e9, 0});
      const Plan local = make_plan("local", c, {"a"}, {});
      for (const auto& [T, C] : {std::pair<std::int64_t, std::int64_t>{1, 1}, {7, 7}, {5, 40}}) {
        double sum = 0;
        for (int u = 0; u < pipeline::unit_count(c.layers); ++u)
          sum += f.cost->unit_seconds(u, d, T, C);
        const double step = f.cost->simulate_step(local, cluster, T, C, nullptr);
        EXPECT_NEAR(sum, step, 1e-12 * step) << name << " curves " << curves << " T " << T;
      }
      EXPECT_THROW(f.cost->unit_seconds(pipeline::unit_count(c.layers), d, 1, 1), PlanError);
    }
  }
}

TEST(HpipeCosts, UnitWeightBytesSumToTheModel) {
  for (const std::string name : {"gpt2-tiny", "llama-tiny", "bert-tiny"}) {
    const Fixture f = fixture(name);
    const ModelConfig& c = f.model->config();
    const std::vector<std::int64_t>& bytes = f.cost->unit_weight_bytes();
    ASSERT_EQ(bytes.size(), static_cast<std::size_t>(pipeline::unit_count(c.layers)));
    const std::int64_t sum = std::accumulate(bytes.begin(), bytes.end(), std::int64_t{0});
    // A tied head holds its own copy of the token embedding.
    const std::int64_t tied = c.tie_word_embeddings ? c.vocab_size * c.hidden * 4 : 0;
    EXPECT_EQ(sum, f.cost->footprint().total_weight_bytes(c) + tied) << name;
    for (int u = 0; u + 1 < pipeline::unit_count(c.layers); ++u)
      EXPECT_GT(bytes[static_cast<std::size_t>(u)], 0) << name << " unit " << u;
  }
}

TEST(HpipePlanner, OneStageMatchesTheLocalPrediction) {
  const Fixture f = fixture("llama-tiny");
  const ClusterSpec cluster = ClusterSpec::uniform({with_curves(device("a", 10))}, {1e9, 0});
  const PipelineSchedule s = plan_hpipe(*f.cost, cluster, 40, 100);
  ASSERT_EQ(s.stage_devices.size(), 1u);
  EXPECT_FALSE(s.sliced);
  const Prediction local =
      f.cost->predict(make_plan("local", f.model->config(), {"a"}, {}), cluster, 40);
  EXPECT_NEAR(s.predicted_prefill_s, local.latency_s, 1e-12 * local.latency_s);
  EXPECT_NEAR(s.predicted_decode_s, local.decode_s, 1e-12 * local.decode_s);
}

TEST(HpipePlanner, TwiceAsFastDeviceGetsAboutTwiceTheLayers) {
  const auto m = paper_model("gpt2", "gpt2");
  const ClusterSpec cluster =
      ClusterSpec::uniform({device("slow", 10), device("fast", 20)}, {1e12, 0});
  const PipelineSchedule s = plan_hpipe(*m.cost, cluster, 128, 256);
  ASSERT_EQ(s.stage_devices.size(), 2u);
  int fast = 0, slow = 0;
  for (std::size_t i = 0; i < 2; ++i) {
    (s.stage_devices[i] == 1 ? fast : slow) = transformer_units(s.stage_units[i], 12);
  }
  EXPECT_EQ(fast + slow, 24);
  const double ratio = static_cast<double>(fast) / slow;
  EXPECT_GT(ratio, 1.6) << fast << " vs " << slow;
  EXPECT_LT(ratio, 2.5) << fast << " vs " << slow;
}

TEST(HpipePlanner, DeviceWithTooLittleMemoryGetsNothing) {
  const auto m = paper_model("gpt2", "gpt2");
  const std::int64_t model = m.cost->footprint().total_weight_bytes(m.config);
  // The fastest device cannot hold even one unit's weights and KV cache.
  ClusterSpec cluster = ClusterSpec::uniform(
      {device("a", 10, 2 * model), device("tiny", 100, 1000), device("b", 10, 2 * model)},
      {1e12, 0});
  const PipelineSchedule s = plan_hpipe(*m.cost, cluster, 64, 128);
  for (const int d : s.stage_devices) EXPECT_NE(d, 1);
  // Memory forces a split: each device holds about half the model.
  // (A tied head holds its own copy of the embedding: count the units, not the model.)
  std::int64_t units = 0;
  for (const std::int64_t b : m.cost->unit_weight_bytes()) units += b;
  cluster = ClusterSpec::uniform({device("a", 10, units * 6 / 10), device("b", 10, units * 6 / 10)},
                                 {1e6, 0.01});
  const PipelineSchedule split = plan_hpipe(*m.cost, cluster, 64, 128);
  ASSERT_EQ(split.stage_devices.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_LE(split.stage_memory_bytes[i], cluster.device(split.stage_devices[i]).memory_bytes);
  }
  // Nothing fits: a refusal naming the cause.
  cluster =
      ClusterSpec::uniform({device("a", 10, model / 4), device("b", 10, model / 4)}, {1e9, 0});
  try {
    plan_hpipe(*m.cost, cluster, 64, 128);
    FAIL() << "expected PlanError";
  } catch (const PlanError& e) {
    EXPECT_NE(std::string(e.what()).find("no pipeline fits in memory"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(plan_gpipe(*m.cost, cluster, 64, 128), PlanError);
}

TEST(HpipePlanner, SlowLinksFavourFewerStages) {
  const auto m = paper_model("gpt2", "gpt2");
  const std::vector<DeviceSpec> d = {device("a", 10), device("b", 10), device("c", 10),
                                     device("e", 10)};
  const PipelineSchedule fast =
      plan_hpipe(*m.cost, ClusterSpec::uniform(d, {1e10, 1e-5}), 128, 256, {.exact_tokens = 16});
  const PipelineSchedule slow =
      plan_hpipe(*m.cost, ClusterSpec::uniform(d, {1e6, 0.02}), 128, 256, {.exact_tokens = 16});
  EXPECT_EQ(fast.stage_devices.size(), 4u);
  EXPECT_LT(slow.stage_devices.size(), fast.stage_devices.size());
  EXPECT_LT(fast.predicted_prefill_s, slow.predicted_prefill_s);
}

TEST(HpipePlanner, SliceTableCoversEveryLength) {
  const Fixture f = fixture("gpt2-tiny");
  for (const bool curves : {false, true}) {
    const ClusterSpec cluster = hetero4(curves);
    const PipelineSchedule s = plan_hpipe(*f.cost, cluster, 100, 128, {.exact_tokens = 24});
    EXPECT_TRUE(s.sliced);
    ASSERT_EQ(s.slices.size(), 128u);
    for (std::size_t n = 1; n <= 128; ++n) {
      const std::vector<int>& sl = s.slices[n - 1];
      EXPECT_EQ(static_cast<std::size_t>(std::accumulate(sl.begin(), sl.end(), 0)), n);
      for (const int len : sl) EXPECT_GE(len, 1);
    }
    EXPECT_NO_THROW(validate_schedule(s, f.model->config(), cluster));
    EXPECT_GT(s.predicted_prefill_s, 0);
    EXPECT_GT(s.predicted_decode_s, 0);
    EXPECT_LT(s.predicted_decode_s, s.predicted_prefill_s);
    EXPECT_EQ(s.stage_busy_s.size(), s.stage_devices.size());
    EXPECT_NE(s.note.find("exact up to 24 tokens; beyond"), std::string::npos) << s.note;
    // The prediction of each entry is its own: predicting another length works.
    EXPECT_GT(predict_pipeline(*f.cost, cluster, s, 128).prefill_s, s.predicted_prefill_s);
  }
}

TEST(HpipePlanner, BeatsGpipeAndUniformSlicesOnAHeterogeneousCluster) {
  for (const auto& [arch, preset] :
       {std::pair<std::string, std::string>{"gpt2", "gpt2"}, {"llama", "llama-1b"}}) {
    const auto m = paper_model(arch, preset);
    for (const bool curves : {false, true}) {
      const ClusterSpec cluster = hetero4(curves);
      for (const std::int64_t prompt : {128, 512}) {
        const HpipeOptions o{.exact_tokens = 16};
        const PipelineSchedule h = plan_hpipe(*m.cost, cluster, prompt, 512, o);
        const PipelineSchedule g = plan_gpipe(*m.cost, cluster, prompt, 512);
        const PipelineSchedule u = plan_uniform_slices(*m.cost, cluster, prompt, 512, o);
        EXPECT_EQ(h.stage_devices, u.stage_devices);
        EXPECT_EQ(g.stage_devices.size(), 4u);
        EXPECT_LE(h.predicted_prefill_s, g.predicted_prefill_s) << preset << " " << prompt;
        EXPECT_LE(h.predicted_prefill_s, u.predicted_prefill_s * (1 + 1e-9))
            << preset << " " << prompt;
        EXPECT_LT(h.predicted_prefill_s, 0.8 * g.predicted_prefill_s) << preset << " " << prompt;
      }
    }
  }
}

TEST(HpipePlanner, EncodersAndDisabledSlicingGiveOneSlice) {
  const Fixture bert = fixture("bert-tiny");
  const ClusterSpec cluster = hetero4(false);
  const PipelineSchedule s = plan_hpipe(*bert.cost, cluster, 50, 128);
  EXPECT_FALSE(s.sliced);
  EXPECT_NE(s.note.find("bidirectional"), std::string::npos) << s.note;
  ASSERT_EQ(s.slices.size(), 128u);
  for (std::size_t n = 1; n <= 128; ++n)
    EXPECT_EQ(s.slices[n - 1], std::vector<int>{static_cast<int>(n)});
  const PipelineSchedule u = plan_uniform_slices(*bert.cost, cluster, 50, 128);
  EXPECT_FALSE(u.sliced);

  const Fixture gpt2 = fixture("gpt2-tiny");
  const PipelineSchedule off = plan_hpipe(*gpt2.cost, cluster, 50, 128, {.sliced = false});
  EXPECT_FALSE(off.sliced);
  EXPECT_EQ(off.slices[49], std::vector<int>{50});
  EXPECT_NE(off.note.find("slicing disabled"), std::string::npos);
}

TEST(HpipePlanner, GpipeSplitsLayersEvenlyInClusterOrder) {
  const auto m = paper_model("gpt2", "gpt2");
  const PipelineSchedule g = plan_gpipe(*m.cost, hetero4(false), 64, 128);
  ASSERT_EQ(g.stage_devices, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(g.stage_units.front().first, 0);
  EXPECT_EQ(g.stage_units.back().second, 26);
  for (const auto& r : g.stage_units) EXPECT_EQ(transformer_units(r, 12), 6);  // 3 layers each
  EXPECT_EQ(g.slices[63], std::vector<int>{64});
}

TEST(HpipePlanner, RefusesBadLengthsAndMalformedSchedules) {
  const Fixture f = fixture("gpt2-tiny");
  const ClusterSpec cluster = hetero4(false);
  EXPECT_THROW(plan_hpipe(*f.cost, cluster, 129, 128), PlanError);  // prompt > max tokens
  EXPECT_THROW(plan_hpipe(*f.cost, cluster, 0, 128), PlanError);
  EXPECT_THROW(plan_hpipe(*f.cost, cluster, 10, 129), PlanError);  // beyond n_positions
  const PipelineSchedule good = plan_hpipe(*f.cost, cluster, 20, 32);
  EXPECT_THROW(predict_pipeline(*f.cost, cluster, good, 33), PlanError);
  const auto refused = [&](PipelineSchedule s, const std::string& what) {
    try {
      validate_schedule(s, f.model->config(), cluster);
      ADD_FAILURE() << "accepted: " << what;
    } catch (const PlanError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  PipelineSchedule s = good;
  s.stage_units.back().second -= 1;
  refused(s, "cover units");
  s = good;
  s.slices.pop_back();
  refused(s, "slice table has 31 entries");
  s = good;
  s.slices[9] = {3, 3};
  refused(s, "10-token prompt sum to 6");
  s = good;
  s.stage_devices[0] = 7;
  refused(s, "the cluster has 4");
  if (good.stage_devices.size() >= 2) {
    s = good;
    s.stage_devices[1] = s.stage_devices[0];
    refused(s, "holds two stages");
  }
}

}  // namespace
}  // namespace huddle
