// `huddle run --model M.onnx` split by rows across real processes on 127.0.0.1 (EdgeFlow and its
// baselines): the CNN fixtures match their float64 references on 2, 3 and 4 devices of uneven
// speed; workers import the model from their own copy or from the file the primary sends; saved
// plans replay; a plan for another model, a malformed plan and a dead worker are refused clearly;
// the Gemm head split by columns leaves each worker only its columns' weights.
#include "io/npy.h"
#include "onnx/cnn_fixtures.h"
#include "test_util.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <csignal>
#include <fstream>

namespace huddle {
namespace {

using testing::contains;
using testing::fixture;
using testing::fixture_model;
using testing::run_huddle;

std::string model(const std::string& name) {
  return testing::cnn_model(name);
}
std::string input(const std::string& name) {
  return testing::cnn_input_file(name);
}

// Slow devices of uneven speeds (so that splitting pays even for the tiny fixtures).
std::filesystem::path slow_cluster(const std::filesystem::path& dir, int devices) {
  const double gflops[] = {0.2, 0.5, 0.1, 0.3};
  nlohmann::json list = nlohmann::json::array();
  for (int d = 0; d < devices; ++d) {
    list.push_back(
        {{"name", fmt::format("dev{}", d)}, {"gflops", gflops[d]}, {"memory_bytes", 4e9}});
  }
  const nlohmann::json cluster = {
      {"devices", list}, {"default_link", {{"bandwidth_bps", 1e9}, {"latency_s", 0.0005}}}};
  const auto path = dir / fmt::format("cluster{}.json", devices);
  std::ofstream(path) << cluster.dump();
  return path;
}

// Every output in `dir` against the fixture's references.
void expect_references(const std::string& name, const std::filesystem::path& dir,
                       const std::string& what) {
  const nlohmann::json entry = testing::cnn_entry(name);
  for (const auto& out : entry["outputs"]) {
    const Tensor got = io::read_npy(dir / (out["onnx_name"].get<std::string>() + ".npy"));
    const Tensor want = io::read_npy(fixture("cnn/" + out["file"].get<std::string>()));
    EXPECT_LE(testing::max_abs_diff(got, want), out["tol_abs"].get<double>())
        << name << " " << out["onnx_name"] << " " << what;
  }
}

struct Case {
  std::string model, strategy;
  int devices;
};

class EdgeFlowCli : public ::testing::TestWithParam<Case> {};

TEST_P(EdgeFlowCli, MatchesTheReferenceAcrossProcesses) {
  const Case& c = GetParam();
  testing::TempDir dir;
  const auto r = run_huddle({"run", "--model", model(c.model), "--input", input(c.model),
                             "--local-devices", std::to_string(c.devices), "--cluster",
                             slow_cluster(dir.path(), c.devices).string(), "--strategy", c.strategy,
                             "--dump-outputs", (dir / "out").string(), "--threads", "1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_references(c.model, dir / "out", c.strategy);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["strategy"], c.strategy);
  ASSERT_EQ(j["devices"].size(), static_cast<std::size_t>(c.devices));
  ASSERT_EQ(j["bytes_sent"].size(), static_cast<std::size_t>(c.devices));
  EXPECT_GT(j["predicted_ms"].get<double>(), 0.0);
  // Rows split across devices: the primary sends the image rows the others read (edgeflow may
  // keep a slow device idle, never all of them on these slow devices).
  EXPECT_GT(j["bytes_sent"][0].get<double>(), 0.0) << j.dump();
}

// vgg-tiny's Gemm head ([10, 32] weight and 10 biases) is a column layer: under rows-equal on 3
// processes the devices compute 4, 3 and 3 of its 10 output columns and each holds only those
// columns' weights; every device holds the same conv weights (each has rows of every conv). Under
// `local` the workers hold nothing and the primary everything.
TEST(EdgeFlowCliColumns, WorkersHoldOnlyTheirColumnsWeights) {
  testing::TempDir dir;
  const auto run = [&](const std::string& strategy) {
    const auto r = run_huddle({"run", "--model", model("vgg-tiny"), "--input", input("vgg-tiny"),
                               "--local-devices", "3", "--strategy", strategy, "--dump-outputs",
                               (dir / strategy).string(), "--threads", "1", "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    expect_references("vgg-tiny", dir / strategy, strategy);
    return nlohmann::json::parse(r.out)["weight_bytes"].get<std::vector<std::int64_t>>();
  };
  const std::vector<std::int64_t> local = run("local");
  ASSERT_EQ(local.size(), 3u);
  EXPECT_EQ(local[1], 0);
  EXPECT_EQ(local[2], 0);
  const std::vector<std::int64_t> equal = run("rows-equal");
  ASSERT_EQ(equal.size(), 3u);
  const std::int64_t column = (32 + 1) * 4;  // a weight row and a bias, f32
  const std::int64_t columns[] = {4, 3, 3};
  for (std::size_t d = 0; d < 3; ++d)
    EXPECT_EQ(local[0] - equal[d], (10 - columns[d]) * column) << "device " << d;
}

TEST(EdgeFlowCliProfile, ProfiledLayersPlanAndMatchTheReference) {
  testing::TempDir dir;
  const auto r = run_huddle(
      {"run", "--model", model("resnet-tiny"), "--input", input("resnet-tiny"), "--local-devices",
       "3", "--cluster", slow_cluster(dir.path(), 3).string(), "--strategy", "edgeflow",
       "--profile-layers", "--dump-outputs", (dir / "out").string(), "--threads", "1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_references("resnet-tiny", dir / "out", "edgeflow with profiled layers");
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_GT(j["profile_ms"].get<double>(), 0.0);
  EXPECT_GT(j["predicted_ms"].get<double>(), 0.0);

  const auto bad = run_huddle(
      {"run", "--model", fixture_model("gpt2-tiny"), "--ids", "1,2", "--profile-layers"});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_TRUE(contains(bad.err, "--profile-layers")) << bad.err;
}

// --calibrate times a rows-proportional plan on the devices before planning: the slow cluster file
// (0.1-0.5 GFLOP/s) underrates these processes, which compute at a core's speed, so every device
// that computed gets a factor above 1; the saved cluster file holds the scaled speeds, and the
// plan made from it still matches the reference. --save-cluster needs --calibrate, --calibrate
// plans anew (no --plan).
TEST(EdgeFlowCliCalibrate, ScalesEachDeviceBySpeedItDeliveredAndMatchesTheReference) {
  testing::TempDir dir;
  const auto cluster = slow_cluster(dir.path(), 3);
  const auto saved = dir / "calibrated.json";
  const auto r = run_huddle({"run", "--model", model("resnet-tiny"), "--input",
                             input("resnet-tiny"), "--local-devices", "3", "--cluster",
                             cluster.string(), "--calibrate", "2", "--save-cluster", saved.string(),
                             "--dump-outputs", (dir / "out").string(), "--threads", "1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_references("resnet-tiny", dir / "out", "edgeflow after calibration");
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const auto factors = j["calibration"]["speed_factors"].get<std::vector<double>>();
  const auto measured = j["calibration"]["measured_cpu_ms"].get<std::vector<double>>();
  ASSERT_EQ(factors.size(), 3u);
  ASSERT_EQ(measured.size(), 3u);
  const nlohmann::json before = nlohmann::json::parse(std::ifstream(cluster));
  const nlohmann::json after = nlohmann::json::parse(std::ifstream(saved));
  for (std::size_t d = 0; d < 3; ++d) {
    // rows-proportional gives every device rows: each computed, and faster than its file says.
    EXPECT_GT(measured[d], 0.0) << d;
    EXPECT_GT(factors[d], 1.0) << d;
    EXPECT_NEAR(after["devices"][d]["gflops"].get<double>(),
                before["devices"][d]["gflops"].get<double>() * factors[d], 1e-9 * factors[d])
        << d;
  }

  const auto lone =
      run_huddle({"run", "--model", model("resnet-tiny"), "--input", input("resnet-tiny"),
                  "--local-devices", "2", "--save-cluster", saved.string()});
  EXPECT_EQ(lone.exit_code, 2) << lone.err;
  EXPECT_TRUE(contains(lone.err, "--calibrate")) << lone.err;
  const auto plan = dir / "plan.json";
  ASSERT_EQ(run_huddle({"run", "--model", model("resnet-tiny"), "--input", input("resnet-tiny"),
                        "--local-devices", "2", "--save-plan", plan.string()})
                .exit_code,
            0);
  const auto replay =
      run_huddle({"run", "--model", model("resnet-tiny"), "--input", input("resnet-tiny"),
                  "--local-devices", "2", "--plan", plan.string(), "--calibrate", "1"});
  EXPECT_EQ(replay.exit_code, 2) << replay.err;
  EXPECT_TRUE(contains(replay.err, "--calibrate")) << replay.err;
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const char* m : {"vgg-tiny", "resnet-tiny", "yolo-tiny"}) {
    for (const char* s : {"edgeflow", "rows-equal", "rows-proportional", "tiles"})
      out.push_back({m, s, 3});
    for (int d : {2, 4}) {
      out.push_back({m, "edgeflow", d});
      out.push_back({m, "rows-equal", d});
      out.push_back({m, "tiles", d});
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Cnn, EdgeFlowCli, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& p) {
                           std::string n = fmt::format("{}_{}_{}", p.param.model, p.param.strategy,
                                                       p.param.devices);
                           for (char& ch : n) {
                             if (ch == '-') ch = '_';
                           }
                           return n;
                         });

TEST(EdgeFlowCliWorkers, OwnCopyOrSentFileAndSavedPlansReplay) {
  testing::TempDir dir;
  const auto key = testing::make_key_file(dir.path());
  // One worker has the model, the other a different model under the same name: it must be sent
  // the primary's file instead.
  std::filesystem::copy_file(model("resnet-tiny"), dir / "yolo-tiny.onnx");
  testing::BackgroundHuddle same({"worker", "--listen", "127.0.0.1:0", "--key-file", key.string(),
                                  "--model", model("yolo-tiny")});
  testing::BackgroundHuddle other({"worker", "--listen", "127.0.0.1:0", "--key-file", key.string(),
                                   "--model", (dir / "yolo-tiny.onnx").string()});
  const std::string a = same.worker_address(), b = other.worker_address();
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  const std::vector<std::string> base = {
      "run",       "--model",   model("yolo-tiny"), "--input",    input("yolo-tiny"),
      "--workers", a + "," + b, "--key-file",       key.string(), "--threads",
      "1"};
  auto args = base;
  args.insert(args.end(), {"--strategy", "rows-equal", "--save-plan", (dir / "plan.json").string(),
                           "--dump-outputs", (dir / "first").string()});
  auto r = run_huddle(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_references("yolo-tiny", dir / "first", "sent file");
  EXPECT_TRUE(other.wait_for_line("differs from the primary's", 5, true).size() > 0);
  // The saved plan replays on the same workers (the sessions before ended; they keep serving).
  args = base;
  args.insert(args.end(), {"--plan", (dir / "plan.json").string(), "--dump-outputs",
                           (dir / "replay").string()});
  r = run_huddle(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_references("yolo-tiny", dir / "replay", "saved plan");
  // A plan for another model is refused before any worker is used.
  args = {"run",
          "--model",
          model("vgg-tiny"),
          "--input",
          input("vgg-tiny"),
          "--workers",
          a + "," + b,
          "--key-file",
          key.string(),
          "--plan",
          (dir / "plan.json").string()};
  r = run_huddle(args);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.err, "plan.json")) << r.err;
  // A malformed plan names the field.
  std::ifstream in(dir / "plan.json");
  nlohmann::json plan = nlohmann::json::parse(in);
  plan["rows"][0]["ranges"][0] = {5, 2};
  std::ofstream(dir / "bad.json") << plan.dump();
  args = base;
  args.push_back("--plan");
  args.push_back((dir / "bad.json").string());
  r = run_huddle(args);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.err, "rows")) << r.err;
  EXPECT_TRUE(contains(r.err, "[5, 2]")) << r.err;
  EXPECT_TRUE(same.alive());
  EXPECT_TRUE(other.alive());
}

TEST(EdgeFlowCliPlan, PlansPredictsAndTheSavedPlanRuns) {
  testing::TempDir dir;
  const auto cluster = slow_cluster(dir.path(), 3);
  auto r = run_huddle({"plan", "--model", model("resnet-tiny"), "--cluster", cluster.string(),
                       "--json", "-o", (dir / "plan.json").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["strategy"], "edgeflow");
  ASSERT_EQ(j["devices"].size(), 3u);
  for (const char* s : {"edgeflow", "rows-equal", "rows-proportional", "tiles", "local"})
    ASSERT_TRUE(j["strategies_ms"].contains(s)) << s;
  // EdgeFlow keeps the best of its LP, rows-proportional and local: never worse than those.
  EXPECT_LE(j["predicted_ms"].get<double>(), j["strategies_ms"]["local"].get<double>());
  EXPECT_LE(j["predicted_ms"].get<double>(), j["strategies_ms"]["rows-proportional"].get<double>());
  r = run_huddle({"run", "--model", model("resnet-tiny"), "--input", input("resnet-tiny"),
                  "--local-devices", "3", "--plan", (dir / "plan.json").string(), "--dump-outputs",
                  (dir / "out").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_references("resnet-tiny", dir / "out", "planned");
  r = run_huddle({"plan", "--model", model("resnet-tiny"), "--cluster", cluster.string(),
                  "--strategy", "magic"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.err, "magic")) << r.err;
}

TEST(EdgeFlowCliWorkers, DeadWorkerIsNamed) {
  testing::TempDir dir;
  const auto key = testing::make_key_file(dir.path());
  testing::BackgroundHuddle alive(
      {"worker", "--listen", "127.0.0.1:0", "--key-file", key.string()});
  testing::BackgroundHuddle dead({"worker", "--listen", "127.0.0.1:0", "--key-file", key.string()});
  const std::string a = alive.worker_address(), b = dead.worker_address();
  ASSERT_FALSE(b.empty());
  dead.kill(SIGKILL);
  const auto r = run_huddle({"run", "--model", model("vgg-tiny"), "--input", input("vgg-tiny"),
                             "--workers", a + "," + b, "--key-file", key.string(), "--strategy",
                             "rows-equal", "--timeout-s", "3"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.err, b)) << r.err;
  EXPECT_TRUE(alive.alive());
}

}  // namespace
}  // namespace huddle
