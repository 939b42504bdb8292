// Pipeline plans: the JSON form round-trips, malformed plans are refused naming the cause, and
// lowering cuts the model at unit boundaries with the right transfers.
#include "core/error.h"
#include "model/model.h"
#include "plan/lowering.h"
#include "plan/plan.h"
#include "planner/strategies.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <functional>

namespace huddle {
namespace {

class PipelinePlan : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = std::make_unique<Model>(Model::load(testing::fixture_model("gpt2-tiny")));
    plan_ = make_plan("pipeline", config(), {"a", "b", "c"}, {3, 2, 1});
  }
  const ModelConfig& config() const { return model_->config(); }

  // The plan's JSON with `edit` applied must be refused with a message containing `what`.
  void expect_refused(const std::function<void(nlohmann::json&)>& edit, const std::string& what,
                      const ModelConfig* config_override = nullptr) {
    nlohmann::json j = plan_.to_json();
    edit(j);
    try {
      Plan::from_json(j, "p.json")
          .validate(config_override ? *config_override : config(), "p.json");
      FAIL() << "accepted: " << what;
    } catch (const PlanError& e) {
      EXPECT_TRUE(testing::contains(e.what(), "p.json")) << e.what();
      EXPECT_TRUE(testing::contains(e.what(), what)) << e.what();
    }
  }

  std::unique_ptr<Model> model_;
  Plan plan_;
};

TEST_F(PipelinePlan, UnitsFollowTheShares) {
  ASSERT_TRUE(plan_.pipelined());
  const Pipeline& p = *plan_.pipeline;
  ASSERT_EQ(p.stages.size(), 3u);  // 8 units of a 3-layer model
  EXPECT_EQ(p.stages[0].units, (Range{0, 4}));
  EXPECT_EQ(p.stages[1].units, (Range{4, 7}));
  EXPECT_EQ(p.stages[2].units, (Range{7, 8}));
  EXPECT_TRUE(p.sliced);
  EXPECT_EQ(p.slices.size(), static_cast<std::size_t>(config().max_positions));
  EXPECT_EQ(p.slices_for(7), (std::vector<std::int64_t>{3, 2, 2}));
  EXPECT_EQ(p.slices_for(1), (std::vector<std::int64_t>{1}));
}

TEST_F(PipelinePlan, RoundTripsThroughJson) {
  const nlohmann::json j = plan_.to_json();
  EXPECT_EQ(j["layers"], nlohmann::json::array());
  EXPECT_EQ(j["pipeline"]["stages"][1], nlohmann::json::parse(R"({"device": 1, "units": [4, 7]})"));
  EXPECT_EQ(j["pipeline"]["slices"][3], nlohmann::json::parse("[2, 1, 1]"));
  const Plan back = Plan::from_json(j, "p.json");
  EXPECT_NO_THROW(back.validate(config(), "p.json"));
  EXPECT_EQ(*back.pipeline, *plan_.pipeline);
  EXPECT_EQ(back.to_json(), j);
}

