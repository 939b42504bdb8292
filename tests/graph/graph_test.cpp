#include "graph/graph.h"
#include "core/error.h"
#include "model/architecture.h"
#include "model/model.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace huddle {
namespace {

TEST(Graph, InfersShapesWithSymbolicTokens) {
  Graph g;
  const ValueId x = g.add_input("x_ids", {kTokens}, DType::I32);
  const ValueId table = g.add_weight("table", {10, 8}, WeightRef{"table", {10, 8}});
  const ValueId e = g.add_op(OpKind::Embedding, "embed", {x, table});
  const ValueId w = g.add_weight("w", {8, 6}, WeightRef{"w", {8, 6}});
  OpAttrs in_out;
  in_out.weight_layout = kernels::WeightLayout::InOut;
  const ValueId y = g.add_op(OpKind::Linear, "proj", {e, w}, in_out);
  EXPECT_EQ(g.value(e).shape, (Shape{kTokens, 8}));
  EXPECT_EQ(g.value(y).shape, (Shape{kTokens, 6}));
  g.add_output(y);
  EXPECT_NO_THROW(g.validate());
}

TEST(Graph, ShapeMismatchNamesTheOp) {
  Graph g;
  const ValueId a = g.add_input("a", {kTokens}, DType::I32);
  const ValueId table = g.add_weight("table", {10, 8}, WeightRef{"table", {10, 8}});
  const ValueId e = g.add_op(OpKind::Embedding, "embed", {a, table});
  const ValueId w = g.add_weight("w", {6, 7}, WeightRef{"w", {6, 7}});  // OutIn: needs K = 8
  try {
    g.add_op(OpKind::Linear, "bad_proj", {e, w});
    ADD_FAILURE();
  } catch (const PlanError& e2) {
    EXPECT_NE(std::string(e2.what()).find("bad_proj"), std::string::npos) << e2.what();
  }
  OpAttrs attn;
  attn.heads = 3;
  attn.kv_heads = 2;  // 3 is not a multiple of 2
  attn.head_dim = 4;
  attn.cache_slot = 0;
  EXPECT_THROW(g.add_op(OpKind::Attention, "attn", {e, e, e}, attn), PlanError);
  EXPECT_THROW(g.add_op(OpKind::Add, "add", {e, 99}), PlanError);
}

TEST(Graph, FixtureGraphsAreWellFormedAndTagged) {
  for (const std::string name : {"gpt2-tiny", "bert-tiny", "llama-tiny"}) {
    const Model model = Model::load(testing::fixture_model(name));
    const Graph& g = model.graph();
    EXPECT_NO_THROW(g.validate());
    EXPECT_EQ(g.num_cache_slots(), 3) << name;
    int attn_q = 0, mlp_down = 0;
    for (const Op& op : g.ops()) {
      attn_q += op.role == OpRole::AttnQ;
      mlp_down += op.role == OpRole::MlpDown;
      if (op.layer >= 0) {
        EXPECT_TRUE(op.name.starts_with("blk." + std::to_string(op.layer) + ".")) << op.name;
      }
    }
    EXPECT_EQ(attn_q, 3) << name;
    EXPECT_EQ(mlp_down, 3) << name;
    const nlohmann::json j = g.to_json();
    EXPECT_EQ(j["ops"].size(), g.ops().size());
    ASSERT_TRUE(g.find("blk.1.attn").has_value()) << name;
  }
}

}  // namespace
}  // namespace huddle
