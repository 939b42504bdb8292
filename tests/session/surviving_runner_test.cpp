// SurvivingRunner in one process: a runner that fails on its n-th step (as a cluster whose worker
// died) is replaced, the tokens since the last reset are re-fed, and generation goes on with the
// single-device greedy ids and logits.
#include "session/surviving_runner.h"
#include "model/model.h"
#include "runtime/executor.h"
#include "runtime/generate.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <memory>

namespace huddle {
namespace {

// An executor that throws TransportError on forward call number `fail_at` (1-based; 0: never).
class FailingRunner final : public StepRunner {
 public:
  FailingRunner(const Model& model, int fail_at)
      : executor_(model.graph(), model.weights(), model.config().max_positions),
        fail_at_(fail_at) {}
  Tensor forward(std::span<const std::int32_t> ids, bool all_rows) override {
    if (++calls_ == fail_at_) throw TransportError("127.0.0.1:9: peer closed the connection");
    return executor_.forward(ids, all_rows);
  }
  void reset() override { executor_.reset(); }
  std::int64_t position() const override { return executor_.position(); }
  std::int64_t max_positions() const override { return executor_.max_positions(); }

 private:
  Executor executor_;
  int fail_at_;
  int calls_ = 0;
};

// Fails the first runner at step `fail_at`, then its replacements at the steps `again` lists.
class FakeRebuilder final : public Rebuilder {
 public:
  FakeRebuilder(const Model& model, int fail_at, std::vector<int> again = {})
      : model_(model), again_(std::move(again)) {
    runner_ = std::make_unique<FailingRunner>(model_, fail_at);
  }
  StepRunner& active() override { return *runner_; }
  std::vector<std::string> rebuild(const TransportError& error) override {
    reasons.push_back(error.what());
    const int next = rebuilds < static_cast<int>(again_.size()) ? again_[rebuilds] : 0;
    runner_ = std::make_unique<FailingRunner>(model_, next);
    return {"device-" + std::to_string(++rebuilds)};
  }
  void recovered(const Recovery& r) override { recoveries.push_back(r); }
  // A planned switch before the request's step `switch_at` (1-based; 0: never): a new runner.
  bool switch_plan() override {
    if (++asked != switch_at) return false;
    runner_ = std::make_unique<FailingRunner>(model_, 0);
    ++switches;
    return true;
  }

  int switch_at = 0;
  int asked = 0;
  int switches = 0;
  int rebuilds = 0;
  std::vector<std::string> reasons;
  std::vector<Recovery> recoveries;

