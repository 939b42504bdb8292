// 2D-tiled plans: the JSON form round-trips, older plans load unchanged, malformed plans are
// refused naming the field, and lowering gives each device its tiles and group collectives.
#include "core/error.h"
#include "model/model.h"
#include "plan/lowering.h"
#include "plan/plan.h"
#include "planner/hepti_planner.h"
#include "planner/strategies.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <functional>
#include <map>

namespace huddle {
namespace {

class Plan2D : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = std::make_unique<Model>(Model::load(testing::fixture_model("llama-tiny")));
    plan_ = tiled_2d_plan(config(), {"a", "b", "c", "d", "e", "f"}, Grid{2, 3}, {5, 3, 1, 2, 2, 4});
  }
  const ModelConfig& config() const { return model_->config(); }

  // The plan's JSON with `edit` applied must be refused with a message containing `field`
  // (and `what`), at parse or at validation.
  void expect_refused(const std::function<void(nlohmann::json&)>& edit, const std::string& field,
                      const std::string& what = "") {
    nlohmann::json j = plan_.to_json();
    edit(j);
    try {
      Plan::from_json(j, "p.json").validate(config(), "p.json");
      FAIL() << "accepted: " << field;
    } catch (const PlanError& e) {
      EXPECT_TRUE(testing::contains(e.what(), "p.json: " + field)) << e.what();
      EXPECT_TRUE(testing::contains(e.what(), what)) << e.what();
    }
  }

  std::unique_ptr<Model> model_;
  Plan plan_;
};

TEST_F(Plan2D, RoundTripsThroughJson) {
  const nlohmann::json j = plan_.to_json();
  EXPECT_EQ(j["grid"], (nlohmann::json{{"rows", 2}, {"cols", 3}}));
  EXPECT_EQ(j["layers"][0]["attention"], "2d-tiled");
  EXPECT_EQ(j["layers"][0]["hidden"], nlohmann::json::parse("[[0, 68], [68, 128]]"));
  EXPECT_EQ(j["layers"][0]["heads"], nlohmann::json::parse("[[0, 2], [2, 3], [3, 4]]"));
  const Plan back = Plan::from_json(j, "p.json");
  EXPECT_NO_THROW(back.validate(config(), "p.json"));
  ASSERT_TRUE(back.grid);
  EXPECT_EQ(*back.grid, (Grid{2, 3}));
  EXPECT_EQ(back.layers[2].hidden, plan_.layers[2].hidden);
  EXPECT_EQ(back.layers[2].columns, plan_.layers[2].columns);
  EXPECT_EQ(back.to_json(), j);
}

TEST_F(Plan2D, OlderPlansLoadUnchanged) {
  const Plan megatron = make_plan("megatron", config(), {"a", "b"}, {5, 3});
  const nlohmann::json j = megatron.to_json();
  EXPECT_FALSE(j.contains("grid"));
  const Plan back = Plan::from_json(j, "old.json");
  EXPECT_FALSE(back.grid);
  EXPECT_EQ(back.to_json(), j);
  EXPECT_NO_THROW(back.validate(config(), "old.json"));
}

TEST_F(Plan2D, GridHelpers) {
  const Grid g{2, 3};
  EXPECT_EQ(g.row_group(1), (std::vector<int>{3, 4, 5}));
  EXPECT_EQ(g.column_group(2), (std::vector<int>{2, 5}));
  EXPECT_EQ(g.row_of(4), 1);
  EXPECT_EQ(g.col_of(4), 1);
  EXPECT_EQ(hepti_grid(16), (Grid{4, 4}));
  EXPECT_EQ(hepti_grid(6), (Grid{2, 3}));
  EXPECT_EQ(hepti_grid(5), (Grid{1, 5}));
}

