// A 2D-tiled Hepti plan, written by `huddle plan --hepti-mode 2d`, runs across real worker
// processes (`huddle run --local-devices 4 --plan`) and gives the single-device answer.
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

void write_cluster(const std::filesystem::path& path) {
  std::ofstream(path) << R"({"devices": [
      {"name": "p", "gflops": 40, "memory_bytes": 1000000000},
      {"name": "q", "gflops": 20, "memory_bytes": 1000000000},
      {"name": "r", "gflops": 30, "memory_bytes": 1000000000},
      {"name": "s", "gflops": 10, "memory_bytes": 1000000000}],
    "default_link": {"bandwidth_bps": 1e9, "latency_s": 0.0005}})";
}

class Tiled2DCli : public ::testing::TestWithParam<std::string> {};

TEST_P(Tiled2DCli, PlannedGridRunsAcrossProcesses) {
  const std::string model = GetParam();
  testing::TempDir dir;
  write_cluster(dir / "cluster.json");
  const auto planned =
      run_huddle({"plan", "--cluster", dir / "cluster.json", "--model", fixture_model(model),
                  "--strategy", "hepti", "--hepti-mode", "2d", "-o", dir / "plan.json", "--json"});
  ASSERT_EQ(planned.exit_code, 0) << planned.err;
  const nlohmann::json summary = nlohmann::json::parse(planned.out);
  EXPECT_EQ(summary["mode"], "2d-tiled");
  EXPECT_TRUE(summary["runnable"].get<bool>());
  std::ifstream plan_file(dir / "plan.json");
  const nlohmann::json plan = nlohmann::json::parse(plan_file);
  EXPECT_EQ(plan["grid"], (nlohmann::json{{"rows", 2}, {"cols", 2}}));

  const auto ids = testing::read_ids(fixture("references/" + model + ".16.ids.json"));
  const auto r = run_huddle({"run", "--model", fixture_model(model), "--ids", ids_arg(ids),
                             "--local-devices", "4", "--plan", dir / "plan.json", "--dump-logits",
                             dir / "out.npy", "--threads", "1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Tensor out = io::read_npy(dir / "out.npy");
  const Tensor ref = io::read_npy(fixture("references/" + model + ".16.npy"));
  ASSERT_EQ(out.shape(), ref.shape());
  EXPECT_LE(testing::relative_error(out, ref), 1e-4);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["devices"].size(), 4u);
  // Each worker holds its tiles only: well under half of the model (2.7 MB).
  for (std::size_t d = 1; d < j["devices"].size(); ++d) {
    EXPECT_LT(j["devices"][d]["weight_bytes"].get<double>(), 0.5 * 2.7e6) << j.dump();
  }

  if (model == "bert-tiny") return;
  std::ifstream in(fixture("references/" + model + ".generate.json"));
  const nlohmann::json ref_gen = nlohmann::json::parse(in);
  const auto g =
      run_huddle({"run", "--model", fixture_model(model), "--ids",
                  ids_arg(ref_gen["prompt"].get<std::vector<std::int32_t>>()), "--n-predict", "16",
                  "--local-devices", "4", "--plan", dir / "plan.json", "--threads", "1", "--json"});
  ASSERT_EQ(g.exit_code, 0) << g.err;
  EXPECT_EQ(nlohmann::json::parse(g.out)["generated"], ref_gen["greedy"]);
}

INSTANTIATE_TEST_SUITE_P(Models, Tiled2DCli,
                         ::testing::Values("gpt2-tiny", "llama-tiny", "bert-tiny"),
                         [](const auto& p) {
                           std::string name = p.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(Tiled2DCli, UnknownHeptiModeIsAUsageError) {
  testing::TempDir dir;
  write_cluster(dir / "cluster.json");
  const auto r =
      run_huddle({"plan", "--cluster", dir / "cluster.json", "--model", fixture_model("gpt2-tiny"),
                  "--strategy", "hepti", "--hepti-mode", "3d"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "--hepti-mode")) << r.err;
}

}  // namespace
}  // namespace huddle
