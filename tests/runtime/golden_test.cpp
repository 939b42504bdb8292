// The single-device answer against the independent float64 references in tests/fixtures
// (see tests/fixtures/README.md for how they were made). Tolerance: 1e-4 x max|ref|, the tighter
// of the two the README discusses; argmax per position and greedy ids must be identical.
#include "io/npy.h"
#include "model/model.h"
#include "runtime/executor.h"
#include "runtime/generate.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

namespace huddle {
namespace {

using testing::fixture;
using testing::fixture_model;

constexpr double kTolerance = 1e-4;

struct GoldenCase {
  std::string model;
  int tokens;
};

class Golden : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(Golden, MatchesReference) {
  const GoldenCase& c = GetParam();
  const Model model = Model::load(fixture_model(c.model));
  const std::string stem = "references/" + c.model + "." + std::to_string(c.tokens);
  const std::vector<std::int32_t> ids = testing::read_ids(fixture(stem + ".ids.json"));
  const Tensor reference = io::read_npy(fixture(stem + ".npy"));

  Executor executor(model.graph(), model.weights(), model.config().max_positions);
  const Tensor out = executor.forward(ids, /*all_rows=*/true);
  ASSERT_EQ(out.shape(), reference.shape());
  EXPECT_LE(testing::relative_error(out, reference), kTolerance);
  if (model.config().causal) {
    EXPECT_EQ(testing::row_argmax(out), testing::row_argmax(reference));
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Golden,
                         ::testing::Values(GoldenCase{"gpt2-tiny", 16}, GoldenCase{"gpt2-tiny", 64},
                                           GoldenCase{"llama-tiny", 16},
                                           GoldenCase{"llama-tiny", 64},
                                           GoldenCase{"bert-tiny", 16},
                                           GoldenCase{"bert-tiny", 64}),
                         [](const auto& p) {
                           std::string name = p.param.model + "_" + std::to_string(p.param.tokens);
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

class GreedyGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(GreedyGolden, GeneratesReferenceIds) {
  const Model model = Model::load(fixture_model(GetParam()));
  std::ifstream in(fixture("references/" + GetParam() + ".generate.json"));
  const nlohmann::json ref = nlohmann::json::parse(in);
  const auto prompt = ref["prompt"].get<std::vector<std::int32_t>>();
  const auto greedy = ref["greedy"].get<std::vector<std::int32_t>>();

  Executor executor(model.graph(), model.weights(), model.config().max_positions);
  GenerationOptions options;
  options.n_predict = static_cast<int>(greedy.size());
  std::vector<std::int32_t> streamed;
  options.on_token = [&](std::int32_t id) { streamed.push_back(id); };
  const GenerationResult result = generate(executor, prompt, options);
  EXPECT_EQ(result.generated, greedy);
  EXPECT_EQ(streamed, greedy);
  EXPECT_EQ(result.decode_ms.size(), greedy.size() - 1);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GreedyGolden, ::testing::Values("gpt2-tiny", "llama-tiny"),
                         [](const auto& p) {
                           std::string name = p.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace huddle