TEST_F(Plan2D, MalformedPlansAreRefusedNamingTheField) {
  expect_refused([](auto& j) { j["grid"]["cols"] = 2; }, "grid", "a 2 x 2 grid for 6 devices");
  expect_refused([](auto& j) { j["grid"]["rows"] = 0; }, "grid.rows", "at least one");
  expect_refused([](auto& j) { j["grid"].erase("cols"); }, "grid.cols", "missing");
  expect_refused([](auto& j) { j["grid"]["rows"] = "2"; }, "grid.rows", "expected an integer");
  expect_refused([](auto& j) { j["layers"][1]["attention"] = "heads"; }, "layers[1].attention",
                 "every layer must be '2d-tiled'");
  expect_refused([](auto& j) { j["layers"][0]["mlp"] = "columns"; }, "layers[0].mlp");
  expect_refused([](auto& j) { j["layers"][0]["residual"] = "tokens"; }, "layers[0].residual");
  expect_refused(
      [](auto& j) {
        j["layers"][2]["hidden"].push_back({128, 128});
      },
      "layers[2].hidden", "3 ranges for 2 grid rows");
  expect_refused([](auto& j) { j["layers"][0]["heads"].erase(0); }, "layers[0].heads",
                 "2 ranges for 3 grid columns");
  expect_refused([](auto& j) { j["layers"][0].erase("columns"); }, "layers[0].columns", "missing");
  expect_refused([](auto& j) { j["layers"][1]["hidden"][1][1] = 100; }, "layers[1].hidden",
                 "covers [0, 100) but the model has 128");
  expect_refused([](auto& j) { j["layers"][1]["hidden"][1][0] = 90; }, "layers[1].hidden[1]",
                 "starts at 90");
  expect_refused(
      [](auto& j) { j["layers"][2]["heads"] = nlohmann::json::parse("[[0, 2], [2, 2], [2, 4]]"); },
      "layers[2].heads[1]", "is empty");
  expect_refused(
      [](auto& j) {
        j["layers"][0]["columns"][0] = {5, 1};
      },
      "layers[0].columns[0]", "is not a range");
  // A 2d-tiled layer without a grid.
  expect_refused([](auto& j) { j.erase("grid"); }, "layers[0].attention", "needs the plan's");
}

TEST_F(Plan2D, LoweringGivesTilesAndGroupCollectives) {
  // Device 4 is grid cell (1, 1): hidden [68, 128), heads [2, 3) (kv head 1), columns [..).
  const Program p = lower(model_->graph(), config(), plan_, 4);
  const std::int64_t d = config().head_dim;
  const auto [cb, ce] = plan_.layers[0].columns[1];
  std::map<std::string, Shape> weights;
  for (const Value& v : p.graph.values()) {
    if (v.kind == ValueKind::Weight) weights[v.weight.tensor] = v.shape;
  }
  EXPECT_EQ(weights.at("model.layers.0.self_attn.q_proj.weight"), (Shape{d, 60}));
  EXPECT_EQ(weights.at("model.layers.0.self_attn.k_proj.weight"), (Shape{d, 60}));
  EXPECT_EQ(weights.at("model.layers.0.self_attn.o_proj.weight"), (Shape{60, d}));
  EXPECT_EQ(weights.at("model.layers.0.mlp.up_proj.weight"), (Shape{ce - cb, 60}));
  EXPECT_EQ(weights.at("model.layers.0.mlp.down_proj.weight"), (Shape{60, ce - cb}));
  EXPECT_FALSE(weights.contains("model.embed_tokens.weight"));  // on the primary only
  std::map<std::vector<int>, int> collectives;
  for (const Op& op : p.graph.ops()) {
    if (op.kind == OpKind::AllReduce || op.kind == OpKind::AllGather ||
        op.kind == OpKind::ReduceScatter || op.kind == OpKind::AllGatherCols) {
      ASSERT_FALSE(op.attrs.group.empty()) << op.name;
      ++collectives[op.attrs.group];
    }
  }
  // Per layer: row group (3, 4, 5) all-reduces the two row-tiled outputs; column group (1, 4)
  // reduces q, k, v, gate, up, gathers attention and MLP outputs and the hidden columns.
  EXPECT_EQ(collectives.size(), 2u);
  EXPECT_EQ(collectives[(std::vector<int>{3, 4, 5})], 2 * 3);
  EXPECT_EQ(collectives[(std::vector<int>{1, 4})], 9 * 3);
}

}  // namespace
}  // namespace huddle
