// Token-split attention (sp) gathers every device's keys and values in one all-gather per layer
// (LoweringEngine::get_gathered_together): their columns joined, gathered, and read back as
// column views; with int8 on the wire (a scale per row) they go as two. The values themselves
// are checked against the references by the distributed tests of every strategy.
#include "model/model.h"
#include "plan/lowering.h"
#include "planner/strategies.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

namespace huddle {
namespace {

struct GatherCount {
  int all_gathers = 0;  // every AllGather of the program
  int kv_together = 0;  // AllGathers whose readers are the k and v column views
  int attention_ops = 0;
};

GatherCount count_gathers(const Program& program) {
  GatherCount c;
  const Graph& g = program.graph;
  std::map<ValueId, int> column_views;  // gathered value -> SliceCols reading it
  for (const Op& op : g.ops()) {
    if (op.kind == OpKind::SliceCols) ++column_views[op.inputs[0]];
    if (op.kind == OpKind::Attention) ++c.attention_ops;
  }
  for (const Op& op : g.ops()) {
    if (op.kind != OpKind::AllGather) continue;
    ++c.all_gathers;
    if (column_views[op.output] == 2) ++c.kv_together;
  }
  return c;
}

const Op* producer(const Graph& g, ValueId id) {
  for (const Op& op : g.ops()) {
    if (op.output == id) return &op;
  }
  return nullptr;
}

class FusedGather : public ::testing::TestWithParam<std::string> {};

TEST_P(FusedGather, KeysAndValuesTravelInOneAllGatherPerLayer) {
  const Model model = Model::load(testing::fixture_model(GetParam()));
  const int layers = model.config().layers;
  Plan plan = make_plan("sp", model.config(), {"a", "b", "c"}, {5, 3, 1});
  for (int rank = 0; rank < 3; ++rank) {
    const Program program = lower(model.graph(), model.config(), plan, rank);
    const GatherCount c = count_gathers(program);
    EXPECT_EQ(c.attention_ops, layers);
    EXPECT_EQ(c.kv_together, layers) << "rank " << rank;
    for (const Op& op : program.graph.ops()) {
      if (op.kind != OpKind::Attention) continue;
      // k and v are views of one gathered [T, 2 kv] value.
      const Op* k = producer(program.graph, op.inputs[1]);
      const Op* v = producer(program.graph, op.inputs[2]);
      ASSERT_TRUE(k && v);
      EXPECT_EQ(k->kind, OpKind::SliceCols);
      EXPECT_EQ(v->kind, OpKind::SliceCols);
      EXPECT_EQ(k->inputs[0], v->inputs[0]);
      EXPECT_EQ(k->attrs.col_begin, 0);
      EXPECT_EQ(v->attrs.col_begin, k->attrs.width);
    }
  }
  // Data movement carries the layer of the value it moves (traces file communication by layer).
  const Program rank1 = lower(model.graph(), model.config(), plan, 1);
  for (const Op& op : rank1.graph.ops()) {
    if (op.kind == OpKind::AllGather && op.name.starts_with("blk.")) {
      EXPECT_GE(op.layer, 0) << op.name;
      EXPECT_TRUE(op.name.starts_with("blk." + std::to_string(op.layer) + ".")) << op.name;
    }
  }
  // With int8's per-row scale the two are gathered apart: one more gather per layer.
  const GatherCount fused = count_gathers(lower(model.graph(), model.config(), plan, 1));
  plan.wire = WireFormat::Int8;
  const GatherCount apart = count_gathers(lower(model.graph(), model.config(), plan, 1));
  EXPECT_EQ(apart.kv_together, 0);
  EXPECT_EQ(apart.all_gathers, fused.all_gathers + layers);
}

INSTANTIATE_TEST_SUITE_P(Models, FusedGather,
                         ::testing::Values("gpt2-tiny", "llama-tiny", "bert-tiny", "phi3-tiny"),
                         [](const auto& param_info) {
                           std::string name = param_info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace huddle
