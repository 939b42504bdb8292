// The planner's weight accounting equals the bytes lowering actually gives each device.
#include "planner/footprint.h"
#include "model/model.h"
#include "plan/lowering.h"
#include "planner/strategies.h"
#include "test_util.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace huddle {
namespace {

TEST(Footprint, WeightsMatchLoweringForEveryStrategy) {
  for (const std::string name : {"gpt2-tiny", "bert-tiny", "llama-tiny"}) {
    const Model model = Model::load(testing::fixture_model(name));
    const ModelFootprint f = ModelFootprint::of(model.graph(), model.config());
    EXPECT_EQ(f.total_weight_bytes(model.config()), static_cast<std::int64_t>(model.weight_bytes()))
        << name;
    for (const std::string strategy : {"local", "megatron", "sp", "galaxy"}) {
      for (const std::vector<double>& shares :
           std::vector<std::vector<double>>{{1}, {5, 3}, {5, 3, 1}, {4, 1, 2, 3}}) {
        std::vector<std::string> devices;
        for (std::size_t i = 0; i < shares.size(); ++i) devices.push_back(fmt::format("d{}", i));
        Plan plan = make_plan(strategy, model.config(), devices, shares);
        // Mixed layouts too: heads with token-split MLP (Hepti's weight-stationary mode).
        for (int mixed = 0; mixed < (strategy == "galaxy" ? 2 : 1); ++mixed) {
          if (mixed) {
            for (LayerPlan& l : plan.layers) l.mlp = BlockSplit::Tokens;
          }
          for (int r = 0; r < plan.num_devices(); ++r) {
            const Program program = lower(model.graph(), model.config(), plan, r);
            EXPECT_EQ(device_memory(f, model.config(), plan, r, 16).weights,
                      static_cast<std::int64_t>(program_weight_bytes(program)))
                << name << " " << strategy << " mixed " << mixed << " device " << r << " of "
                << shares.size();
          }
        }
      }
    }
  }
}

TEST(Footprint, KvCacheFollowsTheHeads) {
  const Model model = Model::load(testing::fixture_model("llama-tiny"));  // 4 heads, 2 kv heads
  const ModelConfig& c = model.config();
  const ModelFootprint f = ModelFootprint::of(model.graph(), c);
  const Plan plan =
      make_plan("megatron", c, {"a", "b", "c"}, {2, 1, 1});  // heads [0,2) [2,3) [3,4)
  const std::int64_t per_kv_head = c.layers * 2 * c.max_positions * c.head_dim * 4;
  EXPECT_EQ(device_memory(f, c, plan, 0, 8).kv_cache, per_kv_head);  // heads 0-1 read kv head 0
  EXPECT_EQ(device_memory(f, c, plan, 1, 8).kv_cache, per_kv_head);  // head 2 reads kv head 1
  const Plan sp = make_plan("sp", c, {"a", "b"}, {});
  EXPECT_EQ(device_memory(f, c, sp, 1, 8).kv_cache, per_kv_head * c.kv_heads);
}

}  // namespace
}  // namespace huddle