 private:
  const Model& model_;
  std::vector<int> again_;
  std::unique_ptr<FailingRunner> runner_;
};

struct Reference {
  std::vector<std::int32_t> prompt, greedy;
};
Reference reference(const std::string& model) {
  std::ifstream in(testing::fixture("references/" + model + ".generate.json"));
  const nlohmann::json j = nlohmann::json::parse(in);
  return {j["prompt"].get<std::vector<std::int32_t>>(),
          j["greedy"].get<std::vector<std::int32_t>>()};
}

TEST(SurvivingRunner, AnyFailedStepIsReplayedAndGreedyIdsAreOneDevices) {
  for (const std::string name : {"gpt2-tiny", "llama-tiny"}) {
    const Model model = Model::load(testing::fixture_model(name));
    const Reference ref = reference(name);
    GenerationOptions options;
    options.n_predict = static_cast<int>(ref.greedy.size());
    // Step 1 is the prefill, step k > 1 the (k-1)-th decode step.
    for (int fail_at = 1; fail_at <= options.n_predict; fail_at += 3) {
      FakeRebuilder rebuilder(model, fail_at);
      SurvivingRunner runner(rebuilder, true);
      const GenerationResult result = generate(runner, ref.prompt, options);
      EXPECT_EQ(result.generated, ref.greedy) << name << " failing at step " << fail_at;
      ASSERT_EQ(rebuilder.recoveries.size(), 1u);
      const Recovery& r = rebuilder.recoveries.front();
      EXPECT_EQ(r.lost, std::vector<std::string>{"device-1"});
      EXPECT_TRUE(testing::contains(r.reason, "peer closed")) << r.reason;
      // Everything fed before the failed step: the prompt and the tokens decoded so far.
      const auto before = fail_at == 1 ? 0 : ref.prompt.size() + fail_at - 2;
      EXPECT_EQ(r.replayed_tokens, static_cast<std::int64_t>(before)) << fail_at;
      EXPECT_GE(r.recovery_ms, 0.0);
      EXPECT_EQ(runner.position(),
                static_cast<std::int64_t>(ref.prompt.size() + ref.greedy.size() - 1));
    }
  }
}

// A plan switched between two steps of a request (a device's quota cut): the new runner is fed
// the request so far with the step, and generation goes on with one device's ids. The runner
// asks before every step but a request's first.
TEST(SurvivingRunner, APlanSwitchedWithinARequestGivesOneDevicesIds) {
  const Model model = Model::load(testing::fixture_model("llama-tiny"));
  const Reference ref = reference("llama-tiny");
  GenerationOptions options;
  options.n_predict = static_cast<int>(ref.greedy.size());
  for (const int switch_at : {1, 2, 7}) {
    FakeRebuilder rebuilder(model, 0);
    rebuilder.switch_at = switch_at;
    SurvivingRunner runner(rebuilder, true);
    const GenerationResult result = generate(runner, ref.prompt, options);
    EXPECT_EQ(result.generated, ref.greedy) << switch_at;
    EXPECT_EQ(rebuilder.switches, 1);
    EXPECT_EQ(rebuilder.asked, options.n_predict - 1);  // every decode step, not the prefill
    EXPECT_TRUE(rebuilder.recoveries.empty());
    EXPECT_EQ(runner.position(),
              static_cast<std::int64_t>(ref.prompt.size() + ref.greedy.size() - 1));
  }
}

TEST(SurvivingRunner, ReplayReturnsTheFailedStepsRowsOnly) {
  const Model model = Model::load(testing::fixture_model("gpt2-tiny"));
  const Reference ref = reference("gpt2-tiny");
  const std::span<const std::int32_t> ids(ref.prompt);
  Executor one(model.graph(), model.weights(), model.config().max_positions);
  one.forward(ids.first(10), false);
  const Tensor expected = one.forward(ids.subspan(10), true);  // [6, vocab]

  FakeRebuilder rebuilder(model, 2);
  SurvivingRunner runner(rebuilder, true);
  runner.forward(ids.first(10), false);
  const Tensor got = runner.forward(ids.subspan(10), true);
  ASSERT_EQ(got.shape(), expected.shape());
  EXPECT_LE(testing::relative_error(got, expected), 1e-5);
  EXPECT_EQ(rebuilder.recoveries.at(0).replayed_tokens, 10);
}

TEST(SurvivingRunner, AFailureWhileReplayingIsRecoveredToo) {
  const Model model = Model::load(testing::fixture_model("gpt2-tiny"));
  const Reference ref = reference("gpt2-tiny");
  GenerationOptions options;
  options.n_predict = static_cast<int>(ref.greedy.size());
  FakeRebuilder rebuilder(model, 5, {1});  // the first replacement dies on its replay
  SurvivingRunner runner(rebuilder, true);
  EXPECT_EQ(generate(runner, ref.prompt, options).generated, ref.greedy);
  ASSERT_EQ(rebuilder.recoveries.size(), 1u);
  EXPECT_EQ(rebuilder.recoveries[0].lost, (std::vector<std::string>{"device-1", "device-2"}));
  EXPECT_EQ(rebuilder.rebuilds, 2);
}

TEST(SurvivingRunner, DisabledOrImpossibleRecoveryPassesTheErrorOn) {
  const Model model = Model::load(testing::fixture_model("gpt2-tiny"));
  const Reference ref = reference("gpt2-tiny");
  GenerationOptions options;
  options.n_predict = 4;
  FakeRebuilder off(model, 2);
  SurvivingRunner disabled(off, false);
  EXPECT_THROW(generate(disabled, ref.prompt, options), TransportError);
  EXPECT_EQ(off.rebuilds, 0);

  // A rebuilder that cannot go on (nothing fits) ends the request with its reason.
  class Refusing final : public Rebuilder {
   public:
    explicit Refusing(const Model& model) : runner_(model, 1) {}
    StepRunner& active() override { return runner_; }
    std::vector<std::string> rebuild(const TransportError&) override {
      throw PlanError("cannot go on without device-1: the model does not fit");
    }
    void recovered(const Recovery&) override {}

   private:
    FailingRunner runner_;
  } refusing(model);
  SurvivingRunner runner(refusing, true);
  try {
    generate(runner, ref.prompt, options);
    FAIL() << "expected a PlanError";
  } catch (const PlanError& e) {
    EXPECT_TRUE(testing::contains(e.what(), "does not fit")) << e.what();
  }
}

}  // namespace
}  // namespace huddle
