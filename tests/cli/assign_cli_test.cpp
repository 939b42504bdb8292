// `huddle assign` and `huddle run --plan` with its plans, across processes: the counts it prints
// for the GPT-2 fixture, the optimal assignment never predicted slower than a baseline, the plan
// replaying the reference's greedy ids on cpu1/cpuN and with a real worker as the remote
// provider (profiled, and written by hand), and clear errors for bad provider lists, another
// model's plan, a missing key and an unreachable remote. An imported CNN (vgg-tiny, the smallest
// fixture; tests/runtime/assign_cnn_run_test.cpp runs all three) assigned over cpuN and cpu1: its
// plan, and `run --strategy assign`, give the single-device outputs, also with a real worker as
// the remote provider (profiled, and run); --local-devices, another CNN's plan, a stray
// --providers and a remote without the key are refused.
#include "io/npy.h"
#include "onnx/cnn_fixtures.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <csignal>
#include <fstream>
#include <string>
#include <vector>

namespace huddle {
namespace {

using testing::contains;
using testing::fixture;
using testing::fixture_model;
using testing::ids_arg;
using testing::run_huddle;

nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

void write_json(const std::filesystem::path& path, const nlohmann::json& j) {
  std::ofstream(path) << j.dump();
}

// The reference prompt's greedy ids under `plan` (extra args: workers, key).
void expect_reference_greedy(const std::filesystem::path& plan,
                             const std::vector<std::string>& extra = {}) {
  const nlohmann::json ref = read_json(fixture("references/gpt2-tiny.generate.json"));
  std::vector<std::string> args = {"run",
                                   "--model",
                                   fixture_model("gpt2-tiny"),
                                   "--plan",
                                   plan,
                                   "--ids",
                                   ids_arg(ref["prompt"].get<std::vector<std::int32_t>>()),
                                   "--n-predict",
                                   "16",
                                   "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto r = run_huddle(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["strategy"], "assign");
  EXPECT_EQ(j["generated"], ref["greedy"]);
}

TEST(AssignCli, WritesBaselinePlansThatReplay) {
  testing::TempDir dir;
  const auto r = run_huddle({"assign", "--model", fixture_model("gpt2-tiny"), "--providers",
                             "cpuN,cpu1", "--prompt-len", "8", "--repeats", "1", "--baseline-plans",
                             dir / "baselines", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["baselines"].size(), 4u);
  for (const auto& b : j["baselines"]) {
    ASSERT_TRUE(b.contains("plan")) << b.dump();
    const nlohmann::json plan = read_json(b["plan"].get<std::string>());
    EXPECT_EQ(plan["strategy"], "assign") << b.dump();
    expect_reference_greedy(b["plan"].get<std::string>());
  }
}

TEST(AssignCli, ProfilesPlansAndReplays) {
  testing::TempDir dir;
  const auto r =
      run_huddle({"assign", "--model", fixture_model("gpt2-tiny"), "--providers", "cpuN,cpu1",
                  "--prompt-len", "16", "--repeats", "1", "-o", dir / "a.json", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  // Hand counts (tests/planner/assign_dcg_test.cpp): 42 ops x 2 + start + end; 218 edges;
  // DA: 2 directions x {[T,H], [T,F], [1,H]}.
  EXPECT_EQ(j["dcg"]["nodes"], 86);
  EXPECT_EQ(j["dcg"]["edges"], 218);
  EXPECT_EQ(j["dcg"]["da_edges"], 6);
  // 2 node runs (one provider each: they cross nothing) + 2 edge runs: the [1,H] edge
  // (last -> logits) occurs once in the graph, so its two directions need two runs.
  EXPECT_EQ(j["node_runs"], 2);
  EXPECT_EQ(j["edge_runs"], 2);
  EXPECT_EQ(j["profiling_runs"], 4);
  EXPECT_EQ(j["runs"].size(), 4u);
  EXPECT_TRUE(j["optimal"]["exact"].get<bool>());
  ASSERT_EQ(j["baselines"].size(), 4u);  // 2 single providers + 2 priority orders
  for (const auto& b : j["baselines"]) {
    EXPECT_LE(j["optimal"]["predicted_ms"].get<double>(), b["predicted_ms"].get<double>() + 1e-9)
        << b.dump();
  }
  expect_reference_greedy(dir / "a.json");

  // The plan for another model.
  const auto other = run_huddle(
      {"run", "--model", fixture_model("llama-tiny"), "--plan", dir / "a.json", "--ids", "1,2"});
  EXPECT_EQ(other.exit_code, 1);
  EXPECT_TRUE(contains(other.err, "the plan is for a gpt2")) << other.err;
  // An op on a provider that cannot run it (a remote restricted to linears running a norm).
  nlohmann::json plan = read_json(dir / "a.json");
  plan["assignment"]["providers"] = {"cpuN", "cpu1:linear"};
  for (auto& [name, provider] : plan["assignment"]["ops"].items()) provider = 0;
  plan["assignment"]["ops"]["final_norm"] = 1;
  write_json(dir / "bad.json", plan);
  const auto bad = run_huddle(
      {"run", "--model", fixture_model("gpt2-tiny"), "--plan", dir / "bad.json", "--ids", "1,2"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_TRUE(
      contains(bad.err, (dir / "bad.json").string() +
                            ": assignment.ops.final_norm: provider 1 ('cpu1:linear') cannot run "
                            "this layer_norm op"))
      << bad.err;
}

TEST(AssignCli, RunWithStrategyAssignProfilesFirst) {
  const nlohmann::json ref = read_json(fixture("references/llama-tiny.generate.json"));
  const auto r = run_huddle({"run", "--model", fixture_model("llama-tiny"), "--strategy", "assign",
                             "--providers", "cpu1,cpuN", "--ids",
                             ids_arg(ref["prompt"].get<std::vector<std::int32_t>>()), "--n-predict",
                             "16", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.err, "huddle: assign: ")) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["strategy"], "assign");
  EXPECT_EQ(j["generated"], ref["greedy"]);
  const auto usage = run_huddle(
      {"run", "--model", fixture_model("llama-tiny"), "--strategy", "assign", "--ids", "1,2"});
  EXPECT_EQ(usage.exit_code, 2);
  EXPECT_TRUE(contains(usage.err, "--strategy assign needs --providers")) << usage.err;
}

TEST(AssignCli, BadProviderListsAreErrors) {
  for (const char* list : {"", "gpu", "cpuN,cpuN", "cpuN:nonsense"}) {
    const auto r =
        run_huddle({"assign", "--model", fixture_model("gpt2-tiny"), "--providers", list});
    EXPECT_EQ(r.exit_code, 1) << list;
    EXPECT_TRUE(contains(r.err, "--providers")) << list << ": " << r.err;
  }
}

// `assign --json`'s fitted costs over cpuN and the worker at `address`: the constant overhead and
// each device's fixed cost per run. The worker's is identified: the cpuN node run is in process.
void expect_device_costs(const nlohmann::json& j, const std::string& address) {
  EXPECT_GE(j["overhead_ms"].get<double>(), 0.0);
  ASSERT_EQ(j["devices"].size(), 2u);
  EXPECT_EQ(j["devices"][0]["name"], "primary");
  EXPECT_EQ(j["devices"][0]["fixed_ms"].get<double>(), 0.0);
  EXPECT_EQ(j["devices"][1]["name"], address);
  EXPECT_GE(j["devices"][1]["fixed_ms"].get<double>(), 0.0);
  EXPECT_TRUE(j["devices"][1]["fixed_identified"].get<bool>());
}

TEST(AssignCli, RemoteProviderIsAWorker) {
  testing::TempDir dir;
  const auto key = testing::make_key_file(dir.path());
  testing::BackgroundHuddle worker({"worker", "--listen", "127.0.0.1:0", "--key-file", key});
  const std::string address = worker.worker_address();
  ASSERT_FALSE(address.empty());
  // Start from a cpu-only plan, then move every other op the remote can run onto it.
  ASSERT_EQ(run_huddle({"assign", "--model", fixture_model("gpt2-tiny"), "--providers", "cpuN",
                        "--repeats", "1", "-o", dir / "a.json"})
                .exit_code,
            0);
  nlohmann::json plan = read_json(dir / "a.json");
  plan["assignment"]["providers"] = {"cpuN", "remote:" + address};
  plan["devices"] = {{{"name", "primary"}}, {{"name", address}}};
  plan["token_shares"] = {1, 1};
  int i = 0;
  for (auto& [name, provider] : plan["assignment"]["ops"].items()) {
    provider = (name != "last" && name != "logits" && i++ % 2 == 0) ? 1 : 0;
  }
  write_json(dir / "remote.json", plan);
  expect_reference_greedy(dir / "remote.json", {"--workers", address, "--key-file", key});

  // Profiled with the worker: 2 node runs + edge runs (at most n + 2), DA edges as counted in
  // tests/planner/assign_dcg_test.cpp (cpuN and a remote on gpt2-tiny at 16 tokens: 4).
  const auto profiled = run_huddle({"assign", "--model", fixture_model("gpt2-tiny"), "--providers",
                                    "cpuN,remote:" + address, "--key-file", key, "--repeats", "1",
                                    "-o", dir / "profiled.json", "--json"});
  ASSERT_EQ(profiled.exit_code, 0) << profiled.err;
  const nlohmann::json j = nlohmann::json::parse(profiled.out);
  EXPECT_EQ(j["dcg"]["da_edges"], 4);
  EXPECT_EQ(j["node_runs"], 2);
  EXPECT_LE(j["profiling_runs"].get<int>(), 4);
  expect_device_costs(j, address);
  EXPECT_EQ(j["baselines"].size(), 4u);
  for (const auto& b : j["baselines"]) {
    EXPECT_LE(j["optimal"]["predicted_ms"].get<double>(), b["predicted_ms"].get<double>() + 1e-9);
  }
  expect_reference_greedy(dir / "profiled.json", {"--workers", address, "--key-file", key});
  // A remote without the key is a usage error.
  const auto keyless = run_huddle(
      {"assign", "--model", fixture_model("gpt2-tiny"), "--providers", "cpuN,remote:" + address});
  EXPECT_EQ(keyless.exit_code, 2);
  EXPECT_TRUE(contains(keyless.err, "--key-file")) << keyless.err;

  // The same plan with its worker gone; profiling an unreachable remote.
  worker.kill(SIGTERM);
  const auto r =
      run_huddle({"run", "--model", fixture_model("gpt2-tiny"), "--plan", dir / "remote.json",
                  "--ids", "1,2", "--workers", address, "--key-file", key});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, address)) << r.err;
  const auto gone = run_huddle({"assign", "--model", fixture_model("gpt2-tiny"), "--providers",
                                "cpuN,remote:" + address, "--key-file", key});
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_TRUE(contains(gone.err, address)) << gone.err;
}

// vgg-tiny's first op (its first conv, BatchNorm and ReLU fused): the only reader of the image.
constexpr const char* kVggImageReader = "/features/features.0/act/Relu_output_0";

// Every output `dir`/NAME.npy of vgg-tiny within tol_abs of the float64 reference and of the
// single-device run's `single`/NAME.npy.
void expect_vgg_outputs(const std::filesystem::path& dir, const std::filesystem::path& single) {
  const nlohmann::json entry = testing::cnn_entry("vgg-tiny");  // outlives the loop
  for (const auto& out : entry["outputs"]) {
    const std::string name = out["onnx_name"].get<std::string>();
    const Tensor got = io::read_npy(dir / (name + ".npy"));
    const double tol = out["tol_abs"].get<double>();
    EXPECT_LE(
        testing::max_abs_diff(got, io::read_npy(fixture("cnn/" + out["file"].get<std::string>()))),
        tol)
        << name;
    EXPECT_LE(testing::max_abs_diff(got, io::read_npy(single / (name + ".npy"))), tol) << name;
  }
}

TEST(AssignCli, CnnPlansGiveTheSingleDeviceOutputs) {
  testing::TempDir dir;
  const std::string model = testing::cnn_model("vgg-tiny");
  const std::string input = testing::cnn_input_file("vgg-tiny");
  ASSERT_EQ(run_huddle({"run", "--model", model, "--input", input, "--dump-outputs", dir / "one"})
                .exit_code,
            0);
  const auto r = run_huddle({"assign", "--model", model, "--providers", "cpuN,cpu1", "--repeats",
                             "1", "-o", dir / "a.json", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_FALSE(j.contains("prompt_len"));
  EXPECT_EQ(j["dcg"]["nodes"].get<int>() % 2, 0);  // 2 per op, start and end
  EXPECT_GT(j["dcg"]["da_edges"].get<int>(), 2);
  EXPECT_EQ(j["node_runs"], 2);
  EXPECT_GE(j["edge_runs"].get<int>(), 1);
  EXPECT_EQ(j["runs"].size(), j["profiling_runs"].get<std::size_t>());
  EXPECT_TRUE(j["optimal"]["exact"].get<bool>());
  ASSERT_EQ(j["baselines"].size(), 4u);
  for (const auto& b : j["baselines"]) {
    EXPECT_LE(j["optimal"]["predicted_ms"].get<double>(), b["predicted_ms"].get<double>() + 1e-9)
        << b.dump();
  }
  const auto planned = run_huddle({"run", "--model", model, "--input", input, "--plan",
                                   dir / "a.json", "--dump-outputs", dir / "plan", "--json"});
  ASSERT_EQ(planned.exit_code, 0) << planned.err;
  EXPECT_EQ(nlohmann::json::parse(planned.out)["strategy"], "assign");
  expect_vgg_outputs(dir / "plan", dir / "one");

  const auto profiled = run_huddle({"run", "--model", model, "--input", input, "--strategy",
                                    "assign", "--providers", "cpu1,cpuN", "--dump-outputs",
                                    dir / "profiled", "--save-plan", dir / "b.json", "--json"});
  ASSERT_EQ(profiled.exit_code, 0) << profiled.err;
  EXPECT_TRUE(contains(profiled.err, "huddle: assign: ")) << profiled.err;
  EXPECT_EQ(read_json(dir / "b.json")["strategy"], "assign");
  expect_vgg_outputs(dir / "profiled", dir / "one");

  // --local-devices has no place in an assignment: its remotes are the plan's workers.
  const auto workers = run_huddle({"run", "--model", model, "--input", input, "--plan",
                                   dir / "a.json", "--local-devices", "2"});
  EXPECT_EQ(workers.exit_code, 2);
  EXPECT_TRUE(contains(workers.err, "drop --local-devices")) << workers.err;
  const auto other = run_huddle({"run", "--model", testing::cnn_model("resnet-tiny"), "--input",
                                 testing::cnn_input_file("resnet-tiny"), "--plan", dir / "a.json"});
  EXPECT_EQ(other.exit_code, 1);
  EXPECT_TRUE(contains(other.err, (dir / "a.json").string() + ": ")) << other.err;
  const auto stray = run_huddle(
      {"run", "--model", model, "--input", input, "--providers", "cpuN", "--plan", dir / "a.json"});
  EXPECT_EQ(stray.exit_code, 2);
  EXPECT_TRUE(contains(stray.err, "--providers goes with --strategy assign")) << stray.err;
}

TEST(AssignCli, CnnRemoteProviderIsAWorker) {
  testing::TempDir dir;
  const std::string model = testing::cnn_model("vgg-tiny");
  const std::string input = testing::cnn_input_file("vgg-tiny");
  ASSERT_EQ(run_huddle({"run", "--model", model, "--input", input, "--dump-outputs", dir / "one"})
                .exit_code,
            0);
  const auto key = testing::make_key_file(dir.path());
  testing::BackgroundHuddle worker({"worker", "--listen", "127.0.0.1:0", "--key-file", key});
  const std::string address = worker.worker_address();
  ASSERT_FALSE(address.empty());
  // Profiled with the worker (it is sent the model file): its N-D values cross both ways.
  const auto r = run_huddle({"assign", "--model", model, "--providers", "cpuN,remote:" + address,
                             "--key-file", key, "--repeats", "1", "-o", dir / "a.json", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["node_runs"], 2);
  EXPECT_GT(j["dcg"]["da_edges"].get<int>(), 2);
  expect_device_costs(j, address);
  ASSERT_EQ(j["baselines"].size(), 4u);
  for (const auto& b : j["baselines"]) {
    EXPECT_LE(j["optimal"]["predicted_ms"].get<double>(), b["predicted_ms"].get<double>() + 1e-9);
  }
  // The profiled plan lists the worker only if it gives it an op (else it runs in process, as
  // its profiling runs priced it); one with every other op on the remote but the image's reader.
  nlohmann::json plan = read_json(dir / "a.json");
  const int remote_ops = j["optimal"]["ops_per_provider"]["remote:" + address].get<int>();
  EXPECT_EQ(plan["devices"].size(), remote_ops > 0 ? 2u : 1u);
  plan["assignment"]["providers"] = {"cpuN", "remote:" + address};
  plan["devices"] = {{{"name", "primary"}}, {{"name", address}}};
  plan["token_shares"] = {1, 1};
  int i = 0;
  for (auto& [name, provider] : plan["assignment"]["ops"].items()) provider = i++ % 2;
  plan["assignment"]["ops"][kVggImageReader] = 0;
  write_json(dir / "alternating.json", plan);
  for (const std::string name : {"a.json", "alternating.json"}) {
    const bool remote = name == "alternating.json" || remote_ops > 0;
    std::vector<std::string> args = {"run",
                                     "--model",
                                     model,
                                     "--input",
                                     input,
                                     "--plan",
                                     dir / name,
                                     "--dump-outputs",
                                     dir / (name + ".out"),
                                     "--json"};
    if (remote) args.insert(args.end(), {"--workers", address, "--key-file", key});
    const auto run = run_huddle(args);
    ASSERT_EQ(run.exit_code, 0) << name << ": " << run.err;
    EXPECT_EQ(nlohmann::json::parse(run.out)["devices"].size(), remote ? 2u : 1u);
    expect_vgg_outputs(dir / (name + ".out"), dir / "one");
  }
  // The plan's remote device without the key.
  const auto keyless = run_huddle({"run", "--model", model, "--input", input, "--plan",
                                   dir / "alternating.json", "--workers", address});
  EXPECT_EQ(keyless.exit_code, 2);
  EXPECT_TRUE(contains(keyless.err, "--key-file")) << keyless.err;
}

}  // namespace
}  // namespace huddle
