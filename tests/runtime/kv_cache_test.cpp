// Incremental decode with the KV cache must equal recomputing the whole sequence.
#include "model/model.h"
#include "runtime/executor.h"
#include "runtime/generate.h"
#include "test_util.h"

#include "core/error.h"

#include <gtest/gtest.h>

namespace huddle {
namespace {

class KvCache : public ::testing::TestWithParam<std::string> {};

TEST_P(KvCache, IncrementalEqualsFullRecomputation) {
  const Model model = Model::load(testing::fixture_model(GetParam()));
  const std::vector<std::int32_t> ids =
      testing::read_ids(testing::fixture("references/" + GetParam() + ".16.ids.json"));

  Executor full(model.graph(), model.weights(), model.config().max_positions);
  const Tensor all = full.forward(ids, /*all_rows=*/true).clone();

  // Prefill 5 tokens, then chunks of 1, 3 and single tokens: every row must match.
  Executor step(model.graph(), model.weights(), model.config().max_positions);
  const std::vector<std::size_t> chunks = {5, 1, 3, 1, 1, 2, 3};
  std::size_t done = 0;
  for (std::size_t chunk : chunks) {
    const Tensor out = step.forward(std::span(ids).subspan(done, chunk), /*all_rows=*/true);
    EXPECT_LE(testing::relative_error(out, all.rows(static_cast<std::int64_t>(done),
                                                    static_cast<std::int64_t>(done + chunk))),
              1e-5)
        << "chunk at " << done;
    done += chunk;
  }
  ASSERT_EQ(done, ids.size());
  EXPECT_EQ(step.position(), static_cast<std::int64_t>(ids.size()));

  // Last-row mode returns exactly the final row.
  step.reset();
  const Tensor last = step.forward(ids, /*all_rows=*/false);
  ASSERT_EQ(last.dim(0), 1);
  EXPECT_LE(testing::relative_error(last, all.rows(15, 16)), 1e-6);
}

TEST_P(KvCache, RefusesToOverflowContext) {
  const Model model = Model::load(testing::fixture_model(GetParam()));
  Executor executor(model.graph(), model.weights(), model.config().max_positions);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(model.config().max_positions), 7);
  executor.forward(ids, false);
  const std::int32_t one = 7;
  EXPECT_THROW(executor.forward(std::span(&one, 1), false), InputError);
  EXPECT_THROW(executor.forward({}, false), InputError);
  executor.reset();
  EXPECT_NO_THROW(executor.forward(std::span(&one, 1), false));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, KvCache, ::testing::Values("gpt2-tiny", "llama-tiny"),
                         [](const auto& p) {
                           std::string name = p.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(Generate, RejectsPromptPlusGenerationBeyondContext) {
  const Model model = Model::load(testing::fixture_model("gpt2-tiny"));
  Executor executor(model.graph(), model.weights(), model.config().max_positions);
  std::vector<std::int32_t> prompt(120, 3);
  GenerationOptions options;
  options.n_predict = 20;
  EXPECT_THROW(generate(executor, prompt, options), InputError);
  options.n_predict = 9;  // 120 + 8 decoded positions = 128 fits
  EXPECT_EQ(generate(executor, prompt, options).generated.size(), 9u);
}

TEST(Generate, StopsAtStopId) {
  const Model model = Model::load(testing::fixture_model("gpt2-tiny"));
  Executor executor(model.graph(), model.weights(), model.config().max_positions);
  const std::vector<std::int32_t> prompt = {1, 2, 3};
  GenerationOptions options;
  options.n_predict = 8;
  const std::vector<std::int32_t> free_run = generate(executor, prompt, options).generated;
  options.stop_ids = {free_run[2]};
  const std::vector<std::int32_t> stopped = generate(executor, prompt, options).generated;
  const auto first = std::find(free_run.begin(), free_run.end(), free_run[2]);
  EXPECT_EQ(stopped, std::vector<std::int32_t>(free_run.begin(), first + 1));
}

}  // namespace
}  // namespace huddle
