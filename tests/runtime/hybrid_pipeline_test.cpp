// Hybrid pipelines (HPipe's fast islands): a pipeline stage made of a device group that runs its
// units tensor-parallel (heads and FFN columns split by uneven shares, all-reduces inside the
// group), next to one-device stages. GPT-2 and Llama on 3 and 4 in-process devices, the group
// first, in the middle and last, holding the primary or not; prompts of 1, 7 and 40 tokens cut
// by random slicings; logits within 1e-4 x max|ref| of the float64 reference and greedy ids
// identical to one device's over 16 decode steps.
#include "io/npy.h"
#include "model/model.h"
#include "pipeline_references.h"
#include "plan/lowering.h"
#include "planner/strategies.h"
#include "reference_generation.h"
#include "runtime/executor.h"
#include "runtime/generate.h"
#include "runtime/in_process_cluster.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <random>

namespace huddle {
namespace {

using testing::random_slice_table;
using testing::reference_ids;
using testing::reference_rows;

struct StageCase {
  std::vector<int> members;    // one device, or a group in group order
  Range units;                 // over the tiny models' 8 units (3 layers)
  std::vector<double> shares;  // a group's
};

struct HybridCase {
  std::string model;
  int devices;
  std::vector<StageCase> stages;
};

Plan hybrid_plan(const ModelConfig& config, const HybridCase& c) {
  std::vector<std::string> names;
  for (int d = 0; d < c.devices; ++d) names.push_back("dev" + std::to_string(d));
  Plan plan = pipeline_plan("test", config, names, std::vector<int>(c.stages.size(), 0),
                            std::vector<Range>(c.stages.size()), random_slice_table(64, 11));
  for (std::size_t s = 0; s < c.stages.size(); ++s) {
    const StageCase& st = c.stages[s];
    plan.pipeline->stages[s] = PipelineStage::of(st.members, st.units, st.shares);
  }
  return plan;
}

class HybridPipelines : public ::testing::TestWithParam<HybridCase> {};

TEST_P(HybridPipelines, LogitsAndGreedyMatchTheSingleDeviceAnswer) {
  const HybridCase& c = GetParam();
  const Model model = Model::load(testing::fixture_model(c.model));
  const Plan plan = hybrid_plan(model.config(), c);
  plan.validate(model.config(), "test plan");
  for (const std::int64_t n : {1, 7, 40}) {
    const auto ids = reference_ids(c.model, n);
    Tensor out;
    run_in_process(model, plan,
                   [&](StepRunner& runner) { out = runner.forward(ids, true).clone(); });
    const Tensor reference = reference_rows(c.model, n);
    ASSERT_EQ(out.shape(), reference.shape()) << n << " tokens";
    EXPECT_LE(testing::relative_error(out, reference), 1e-4) << n << " tokens";
  }
  for (const std::int64_t n : {1, 7, 40}) {
    const auto prompt = reference_ids(c.model, n);
    GenerationOptions options;
    options.n_predict = 16;
    Executor single(model.graph(), model.weights(), model.config().max_positions);
    const GenerationResult expected = generate(single, prompt, options);
    GenerationResult got;
    run_in_process(model, plan,
                   [&](StepRunner& runner) { got = generate(runner, prompt, options); });
    EXPECT_EQ(got.generated, expected.generated) << n << " tokens";
  }
  testing::expect_reference_greedy(model, plan, c.model);
}

INSTANTIATE_TEST_SUITE_P(
    Islands, HybridPipelines,
    ::testing::Values(
        // 3 devices: the primary leads a 3:1 group holding the embedding, then one device
        HybridCase{"gpt2-tiny", 3, {{{0, 1}, {0, 4}, {3, 1}}, {{2}, {4, 8}, {}}}},
        // 3 devices: one device, then a 1:3 group with the primary listed second (it leads, as
        // the group holds device 0) computing the head
        HybridCase{"llama-tiny", 3, {{{2}, {0, 3}, {}}, {{1, 0}, {3, 8}, {1, 3}}}},
        // 4 devices: the group in the middle, the primary first
        HybridCase{
            "llama-tiny", 4, {{{0}, {0, 2}, {}}, {{2, 3}, {2, 6}, {3, 1}}, {{1}, {6, 8}, {}}}},
        // 4 devices: the primary in no stage; a 1:2 group last, sending the logits to it
        HybridCase{"gpt2-tiny", 4, {{{1}, {0, 3}, {}}, {{3, 2}, {3, 8}, {1, 2}}}},
        // 4 devices: a group first (embedding on both), then two one-device stages
        HybridCase{
            "llama-tiny", 4, {{{1, 2}, {0, 5}, {2, 1}}, {{3}, {5, 7}, {}}, {{0}, {7, 8}, {}}}},
        // 4 devices: a group of three with the primary
        HybridCase{"gpt2-tiny", 4, {{{3}, {0, 2}, {}}, {{0, 2, 1}, {2, 8}, {3, 2, 1}}}}),
    [](const auto& p) { return std::string("case") + std::to_string(p.index); });

// BERT attends in both directions: pipelined unsliced, with a 2:1 group holding its embedding
// and first layer (every member embeds), then one device.
TEST(HybridPipelineBert, AnUnslicedGroupStageMatchesTheReference) {
  const Model model = Model::load(testing::fixture_model("bert-tiny"));
  const auto ids = testing::read_ids(testing::fixture("references/bert-tiny.16.ids.json"));
  const Tensor reference = io::read_npy(testing::fixture("references/bert-tiny.16.npy"));
  for (const HybridCase& c :
       {HybridCase{"bert-tiny", 3, {{{1, 2}, {0, 3}, {2, 1}}, {{0}, {3, 8}, {}}}},
        HybridCase{"bert-tiny", 3, {{{0}, {0, 4}, {}}, {{2, 1}, {4, 8}, {1, 2}}}}}) {
    Plan plan = hybrid_plan(model.config(), c);
    plan.pipeline->sliced = false;
    plan.pipeline->slices.clear();
    plan.validate(model.config(), "test plan");
    Tensor out;
    run_in_process(model, plan,
                   [&](StepRunner& runner) { out = runner.forward(ids, true).clone(); });
    ASSERT_EQ(out.shape(), reference.shape());
    EXPECT_LE(testing::relative_error(out, reference), 1e-4);
  }
}

int count(const Program& p, OpKind kind) {
  int n = 0;
  for (const Op& op : p.graph.ops()) n += op.kind == kind;
  return n;
}

// The group's members split its layers' attention and MLP weights: each holds its heads and
// columns and the replicated norms; the leader alone passes the residual stream on and, in the
// last stage, holds the head. Two all-reduces per layer run over the group, nowhere else.
TEST(HybridLowering, GroupMembersSplitTheirLayersAndTheLeaderTalksToTheOtherStages) {
  const Model model = Model::load(testing::fixture_model("llama-tiny"));
  const Plan plan =
      hybrid_plan(model.config(), {"llama-tiny", 3, {{{2}, {0, 3}, {}}, {{1, 0}, {3, 8}, {1, 3}}}});
  const Program leader = lower(model.graph(), model.config(), plan, 0);
  const Program member = lower(model.graph(), model.config(), plan, 1);
  const Program first = lower(model.graph(), model.config(), plan, 2);
  // Units 3..7: layers 1 and 2, the head: 4 row-parallel linears to reduce.
  for (const Program* p : {&leader, &member}) {
    EXPECT_EQ(count(*p, OpKind::AllReduce), 4);
    for (const Op& op : p->graph.ops()) {
      if (op.kind == OpKind::AllReduce) {
        EXPECT_EQ(op.attrs.group, (std::vector<int>{1, 0}));
      }
    }
  }
  EXPECT_EQ(count(first, OpKind::AllReduce), 0);
  EXPECT_EQ(count(first, OpKind::PipeSend), 1);  // to the group's leader, device 0
  for (const Op& op : first.graph.ops()) {
    if (op.kind == OpKind::PipeSend) {
      EXPECT_EQ(op.attrs.peer, 0);
    }
  }
  EXPECT_EQ(count(leader, OpKind::PipeRecv), 1);
  EXPECT_EQ(count(leader, OpKind::PipeSend), 1);  // on to device 1
  EXPECT_EQ(count(member, OpKind::PipeRecv), 1);
  EXPECT_EQ(count(member, OpKind::PipeSend), 0);
  EXPECT_FALSE(leader.graph.outputs().empty());
  EXPECT_TRUE(member.graph.outputs().empty());
  // Shares 1:3 of 4 heads: device 1 one head, device 0 three; the head weight on device 0 only.
  EXPECT_LT(program_weight_bytes(member), program_weight_bytes(leader));
  bool member_has_head = false;
  for (const Op& op : member.graph.ops()) member_has_head |= op.role == OpRole::Head;
  EXPECT_FALSE(member_has_head);
}

}  // namespace
}  // namespace huddle