TEST_F(PipelinePlan, MalformedPlansAreRefused) {
  auto& cfg = config();
  expect_refused(
      [](auto& j) {
        j["pipeline"]["stages"][1]["units"] = {5, 7};
      },
      "pipeline.stages[1].units starts at 5, expected 4");
  expect_refused(
      [](auto& j) {
        j["pipeline"]["stages"][2]["units"] = {7, 9};
      },
      "cover units [0, 9) but the model has 8");
  expect_refused([](auto& j) { j["pipeline"]["stages"].erase(2); },
                 "cover units [0, 7) but the model has 8");
  expect_refused(
      [](auto& j) {
        j["pipeline"]["stages"][1]["units"] = {4, 4};
      },
      "not a non-empty range");
  expect_refused([](auto& j) { j["pipeline"]["stages"][2]["device"] = 1; },
                 "device 1 already runs a stage");
  expect_refused([](auto& j) { j["pipeline"]["stages"][2]["device"] = 5; },
                 "device 5 is not one of the plan's 3 devices");
  expect_refused([](auto& j) { j["pipeline"]["stages"] = nlohmann::json::array(); },
                 "at least one stage");
  // A slice table missing a length: the entry for 4 tokens slices 5.
  expect_refused([](auto& j) { j["pipeline"]["slices"].erase(3); },
                 "the slices for 4 tokens sum to 5");
  expect_refused([](auto& j) { j["pipeline"]["slices"][2] = {1, 0, 2}; }, "slice length 0");
  expect_refused([](auto& j) { j["pipeline"].erase("slices"); }, "slices: missing");
  expect_refused([](auto& j) { j["pipeline"]["sliced"] = "yes"; }, "expected true or false");
  expect_refused(
      [](auto& j) { j["layers"] = nlohmann::json::parse(R"([{"attention": "tokens"}])"); },
      "\"layers\" must be empty");
  expect_refused([](auto& j) { j["grid"] = {{"rows", 1}, {"cols", 3}}; }, "either 2d-tiled");
  // A table longer than the context.
  ModelConfig short_context = cfg;
  short_context.max_positions = 64;
  expect_refused([](auto&) {}, "longer than the model's context of 64", &short_context);
  // An encoder cannot be sliced.
  ModelConfig encoder = cfg;
  encoder.causal = false;
  expect_refused([](auto&) {}, "cannot be sliced", &encoder);
}

TEST_F(PipelinePlan, StepsLongerThanTheTableAreRefused) {
  Pipeline p = *plan_.pipeline;
  p.slices.resize(10);
  EXPECT_THROW(p.slices_for(11), InputError);
  EXPECT_NO_THROW(p.slices_for(10));
  EXPECT_THROW(p.slices_for(0), InputError);
}

TEST_F(PipelinePlan, LoweringSendsTheResidualStreamBetweenStages) {
  auto count = [](const Program& p, OpKind kind) {
    int n = 0;
    for (const Op& op : p.graph.ops()) n += op.kind == kind;
    return n;
  };
  const Program first = lower(model_->graph(), config(), plan_, 0);
  const Program middle = lower(model_->graph(), config(), plan_, 1);
  const Program last = lower(model_->graph(), config(), plan_, 2);
  EXPECT_EQ(count(first, OpKind::PipeRecv), 0);
  EXPECT_EQ(count(first, OpKind::PipeSend), 1);
  EXPECT_EQ(count(first, OpKind::Embedding), 2);  // tokens and positions
  EXPECT_EQ(count(middle, OpKind::PipeRecv), 1);
  EXPECT_EQ(count(middle, OpKind::PipeSend), 1);
  EXPECT_EQ(count(middle, OpKind::Embedding), 0);
  EXPECT_EQ(count(last, OpKind::PipeRecv), 1);
  EXPECT_EQ(count(last, OpKind::PipeSend), 1);  // the logits, to device 0
  EXPECT_EQ(count(last, OpKind::LastRow), 1);
  EXPECT_TRUE(first.graph.outputs().empty());
  EXPECT_TRUE(last.graph.outputs().empty());
  for (const Op& op : last.graph.ops()) {
    if (op.kind == OpKind::PipeSend) {
      EXPECT_EQ(op.attrs.peer, 0);
    }
    if (op.kind == OpKind::PipeRecv) {
      EXPECT_EQ(op.attrs.peer, 1);
    }
  }
}

// Group stages (fast islands, plan/pipeline.h): a 3:1 group of devices 2 and 0 (device 0 leads,
// being the primary) after a one-device stage, on 4 plan devices.
class HybridPipelinePlan : public PipelinePlan {
 protected:
  void SetUp() override {
    PipelinePlan::SetUp();
    plan_ =
        pipeline_plan("hpipe", config(), {"a", "b", "c", "d"},
                      {PipelineStage::of({1}, {0, 3}), PipelineStage::of({2, 0}, {3, 8}, {3, 1})},
                      equal_slice_table(config().max_positions, 2));
  }
};

