// Every strategy on 2, 3 and 4 devices with uneven shares gives the single-device answer.
// Devices are threads joined by the in-process transport; the programs, collectives and session
// protocol are the ones the TCP workers run.
#include "core/error.h"
#include "io/npy.h"
#include "model/model.h"
#include "net/inproc_transport.h"
#include "plan/lowering.h"
#include "planner/strategies.h"
#include "reference_generation.h"
#include "runtime/executor.h"
#include "runtime/generate.h"
#include "runtime/in_process_cluster.h"
#include "runtime/session.h"
#include "strategy_case.h"
#include "test_util.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <exception>
#include <functional>
#include <thread>

namespace huddle {
namespace {

using Case = testing::StrategyCase;
using testing::case_name;

class Distributed : public ::testing::TestWithParam<Case> {};

TEST_P(Distributed, MatchesSingleDeviceReference) {
  const Case& c = GetParam();
  const Model model = Model::load(testing::fixture_model(c.model));
  std::vector<std::string> devices;
  for (std::size_t i = 0; i < c.shares.size(); ++i) devices.push_back("dev" + std::to_string(i));
  const Plan plan = make_plan(c.strategy, model.config(), devices, c.shares);
  plan.validate(model.config(), "test plan");

  const std::string stem = "references/" + c.model + ".16";
  const auto ids = testing::read_ids(testing::fixture(stem + ".ids.json"));
  const Tensor reference = io::read_npy(testing::fixture(stem + ".npy"));
  Tensor out;
  run_in_process(model, plan, [&](StepRunner& runner) { out = runner.forward(ids, true).clone(); });
  ASSERT_EQ(out.shape(), reference.shape());
  EXPECT_LE(testing::relative_error(out, reference), 1e-4);

  if (!model.config().causal) return;
  testing::expect_reference_greedy(model, plan, c.model);
}

// Galaxy's gathers in chunks (Plan::gather_chunks): the linears run on each chunk of rows as it
// lands, down to one row per chunk, and the answer stays the single-device one.
TEST(DistributedChunks, GalaxyWithChunkedGathersMatchesTheReference) {
  for (const std::string model_name : {"gpt2-tiny", "llama-tiny"}) {
    const Model model = Model::load(testing::fixture_model(model_name));
    const std::string stem = "references/" + model_name + ".16";
    const auto ids = testing::read_ids(testing::fixture(stem + ".ids.json"));
    const Tensor reference = io::read_npy(testing::fixture(stem + ".npy"));
    for (const std::vector<double>& shares :
         std::vector<std::vector<double>>{{5, 3, 1}, {4, 1, 2, 3}}) {
      for (const int chunks : {3, Plan::kMaxGatherChunks}) {
        std::vector<std::string> devices;
        for (std::size_t i = 0; i < shares.size(); ++i) devices.push_back("d" + std::to_string(i));
        Plan plan = make_plan("galaxy", model.config(), devices, shares);
        plan.gather_chunks = chunks;
        plan.validate(model.config(), "test plan");
        Tensor out;
        run_in_process(model, plan,
                       [&](StepRunner& runner) { out = runner.forward(ids, true).clone(); });
        ASSERT_EQ(out.shape(), reference.shape());
        EXPECT_LE(testing::relative_error(out, reference), 1e-4)
            << model_name << " " << shares.size() << " devices, " << chunks << " chunks";
        testing::expect_reference_greedy(model, plan, model_name);
      }
    }
  }
}

TEST(DistributedChunks, GatherChunksRoundTripThroughJsonAndOutOfRangeCountsAreRefused) {
  const Model model = Model::load(testing::fixture_model("gpt2-tiny"));
  Plan plan = make_plan("galaxy", model.config(), {"a", "b"}, {1, 1});
  EXPECT_FALSE(plan.to_json().contains("gather_chunks"));  // plans without it read as before
  plan.gather_chunks = 8;
  nlohmann::json j = plan.to_json();
  EXPECT_EQ(j["gather_chunks"], 8);
  EXPECT_EQ(Plan::from_json(j, "p.json").gather_chunks, 8);
  for (const int bad : {0, -1, Plan::kMaxGatherChunks + 1}) {
    j["gather_chunks"] = bad;
    try {
      Plan::from_json(j, "p.json");
      ADD_FAILURE() << bad << " chunks accepted";
    } catch (const PlanError& e) {
      EXPECT_NE(std::string(e.what()).find("p.json: gather_chunks"), std::string::npos) << e.what();
    }
  }
}

// The LM head whole on device 0 (a plan without "vocab") or split by vocabulary rows, evenly,
// unevenly and down to one row on a device: the single-device answer, tied (gpt2-tiny: the head
// is the embedding table) and untied (llama-tiny). With the split, device 0 gathers the logits'
// columns and every device holds its rows of the head, no more.
TEST(DistributedHead, WholeOnThePrimaryOrSplitByVocabularyMatchesTheReference) {
  for (const std::string model_name : {"gpt2-tiny", "llama-tiny"}) {
    const Model model = Model::load(testing::fixture_model(model_name));
    const std::int64_t V = model.config().vocab_size;
    const std::string stem = "references/" + model_name + ".16";
    const auto ids = testing::read_ids(testing::fixture(stem + ".ids.json"));
    const Tensor reference = io::read_npy(testing::fixture(stem + ".npy"));
    for (const std::string strategy : {"megatron", "galaxy", "sp"}) {
      const Plan split = make_plan(strategy, model.config(), {"a", "b", "c"}, {5, 3, 1});
      ASSERT_EQ(split.vocab.size(), 3u) << "make_plan splits a causal model's head";
      for (const std::vector<Range>& vocab :
           std::vector<std::vector<Range>>{{}, split.vocab, {{0, 1}, {1, V - 1}, {V - 1, V}}}) {
        Plan plan = split;
        plan.vocab = vocab;
        plan.validate(model.config(), "test plan");
        const std::string what =
            fmt::format("{} {} vocab {}", model_name, strategy,
                        vocab.empty() ? "whole" : plan.to_json()["vocab"].dump());
        Tensor out;
        run_in_process(model, plan,
                       [&](StepRunner& runner) { out = runner.forward(ids, true).clone(); });
        ASSERT_EQ(out.shape(), reference.shape()) << what;
        EXPECT_LE(testing::relative_error(out, reference), 1e-4) << what;
        testing::expect_reference_greedy(model, plan, model_name);

        for (int r = 0; r < plan.num_devices(); ++r) {
          const Program program = lower(model.graph(), model.config(), plan, r);
          std::int64_t head_rows = 0, gathers = 0;
          for (const Op& op : program.graph.ops()) {
            if (op.kind == OpKind::GatherColsToPrimary) ++gathers;
            if (op.role == OpRole::Head && op.kind == OpKind::Linear)
              head_rows = program.graph.value(op.inputs[1]).shape[0];
          }
          EXPECT_EQ(gathers, vocab.empty() ? 0 : 1) << what << " device " << r;
          const auto [vb, ve] =
              vocab.empty() ? Range{0, r == 0 ? V : 0} : vocab[static_cast<std::size_t>(r)];
          EXPECT_EQ(head_rows, ve - vb) << what << " device " << r;
        }
      }
    }
  }
}

TEST(DistributedHead, VocabularyRangesAreCheckedAgainstThePlanAndTheModel) {
  const Model gpt2 = Model::load(testing::fixture_model("gpt2-tiny"));
  const std::int64_t V = gpt2.config().vocab_size;
  Plan plan = make_plan("megatron", gpt2.config(), {"a", "b"}, {1, 1});
  nlohmann::json j = plan.to_json();
  EXPECT_EQ(Plan::from_json(j, "p.json").vocab, plan.vocab);
  const auto refused = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const PlanError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  j["vocab"] = {{0, V}};
  EXPECT_NE(refused([&] { Plan::from_json(j, "p.json"); }).find("p.json: vocab"),
            std::string::npos);
  plan.vocab = {{0, 10}, {10, V - 1}};
  EXPECT_NE(refused([&] {
              plan.validate(gpt2.config(), "p.json");
            }).find(fmt::format("vocab covers [0, {})", V - 1)),
            std::string::npos);
  plan.vocab = {{0, 0}, {0, V}};
  EXPECT_NE(refused([&] { lower(gpt2.graph(), gpt2.config(), plan, 0); }).find("no rows"),
            std::string::npos);
  // One device computes the whole head, whatever its one range says.
  Plan one = make_plan("local", gpt2.config(), {"a"}, {});
  one.vocab = {{0, V}};
  one.validate(gpt2.config(), "p.json");
  const Program alone = lower(gpt2.graph(), gpt2.config(), one, 0);
  for (const Op& op : alone.graph.ops()) EXPECT_NE(op.kind, OpKind::GatherColsToPrimary) << op.name;
  // An encoder has no head to split.
  const Model bert = Model::load(testing::fixture_model("bert-tiny"));
  Plan encoder = make_plan("megatron", bert.config(), {"a", "b"}, {1, 1});
  EXPECT_TRUE(encoder.vocab.empty());
  encoder.vocab = {{0, 1}, {1, bert.config().vocab_size}};
  EXPECT_NE(refused([&] { lower(bert.graph(), bert.config(), encoder, 0); }).find("no head"),
            std::string::npos);
  // Only layer-split plans split the head.
  nlohmann::json pipeline = make_plan("pipeline", gpt2.config(), {"a", "b"}, {1, 1}).to_json();
  pipeline["vocab"] = {{0, 1}, {1, V}};
  EXPECT_NE(refused([&] { Plan::from_json(pipeline, "p.json"); }).find("layer-split"),
            std::string::npos);
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const std::string model : {"gpt2-tiny", "bert-tiny", "llama-tiny"}) {
    for (const std::string strategy : {"megatron", "sp", "galaxy"}) {
      for (const std::vector<double>& shares :
           std::vector<std::vector<double>>{{5, 3}, {5, 3, 1}, {4, 1, 2, 3}}) {
        cases.push_back({model, strategy, shares});
      }
    }
    cases.push_back({model, "galaxy", {1}});
    cases.push_back({model, "local", {1, 1}});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Strategies, Distributed, ::testing::ValuesIn(all_cases()),
                         [](const auto& p) { return case_name(p.param); });

}  // namespace
}  // namespace huddle
