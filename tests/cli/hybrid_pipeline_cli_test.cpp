// A hybrid pipeline plan (a one-device stage, then a tensor-parallel group of two worker
// processes with uneven shares that computes the logits and sends them to the primary) runs
// across 3 real processes with the single-device answer, and a malformed group is refused naming
// the field.
#include "io/npy.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>

namespace huddle {
namespace {

using testing::contains;
using testing::fixture;
using testing::fixture_model;
using testing::ids_arg;
using testing::run_huddle;

// A 3-device pipeline plan saved by `huddle run`, its stages rewritten to: the primary runs the
// embedding and layer 0 attention, workers 2 and 1 (shares 1:3, worker 2 leads) the rest.
nlohmann::json hybrid_plan(const std::string& model, const testing::TempDir& dir) {
  const auto saved = run_huddle({"run", "--model", fixture_model(model), "--ids", "5,6",
                                 "--local-devices", "3", "--strategy", "pipeline", "--shares",
                                 "1,1,1", "--save-plan", dir / "pipeline.json"});
  EXPECT_EQ(saved.exit_code, 0) << saved.err;
  std::ifstream in(dir / "pipeline.json");
  nlohmann::json plan = nlohmann::json::parse(in);
  plan["pipeline"]["stages"] = nlohmann::json::parse(
      R"([{"device": 0, "units": [0, 2]},
          {"devices": [2, 1], "units": [2, 8], "shares": [1, 3]}])");
  return plan;
}

class HybridPipelineCli : public ::testing::TestWithParam<std::string> {};

TEST_P(HybridPipelineCli, AGroupStageAcrossProcessesGivesTheSingleDeviceAnswer) {
  const std::string model = GetParam();
  testing::TempDir dir;
  std::ofstream(dir / "plan.json") << hybrid_plan(model, dir).dump();
  const auto ids = testing::read_ids(fixture("references/" + model + ".16.ids.json"));
  const auto r = run_huddle({"run", "--model", fixture_model(model), "--ids", ids_arg(ids),
                             "--local-devices", "3", "--plan", dir / "plan.json", "--dump-logits",
                             dir / "out.npy", "--threads", "1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Tensor out = io::read_npy(dir / "out.npy");
  const Tensor ref = io::read_npy(fixture("references/" + model + ".16.npy"));
  ASSERT_EQ(out.shape(), ref.shape());
  EXPECT_LE(testing::relative_error(out, ref), 1e-4);
  // The group's members split their layers: each holds well under the model's 2.7 MB.
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["devices"].size(), 3u);
  for (std::size_t d = 1; d < 3; ++d)
    EXPECT_LT(j["devices"][d]["weight_bytes"].get<double>(), 0.8 * 2.7e6) << j.dump();

  std::ifstream in(fixture("references/" + model + ".generate.json"));
  const nlohmann::json ref_gen = nlohmann::json::parse(in);
  const auto g =
      run_huddle({"run", "--model", fixture_model(model), "--ids",
                  ids_arg(ref_gen["prompt"].get<std::vector<std::int32_t>>()), "--n-predict", "16",
                  "--local-devices", "3", "--plan", dir / "plan.json", "--threads", "1", "--json"});
  ASSERT_EQ(g.exit_code, 0) << g.err;
  EXPECT_EQ(nlohmann::json::parse(g.out)["generated"], ref_gen["greedy"]);
}

INSTANTIATE_TEST_SUITE_P(Models, HybridPipelineCli, ::testing::Values("gpt2-tiny", "llama-tiny"),
                         [](const auto& p) {
                           std::string name = p.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(HybridPipelineCli, AMalformedGroupIsRefusedNamingTheField) {
  testing::TempDir dir;
  nlohmann::json plan = hybrid_plan("gpt2-tiny", dir);
  plan["pipeline"]["stages"][1]["shares"] = {1, 3, 1};
  std::ofstream(dir / "plan.json") << plan.dump();
  const auto r = run_huddle({"run", "--model", fixture_model("gpt2-tiny"), "--ids", "5,6",
                             "--local-devices", "3", "--plan", dir / "plan.json"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "stages[1].shares: 3 shares for 2 devices")) << r.err;
}

}  // namespace
}  // namespace huddle