TEST_F(HybridPipelinePlan, RoundTripsThroughJson) {
  const PipelineStage& group = plan_.pipeline->stages[1];
  EXPECT_TRUE(group.grouped());
  EXPECT_EQ(group.device, 0);  // the leader: the group holds the primary
  EXPECT_EQ(group.member_index(2), 0);
  EXPECT_EQ(group.member_index(3), -1);
  EXPECT_EQ(plan_.pipeline->stage_of(2), 1);
  EXPECT_EQ(plan_.pipeline->stage_of(3), -1);
  EXPECT_EQ(group.member_heads(4), (std::vector<Range>{{0, 3}, {3, 4}}));
  const nlohmann::json j = plan_.to_json();
  EXPECT_EQ(j["pipeline"]["stages"][0], nlohmann::json::parse(R"({"device": 1, "units": [0, 3]})"));
  EXPECT_EQ(j["pipeline"]["stages"][1],
            nlohmann::json::parse(R"({"devices": [2, 0], "units": [3, 8], "shares": [3.0, 1.0]})"));
  const Plan back = Plan::from_json(j, "p.json");
  EXPECT_NO_THROW(back.validate(config(), "p.json"));
  EXPECT_EQ(*back.pipeline, *plan_.pipeline);
  EXPECT_EQ(back.to_json(), j);
  // Shares are optional (equal); a group of one device is a one-device stage.
  nlohmann::json equal = j;
  equal["pipeline"]["stages"][1].erase("shares");
  EXPECT_EQ(Plan::from_json(equal, "p.json").pipeline->stages[1].shares,
            (std::vector<double>{1, 1}));
  nlohmann::json one = j;
  one["pipeline"]["stages"][0] = nlohmann::json::parse(R"({"devices": [1], "units": [0, 3]})");
  EXPECT_EQ(Plan::from_json(one, "p.json").pipeline->stages[0], plan_.pipeline->stages[0]);
}

TEST_F(HybridPipelinePlan, MalformedGroupStagesAreRefusedNamingTheField) {
  expect_refused([](auto& j) { j["pipeline"]["stages"][1]["devices"] = nlohmann::json::array(); },
                 "stages[1].devices: a group stage needs at least one device");
  expect_refused(
      [](auto& j) {
        j["pipeline"]["stages"][1]["shares"] = {3, 1, 1};
      },
      "stages[1].shares: 3 shares for 2 devices");
  expect_refused(
      [](auto& j) {
        j["pipeline"]["stages"][1]["shares"] = {3, 0};
      },
      "stages[1].shares[1]: must be > 0");
  expect_refused(
      [](auto& j) {
        j["pipeline"]["stages"][1]["devices"] = {2, 1};
      },
      "pipeline.stages[1].devices: device 1 already runs a stage");
  expect_refused(
      [](auto& j) {
        j["pipeline"]["stages"][1]["devices"] = {2, 2};
      },
      "pipeline.stages[1].devices: device 2 already runs a stage");
  expect_refused(
      [](auto& j) {
        j["pipeline"]["stages"][1]["devices"] = {2, 4};
      },
      "pipeline.stages[1].devices: device 4 is not one of the plan's 4 devices");
  expect_refused([](auto& j) { j["pipeline"]["stages"][1]["device"] = 3; },
                 "stages[1]: a stage has either \"device\" (one device) or \"devices\"");
  expect_refused([](auto& j) { j["pipeline"]["stages"][0]["shares"] = {1}; },
                 "stages[0].shares: only a group stage");
  expect_refused(
      [](auto& j) {
        j["devices"].push_back({{"name", "e"}});
        j["token_shares"].push_back(1);
        j["pipeline"]["stages"][1]["devices"] = {2, 0, 3, 4, 5};
        j["pipeline"]["stages"][1]["shares"] = {1, 1, 1, 1, 1};
      },
      "device 5 is not one of the plan's 5 devices");
  expect_refused(
      [](auto& j) {
        for (const char* name : {"e", "f"}) {
          j["devices"].push_back({{"name", name}});
          j["token_shares"].push_back(1);
        }
        j["pipeline"]["stages"][1]["devices"] = {2, 0, 3, 4, 5};
        j["pipeline"]["stages"][1]["shares"] = {1, 1, 1, 1, 1};
      },
      "pipeline.stages[1].devices: 5 devices in a tensor-parallel group, but the model has 4 "
      "attention heads");
  // Built in code: a group whose leader is not its device, or with shares for another size.
  Plan bad = plan_;
  bad.pipeline->stages[1].device = 2;
  EXPECT_THROW(bad.validate(config(), "p.json"), PlanError);
  bad = plan_;
  bad.pipeline->stages[1].shares = {1};
  try {
    bad.validate(config(), "p.json");
    FAIL() << "accepted one share for two devices";
  } catch (const PlanError& e) {
    EXPECT_TRUE(testing::contains(e.what(), "pipeline.stages[1].devices: 1 shares for 2 devices"))
        << e.what();
  }
}

