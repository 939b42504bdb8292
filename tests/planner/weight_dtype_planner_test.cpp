// Memory-aware planners count weights in the dtype the model keeps them in: Model::load records it
// in the graph, and a device with memory for a Q4_0 model's weights (plus the F32 KV cache and
// activations) but not for its F32 weights gets the model; the F32 model is refused there.
#include "core/error.h"
#include "model/model.h"
#include "planner/galaxy_planner.h"
#include "planner/hpipe_planner.h"
#include "planner/strategies.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <numeric>

namespace huddle {
namespace {

DeviceSpec one_device_with(std::int64_t memory_bytes) {
  DeviceSpec d;
  d.name = "edge";
  d.gflops = d.attention_gflops = d.mlp_gflops = d.connection_gflops = 10;
  d.memory_bytes = memory_bytes;
  return d;
}

TEST(WeightDtypeMemory, TheGraphRecordsTheKeptDtypes) {
  const Model q4 = Model::load(testing::fixture_model("llama-tiny"), {.weight_dtype = DType::Q4_0});
  const Graph& g = q4.graph();
  for (const Value& v : g.values()) {
    if (v.kind == ValueKind::Weight) {
      EXPECT_EQ(v.dtype, q4.weights().at(v.weight.tensor).dtype()) << v.name;
    }
  }
  const auto dtype = [&](const std::string& name) { return g.value(*g.find(name)).dtype; };
  EXPECT_EQ(dtype("model.layers.0.self_attn.q_proj.weight"), DType::Q4_0);
  EXPECT_EQ(dtype("model.layers.0.mlp.down_proj.weight"), DType::F16);  // 344 columns: no blocks
  EXPECT_EQ(dtype("model.norm.weight"), DType::F32);
  const ModelFootprint f = ModelFootprint::of(g, q4.config());
  EXPECT_EQ(f.total_weight_bytes(q4.config()), static_cast<std::int64_t>(q4.weight_bytes()));
}

// One device whose memory holds llama-tiny's Q4_0 weights, KV cache and activations exactly.
struct TightDevice {
  Model q4, f32;
  ClusterSpec cluster;
};
TightDevice tight_device(std::int64_t seq_len, std::int64_t kv_positions) {
  const auto path = testing::fixture_model("llama-tiny");
  Model q4 = Model::load(path, {.weight_dtype = DType::Q4_0});
  Model f32 = Model::load(path);
  const ModelConfig& c = q4.config();
  const ModelFootprint f = ModelFootprint::of(q4.graph(), c);
  const DeviceMemory m = device_memory(f, c, make_plan("local", c, {"edge"}, {}), 0, seq_len);
  const std::vector<std::int64_t> kv = pipeline_unit_kv_bytes(f, c, kv_positions);
  const std::int64_t budget =
      static_cast<std::int64_t>(q4.weight_bytes()) +
      std::max(m.kv_cache + m.activations, std::accumulate(kv.begin(), kv.end(), std::int64_t{0}));
  // The F32 weights alone are over twice the budget: the old all-F32 count refused this device.
  EXPECT_GT(static_cast<std::int64_t>(f32.weight_bytes()), 2 * budget);
  ClusterSpec cluster = ClusterSpec::uniform({one_device_with(budget)}, {1e9, 0});
  return {std::move(q4), std::move(f32), std::move(cluster)};
}

TEST(WeightDtypeMemory, GalaxyFitsTheQ4ModelWhereF32DoesNot) {
  const TightDevice t = tight_device(16, 0);
  const CostModel q4(t.q4.config(), t.q4.graph());
  const PlanResult r = plan_galaxy(PlanRequest{q4, t.cluster, 16, std::nullopt});
  ASSERT_TRUE(r.plan);
  EXPECT_EQ(r.prediction.devices.at(0).memory.weights,
            static_cast<std::int64_t>(t.q4.weight_bytes()));
  EXPECT_LE(r.prediction.devices.at(0).memory.total(), t.cluster.device(0).memory_bytes);
  const CostModel f32(t.f32.config(), t.f32.graph());
  EXPECT_THROW(plan_galaxy(PlanRequest{f32, t.cluster, 16, std::nullopt}), PlanError);
}

TEST(WeightDtypeMemory, HpipeFitsTheQ4ModelWhereF32DoesNot) {
  const TightDevice t = tight_device(1, 64);
  const CostModel q4(t.q4.config(), t.q4.graph());
  const PipelineSchedule s = plan_hpipe(q4, t.cluster, 32, 64);
  ASSERT_EQ(s.stage_devices.size(), 1u);
  EXPECT_LE(s.stage_memory_bytes.at(0), t.cluster.device(0).memory_bytes);
  const CostModel f32(t.f32.config(), t.f32.graph());
  EXPECT_THROW(plan_hpipe(f32, t.cluster, 32, 64), PlanError);
}

}  // namespace
}  // namespace huddle