// Block-quantised weights: a group's FFN columns are fixed on block boundaries, saved with the
// plan, and checked; a member left less than a block is refused naming the stage.
TEST_F(HybridPipelinePlan, BlockQuantisedWeightsFixTheGroupsColumnsOnBlockBoundaries) {
  plan_.pipeline->stages[1].shares = {2, 1};
  const std::int64_t ffn = config().ffn;
  const Plan aligned = plan_.aligned_to_blocks(32, config());
  const std::vector<Range>& columns = aligned.pipeline->stages[1].columns;
  ASSERT_EQ(columns.size(), 2u);
  EXPECT_EQ(columns[0].first, 0);
  EXPECT_EQ(columns[0].second % 32, 0);
  EXPECT_EQ(columns[1].first, columns[0].second);
  EXPECT_EQ(columns[1].second, ffn);
  // The shares' own cut (2/3 of the columns) is not on a block boundary; the fixed one is the
  // nearest that is.
  const std::int64_t by_shares = plan_.pipeline->stages[1].member_columns(ffn)[0].second;
  ASSERT_NE(by_shares % 32, 0);
  EXPECT_LE(std::abs(columns[0].second - by_shares), 16);
  EXPECT_EQ(aligned.pipeline->stages[1].member_columns(ffn), columns);
  EXPECT_TRUE(aligned.pipeline->stages[0].columns.empty());  // one device: nothing to cut
  EXPECT_NO_THROW(aligned.validate(config(), "p.json"));

  const nlohmann::json saved = aligned.to_json();
  EXPECT_EQ(saved["pipeline"]["stages"][1]["columns"],
            nlohmann::json::array({{0, columns[0].second}, {columns[0].second, ffn}}));
  const Plan back = Plan::from_json(saved, "p.json");
  EXPECT_EQ(*back.pipeline, *aligned.pipeline);

  plan_ = aligned;
  expect_refused(
      [](auto& j) {
        j["pipeline"]["stages"][1]["columns"] = {{0, 64}};
      },
      "stages[1].columns: 1 column ranges for 2 devices");
  expect_refused(
      [&](auto& j) {
        j["pipeline"]["stages"][1]["columns"] = {{0, 64}, {96, ffn}};
      },
      "pipeline.stages[1].columns[1] is [96, ");
  expect_refused(
      [&](auto& j) {
        j["pipeline"]["stages"][1]["columns"] = {{0, 64}, {64, ffn - 32}};
      },
      "pipeline.stages[1].columns: the ranges end at");
  expect_refused(
      [](auto& j) {
        j["pipeline"]["stages"][0]["columns"] = {{0, 1}};
      },
      "stages[0].columns: only a group stage");

  Plan narrow = plan_;
  narrow.pipeline->stages[1].columns.clear();
  narrow.pipeline->stages[1].shares = {1, 1000};
  try {
    (void)narrow.aligned_to_blocks(32, config());
    FAIL() << "a member with less than a block of columns was accepted";
  } catch (const PlanError& e) {
    EXPECT_TRUE(testing::contains(e.what(), "pipeline.stages[1].columns[0]")) << e.what();
  }
}

}  // namespace
}  // namespace huddle
