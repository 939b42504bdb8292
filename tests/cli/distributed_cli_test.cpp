// `huddle run` across real processes on 127.0.0.1: every strategy gives the single-device
// answer; saved plans replay; hostile peers and dead workers get clear errors while workers
// keep serving.
#include "io/npy.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace huddle {
namespace {

using testing::contains;
using testing::fixture;
using testing::fixture_model;
using testing::ids_arg;
using testing::run_huddle;

struct Case {
  std::string model;
  std::string strategy;
  std::string devices;
  std::string shares;
};

class DistributedCli : public ::testing::TestWithParam<Case> {};

TEST_P(DistributedCli, MatchesReferenceAcrossProcesses) {
  const Case& c = GetParam();
  testing::TempDir dir;
  const auto ids = testing::read_ids(fixture("references/" + c.model + ".16.ids.json"));
  const auto r =
      run_huddle({"run", "--model", fixture_model(c.model), "--ids", ids_arg(ids),
                  "--local-devices", c.devices, "--strategy", c.strategy, "--shares", c.shares,
                  "--dump-logits", dir / "out.npy", "--threads", "1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Tensor out = io::read_npy(dir / "out.npy");
  const Tensor ref = io::read_npy(fixture("references/" + c.model + ".16.npy"));
  ASSERT_EQ(out.shape(), ref.shape());
  EXPECT_LE(testing::relative_error(out, ref), 1e-4);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["strategy"], c.strategy);
  ASSERT_EQ(j["devices"].size(), static_cast<std::size_t>(std::stoi(c.devices)));
  // With tensor parallelism each worker holds only its share of the weights (sp replicates them).
  for (std::size_t d = 1; c.strategy != "sp" && d < j["devices"].size(); ++d) {
    EXPECT_LT(j["devices"][d]["weight_bytes"].get<double>(), 0.9 * 2.7e6) << j.dump();
  }

  if (c.model == "bert-tiny") return;
  std::ifstream in(fixture("references/" + c.model + ".generate.json"));
  const nlohmann::json ref_gen = nlohmann::json::parse(in);
  const auto g = run_huddle({"run", "--model", fixture_model(c.model), "--ids",
                             ids_arg(ref_gen["prompt"].get<std::vector<std::int32_t>>()),
                             "--n-predict", "16", "--local-devices", c.devices, "--strategy",
                             c.strategy, "--shares", c.shares, "--json"});
  ASSERT_EQ(g.exit_code, 0) << g.err;
  EXPECT_EQ(nlohmann::json::parse(g.out)["generated"], ref_gen["greedy"]);
}

INSTANTIATE_TEST_SUITE_P(
    Strategies, DistributedCli,
    ::testing::Values(
        Case{"gpt2-tiny", "galaxy", "3", "5,3,1"}, Case{"gpt2-tiny", "megatron", "2", "5,3"},
        Case{"llama-tiny", "sp", "3", "5,3,1"}, Case{"llama-tiny", "galaxy", "4", "4,1,2,3"},
        Case{"bert-tiny", "megatron", "3", "5,3,1"}, Case{"bert-tiny", "galaxy", "2", "1,1"},
        Case{"gpt2-tiny", "pipeline", "3", "5,3,1"}, Case{"llama-tiny", "pipeline", "4", "4,1,2,3"},
        Case{"llama-tiny", "gpipe", "2", "1,1"}, Case{"bert-tiny", "pipeline", "3", "2,1,1"}),
    [](const auto& p) {
      std::string name = p.param.model + "_" + p.param.strategy + "_" + p.param.devices;
      std::replace(name.begin(), name.end(), '-', '_');
      return name;
    });

// Quantised weights across processes: workers receive their slices as Q8_0/Q4_0 blocks, column
// cuts fall on blocks, and the answer is one device's with the same weights.
TEST(DistributedCli, QuantisedWeightsMatchOneDevice) {
  for (const std::string model : {"gpt2-tiny", "llama-tiny"}) {
    for (const std::string dtype : {"q8_0", "q4_0"}) {
      testing::TempDir dir;
      std::ifstream in(fixture("references/" + model + ".generate.json"));
      const auto prompt = nlohmann::json::parse(in)["prompt"].get<std::vector<std::int32_t>>();
      const std::vector<std::string> common = {
          "run",         "--model", fixture_model(model), "--ids", ids_arg(prompt),
          "--n-predict", "16",      "--weight-dtype",     dtype,   "--threads",
          "1",           "--json"};
      std::vector<std::string> one = common, three = common;
      one.insert(one.end(), {"--dump-logits", dir / "one.npy"});
      three.insert(three.end(), {"--local-devices", "3", "--strategy", "galaxy", "--shares",
                                 "5,3,1", "--dump-logits", dir / "three.npy"});
      const auto a = run_huddle(one);
      ASSERT_EQ(a.exit_code, 0) << a.err;
      const auto b = run_huddle(three);
      ASSERT_EQ(b.exit_code, 0) << b.err;
      const nlohmann::json ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out);
      EXPECT_EQ(jb["generated"], ja["generated"]) << model << " " << dtype;
      // Row-parallel linears sum their K range in pieces, so a device's activation differs from
      // one device's by float reassociation; the next linear rounds it to int8 blocks, and where
      // a value sits on a rounding boundary that difference becomes one step of 1/127 of its
      // block. Most positions match to reassociation; a flip moves a position's logits by up to
      // about 1e-3 of their largest (measured: one of 16 positions, 9.1e-4, on llama-tiny Q4_0).
      const Tensor one_logits = io::read_npy(dir / "one.npy");
      const Tensor three_logits = io::read_npy(dir / "three.npy");
      EXPECT_LE(testing::relative_error(three_logits, one_logits), 3e-3) << model << " " << dtype;
      int exact_rows = 0;
      for (std::int64_t r = 0; r < one_logits.dim(0); ++r) {
        if (testing::relative_error(three_logits.rows(r, r + 1), one_logits.rows(r, r + 1)) <=
            1e-4) {
          ++exact_rows;
        }
      }
      EXPECT_GE(exact_rows, one_logits.dim(0) - 2) << model << " " << dtype;
      // The quantised model is about a quarter (Q8_0) or a seventh (Q4_0) of the F32 one, and each
      // worker holds a share of it.
      EXPECT_LT(ja["weight_bytes"].get<double>(), 0.35 * 2.7e6) << model << " " << dtype;
      for (std::size_t d = 1; d < jb["devices"].size(); ++d) {
        EXPECT_LT(jb["devices"][d]["weight_bytes"].get<double>(), ja["weight_bytes"].get<double>())
            << jb.dump();
      }
    }
  }
}

TEST(DistributedCli, SavedPlanReplaysAndBadPlansAreRefused) {
  testing::TempDir dir;
  const std::string model = fixture_model("gpt2-tiny");
  const auto first = run_huddle({"run", "--model", model, "--ids", "5,6,7,8", "--local-devices",
                                 "2", "--strategy", "galaxy", "--shares", "3,1", "--save-plan",
                                 dir / "plan.json", "--dump-logits", dir / "a.npy"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const auto replay =
      run_huddle({"run", "--model", model, "--ids", "5,6,7,8", "--local-devices", "2", "--plan",
                  dir / "plan.json", "--dump-logits", dir / "b.npy"});
  ASSERT_EQ(replay.exit_code, 0) << replay.err;
  EXPECT_EQ(testing::relative_error(io::read_npy(dir / "b.npy"), io::read_npy(dir / "a.npy")), 0.0);

  std::ifstream in(dir / "plan.json");
  nlohmann::json plan = nlohmann::json::parse(in);
  nlohmann::json broken = plan;
  broken["layers"][1]["heads"][0] = {0, 5};  // overlaps device 1's range
  std::ofstream(dir / "broken.json") << broken.dump();
  auto r = run_huddle({"run", "--model", model, "--ids", "5,6", "--local-devices", "2", "--plan",
                       dir / "broken.json"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "layers[1].heads")) << r.err;

  std::ofstream(dir / "garbage.json") << "{\"version\": 1, \"strategy\": ";
  r = run_huddle({"run", "--model", model, "--ids", "5,6", "--plan", dir / "garbage.json"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "garbage.json")) << r.err;

  // A plan for another model.
  r = run_huddle({"run", "--model", fixture_model("llama-tiny"), "--ids", "5,6", "--local-devices",
                  "2", "--plan", dir / "plan.json"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "the plan is for a gpt2")) << r.err;
}

// `base` followed by `extra`: one command line of a test's variations.
std::vector<std::string> joined(std::vector<std::string> base,
                                const std::vector<std::string>& extra) {
  base.insert(base.end(), extra.begin(), extra.end());
  return base;
}

// --wire across real processes: the plan records the format, a replay gives the same logits, and
// a format that contradicts the plan, or an unknown one, is refused with its name.
TEST(DistributedCli, WireFormatsTravelBetweenProcessesAndBadOnesAreRefused) {
  testing::TempDir dir;
  const std::string model = fixture_model("gpt2-tiny");
  const std::vector<std::string> base = {"run",   "--model",      model,
                                         "--ids", "5,6,7,8,9,10", "--local-devices",
                                         "2",     "--strategy",   "galaxy"};
  auto with = [&](const std::vector<std::string>& extra) { return joined(base, extra); };
  const auto exact = run_huddle(with({"--dump-logits", dir / "f32.npy"}));
  ASSERT_EQ(exact.exit_code, 0) << exact.err;
  const auto f16 = run_huddle(
      with({"--wire", "f16", "--save-plan", dir / "f16.json", "--dump-logits", dir / "f16.npy"}));
  ASSERT_EQ(f16.exit_code, 0) << f16.err;
  const Tensor a = io::read_npy(dir / "f32.npy"), b = io::read_npy(dir / "f16.npy");
  const double error = testing::relative_error(b, a);
  EXPECT_GT(error, 0.0);
  EXPECT_LE(error, 2e-3);  // docs/distributed.md, "Activations on the wire"
  std::ifstream in(dir / "f16.json");
  EXPECT_EQ(nlohmann::json::parse(in)["wire"], "f16");

  const auto replay =
      run_huddle({"run", "--model", model, "--ids", "5,6,7,8,9,10", "--local-devices", "2",
                  "--plan", dir / "f16.json", "--dump-logits", dir / "replay.npy"});
  ASSERT_EQ(replay.exit_code, 0) << replay.err;
  EXPECT_EQ(testing::relative_error(io::read_npy(dir / "replay.npy"), b), 0.0);

  auto r = run_huddle({"run", "--model", model, "--ids", "5,6", "--local-devices", "2", "--plan",
                       dir / "f16.json", "--wire", "int8"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.err, "--wire int8: the plan")) << r.err;
  r = run_huddle(with({"--wire", "fp8"}));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.err, "--wire fp8: expected one of f32, f16, bf16, int8")) << r.err;
}

TEST(DistributedCli, GatherChunksTravelBetweenProcessesAndConflictsAreRefused) {
  testing::TempDir dir;
  const std::string model = fixture_model("llama-tiny");
  const std::vector<std::string> base = {
      "run", "--model",    model,   "--ids", "5,6,7,8,9,10,11,12,13", "--local-devices",
      "3",   "--strategy", "galaxy"};
  auto with = [&](const std::vector<std::string>& extra) { return joined(base, extra); };
  const auto whole = run_huddle(with({"--dump-logits", dir / "whole.npy"}));
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  const auto chunked = run_huddle(with({"--gather-chunks", "4", "--save-plan", dir / "c.json",
                                        "--dump-logits", dir / "chunked.npy"}));
  ASSERT_EQ(chunked.exit_code, 0) << chunked.err;
  EXPECT_LE(
      testing::relative_error(io::read_npy(dir / "chunked.npy"), io::read_npy(dir / "whole.npy")),
      1e-5);
  std::ifstream in(dir / "c.json");
  EXPECT_EQ(nlohmann::json::parse(in)["gather_chunks"], 4);
  auto r = run_huddle({"run", "--model", model, "--ids", "5,6", "--local-devices", "3", "--plan",
                       dir / "c.json", "--gather-chunks", "2"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.err, "--gather-chunks 2: the plan")) << r.err;
  r = run_huddle(with({"--gather-chunks", "0"}));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.err, "--gather-chunks")) << r.err;
}

TEST(DistributedCli, WrongKeyAndGarbageAreRefusedAndWorkerKeepsServing) {
  testing::TempDir dir;
  const auto good = testing::make_key_file(dir.path(), "good.key");
  const auto bad = testing::make_key_file(dir.path(), "bad.key");
  testing::BackgroundHuddle worker(
      {"worker", "--listen", "127.0.0.1:0", "--key-file", good.string()});
  const std::string address = worker.worker_address();
  ASSERT_FALSE(address.empty());
  const std::string model = fixture_model("gpt2-tiny");

  auto r = run_huddle({"run", "--model", model, "--ids", "1,2,3", "--workers", address,
                       "--key-file", bad.string(), "--timeout-s", "3"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, address)) << r.err;

  // Random bytes, then a connection that says nothing and goes away.
  const auto port = static_cast<std::uint16_t>(std::stoi(address.substr(address.rfind(':') + 1)));
  for (int attempt = 0; attempt < 2; ++attempt) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
    if (attempt == 0) {
      const char junk[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n\xff\xfe\x00\x01 random bytes";
      ASSERT_GT(::write(fd, junk, sizeof junk), 0);
    }
    ::close(fd);
  }
  EXPECT_TRUE(worker.alive());

  r = run_huddle({"run", "--model", model, "--ids", "1,2,3", "--n-predict", "4", "--workers",
                  address, "--key-file", good.string(), "--strategy", "megatron", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto local =
      run_huddle({"run", "--model", model, "--ids", "1,2,3", "--n-predict", "4", "--json"});
  EXPECT_EQ(nlohmann::json::parse(r.out)["generated"],
            nlohmann::json::parse(local.out)["generated"]);
  EXPECT_TRUE(worker.alive());
}

// Runs a long generation on two workers with `strategy` and kills worker `victim` (1 or 2) in
// the middle, with recovery off: the primary names it within the timeout and the other worker
// keeps serving. `plan` (optional): a plan file's JSON for the synthesised model, run with --plan.
void expect_killed_worker_named(std::vector<std::string> strategy, int victim,
                                const std::string& plan = "") {
  testing::TempDir dir;
  if (!plan.empty()) {
    std::ofstream(dir / "plan.json") << plan;
    strategy = {"--plan", (dir / "plan.json").string()};
  }
  // A model big enough that a session lasts long enough to kill a worker in the middle of it.
  const nlohmann::json config = {{"model_type", "gpt2"}, {"vocab_size", 1000},
                                 {"n_embd", 256},        {"n_layer", 4},
                                 {"n_head", 4},          {"n_positions", 1024}};
  std::ofstream(dir / "config.json") << config.dump();
  ASSERT_EQ(
      run_huddle({"synth", "--arch", "gpt2", "--config", dir / "config.json", "-o", dir / "model"})
          .exit_code,
      0);
  const auto key = testing::make_key_file(dir.path());
  testing::BackgroundHuddle w1({"worker", "--listen", "127.0.0.1:0", "--key-file", key.string()});
  testing::BackgroundHuddle w2({"worker", "--listen", "127.0.0.1:0", "--key-file", key.string()});
  const std::string a1 = w1.worker_address(), a2 = w2.worker_address();
  ASSERT_FALSE(a1.empty());
  ASSERT_FALSE(a2.empty());
  testing::BackgroundHuddle& dying = victim == 1 ? w1 : w2;
  const std::string dead = victim == 1 ? a1 : a2, alive = victim == 1 ? a2 : a1;

  std::vector<std::int32_t> prompt(16, 7);
  testing::ProcessResult result;
  std::thread primary([&] {
    std::vector<std::string> args = {
        "run",         "--model",     dir / "model", "--ids",       ids_arg(prompt),
        "--n-predict", "1000",        "--workers",   a1 + "," + a2, "--key-file",
        key.string(),  "--timeout-s", "3",           "--no-recover"};
    args.insert(args.end(), strategy.begin(), strategy.end());
    result = run_huddle(args, 60);
  });
  // Kill the worker once its session is running.
  const std::string started = dying.wait_for_line("MB of weights", 30, /*from_stderr=*/true);
  const auto killed_at = std::chrono::steady_clock::now();
  dying.kill(SIGKILL);
  primary.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  ASSERT_FALSE(started.empty());
  EXPECT_EQ(result.exit_code, 1) << result.out;
  EXPECT_TRUE(contains(result.err, dead)) << result.err;
  EXPECT_LT(seconds, 20.0);  // generous bound: the limit under test is the 3 s peer timeout
  // The surviving worker serves the next session.
  const auto next = run_huddle({"run", "--model", dir / "model", "--ids", "1,2", "--workers", alive,
                                "--key-file", key.string(), "--json"});
  EXPECT_EQ(next.exit_code, 0) << next.err;
}

TEST(DistributedCli, KilledWorkerIsNamedWithinTheTimeout) {
  expect_killed_worker_named({}, 2);
}

// Pipeline stages 0 (primary) -> 1 -> 2: the middle stage dies while slices flow through it.
TEST(DistributedCli, KilledMiddleStageIsNamedWithinTheTimeout) {
  expect_killed_worker_named({"--strategy", "pipeline", "--shares", "1,1,1"}, 1);
}

// The last stage, which sends the outputs to the primary, dies.
TEST(DistributedCli, KilledLastStageIsNamedWithinTheTimeout) {
  expect_killed_worker_named({"--strategy", "pipeline", "--shares", "1,1,1"}, 2);
}

// A tensor-parallel group stage of both workers (HPipe's fast island) after the primary's stage:
// the group's second member dies while its leader waits on it in an all-reduce.
TEST(DistributedCli, KilledGroupMemberIsNamedWithinTheTimeout) {
  expect_killed_worker_named({}, 2, R"({"version": 1, "strategy": "test",
      "model": {"architecture": "gpt2", "layers": 4, "hidden": 256, "heads": 4, "kv_heads": 4,
                "ffn": 1024},
      "devices": [{"name": "primary"}, {"name": "w1"}, {"name": "w2"}],
      "token_shares": [1, 1, 1], "layers": [],
      "pipeline": {"stages": [{"device": 0, "units": [0, 3]},
                              {"devices": [1, 2], "units": [3, 10], "shares": [3, 1]}],
                   "sliced": false}})");
}

// Three workers; the primary's mesh messages are delayed (--link-latency-ms) so the request lasts
// long enough for a worker to be killed once its session runs.
struct KillRun {
  testing::ProcessResult result;
  std::string victim;
};
KillRun run_and_kill_one(const std::vector<std::string>& extra, const testing::TempDir& dir) {
  const auto key = testing::make_key_file(dir.path());
  std::vector<std::unique_ptr<testing::BackgroundHuddle>> workers;
  std::vector<std::string> addresses;
  for (int i = 0; i < 3; ++i) {
    workers.push_back(std::make_unique<testing::BackgroundHuddle>(std::vector<std::string>{
        "worker", "--listen", "127.0.0.1:0", "--key-file", key.string(), "--threads", "1"}));
    addresses.push_back(workers.back()->worker_address());
  }
  std::ifstream in(fixture("references/gpt2-tiny.generate.json"));
  const auto prompt = nlohmann::json::parse(in)["prompt"].get<std::vector<std::int32_t>>();
  KillRun run;
  run.victim = addresses[1];
  std::thread primary([&] {
    std::vector<std::string> args = {"run",
                                     "--model",
                                     fixture_model("gpt2-tiny"),
                                     "--ids",
                                     ids_arg(prompt),
                                     "--n-predict",
                                     "16",
                                     "--workers",
                                     addresses[0] + "," + addresses[1] + "," + addresses[2],
                                     "--key-file",
                                     key.string(),
                                     "--timeout-s",
                                     "5",
                                     "--link-latency-ms",
                                     "20",
                                     "--threads",
                                     "1",
                                     "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    run.result = run_huddle(args, 120);
  });
  const std::string started = workers[1]->wait_for_line("MB of weights", 60, /*from_stderr=*/true);
  workers[1]->kill(SIGKILL);
  primary.join();
  EXPECT_FALSE(started.empty());
  return run;
}

TEST(DistributedCli, AKilledWorkerIsSurvivedAndTheRecoveryReported) {
  testing::TempDir dir;
  const KillRun run = run_and_kill_one({"--trace", dir / "trace.json"}, dir);
  ASSERT_EQ(run.result.exit_code, 0) << run.result.err;
  const nlohmann::json j = nlohmann::json::parse(run.result.out);
  std::ifstream in(fixture("references/gpt2-tiny.generate.json"));
  EXPECT_EQ(j["generated"], nlohmann::json::parse(in)["greedy"]);
  ASSERT_TRUE(j.contains("recoveries")) << j.dump();
  ASSERT_EQ(j["recoveries"].size(), 1u) << j.dump();
  const nlohmann::json& r = j["recoveries"][0];
  EXPECT_EQ(r["lost"], nlohmann::json::array({run.victim}));
  EXPECT_GT(r["recovery_ms"].get<double>(), 0.0);
  EXPECT_FALSE(r["reason"].get<std::string>().empty());
  EXPECT_EQ(r["devices"], 3);
  ASSERT_EQ(j["devices"].size(), 3u);  // the primary and the two workers left
  for (const auto& d : j["devices"]) EXPECT_NE(d["name"], run.victim);
  EXPECT_TRUE(contains(run.result.err, "recovered from losing " + run.victim)) << run.result.err;
  std::ifstream trace_in(dir / "trace.json");
  const std::string trace((std::istreambuf_iterator<char>(trace_in)), {});
  EXPECT_TRUE(contains(trace, "recovery (lost " + run.victim + ")"));
}

TEST(DistributedCli, NoDeviceLeftThatHoldsTheModelIsAClearError) {
  testing::TempDir dir;
  // gpt2-tiny (2.7 MB of weights) on galaxy fits four devices (the primary needs 1.1 MB, each
  // worker 0.74 MB: `huddle plan`), not the three left after a loss (1.5 MB and 0.87 MB).
  nlohmann::json devices = nlohmann::json::array();
  for (const std::string name : {"P", "A", "B", "C"}) {
    devices.push_back(
        {{"name", name}, {"gflops", 10.0}, {"memory_bytes", name == "P" ? 1'300'000 : 800'000}});
  }
  std::ofstream(dir / "cluster.json")
      << nlohmann::json{{"devices", devices},
                        {"default_link", {{"bandwidth_bps", 1e9}, {"latency_s", 5e-4}}}}
             .dump();
  const KillRun run =
      run_and_kill_one({"--cluster", dir / "cluster.json", "--strategy", "galaxy"}, dir);
  EXPECT_EQ(run.result.exit_code, 1) << run.result.out << run.result.err;
  EXPECT_TRUE(contains(run.result.err, "cannot go on without " + run.victim)) << run.result.err;
  EXPECT_TRUE(contains(run.result.err, "does not fit")) << run.result.err;
}

// The processes whose parent is `pid` (from /proc).
std::vector<int> children_of(int pid) {
  std::vector<int> out;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    std::getline(stat, line);
    const std::size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    std::string state;
    int ppid = 0;
    rest >> state >> ppid;
    if (ppid == pid && state != "Z") out.push_back(std::stoi(name));
  }
  return out;
}

// Whether process `pid` still runs (not gone, not a zombie).
bool running(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const std::size_t close = line.rfind(')');
  return close != std::string::npos && line.substr(close + 2, 1) != "Z";
}

// A primary killed outright (no destructors run) does not leave its --local-devices workers
// listening for ever: they get SIGTERM with their parent's death.
TEST(DistributedCli, LocalWorkersDieWithAKilledPrimary) {
  testing::BackgroundHuddle server({"serve", "--model", fixture_model("gpt2-tiny"), "--port", "0",
                                    "--threads", "1", "--local-devices", "3"});
  ASSERT_FALSE(server.worker_address(30).empty()) << "no 'listening on' line";
  std::vector<int> workers;
  const auto start = std::chrono::steady_clock::now();
  while (workers.size() < 2 &&
         std::chrono::steady_clock::now() - start < std::chrono::seconds(30)) {
    workers = children_of(server.pid());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(workers.size(), 2u);
  server.kill(SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  for (const int w : workers) {
    while (running(w) && std::chrono::steady_clock::now() - killed < std::chrono::seconds(20)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_FALSE(running(w)) << "worker " << w << " outlived its primary";
  }
}

TEST(DistributedCli, WorkerWithItsOwnCopyMapsWeightsAndAStaleCopyIsNotUsed) {
  testing::TempDir dir;
  const auto key = testing::make_key_file(dir.path());
  const std::string model = fixture_model("llama-tiny");
  // A copy whose weights differ from the primary's (one tensor zeroed) must not be used.
  testing::rewrite_checkpoint(
      model, dir / "stale", [](const std::string& n) { return n == "model.norm.weight" ? "" : n; },
      {{"model.norm.weight", Tensor::zeros(DType::F32, {128})}});
  testing::BackgroundHuddle same(
      {"worker", "--listen", "127.0.0.1:0", "--key-file", key.string(), "--model", model});
  testing::BackgroundHuddle stale({"worker", "--listen", "127.0.0.1:0", "--key-file", key.string(),
                                   "--model", (dir / "stale").string()});
  const std::string a = same.worker_address(), b = stale.worker_address();
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  const auto ids = testing::read_ids(fixture("references/llama-tiny.16.ids.json"));
  const auto r = run_huddle({"run", "--model", model, "--ids", ids_arg(ids), "--workers",
                             a + "," + b, "--key-file", key.string(), "--strategy", "galaxy",
                             "--dump-logits", dir / "out.npy", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["devices"][1]["weights_mapped_locally"].get<bool>());
  EXPECT_FALSE(j["devices"][2]["weights_mapped_locally"].get<bool>());
  EXPECT_LE(testing::relative_error(io::read_npy(dir / "out.npy"),
                                    io::read_npy(fixture("references/llama-tiny.16.npy"))),
            1e-4);
}

TEST(DistributedCli, PlannersChooseTheSplitFromAClusterFile) {
  testing::TempDir dir;
  const nlohmann::json cluster = {
      {"devices",
       {{{"name", "L"}, {"gflops", 100.0}, {"memory_bytes", 4e9}},
        {{"name", "M"}, {"gflops", 60.0}, {"memory_bytes", 4e9}},
        {{"name", "S"}, {"gflops", 25.0}, {"memory_bytes", 4e9}}}},
      {"default_link", {{"bandwidth_bps", 1e9}, {"latency_s", 0.0005}}}};
  std::ofstream(dir / "cluster.json") << cluster.dump();
  const auto ids = testing::read_ids(fixture("references/gpt2-tiny.16.ids.json"));
  const Tensor ref = io::read_npy(fixture("references/gpt2-tiny.16.npy"));
  for (const std::string strategy : {"galaxy", "hepti", "auto"}) {
    const auto r = run_huddle({"run", "--model", fixture_model("gpt2-tiny"), "--ids", ids_arg(ids),
                               "--local-devices", "3", "--cluster", dir / "cluster.json",
                               "--strategy", strategy, "--dump-logits", dir / "out.npy"});
    ASSERT_EQ(r.exit_code, 0) << strategy << ": " << r.err;
    EXPECT_TRUE(contains(r.err, "planner " + strategy)) << r.err;
    EXPECT_LE(testing::relative_error(io::read_npy(dir / "out.npy"), ref), 1e-4) << strategy;
  }
  const auto mismatch = run_huddle({"run", "--model", fixture_model("gpt2-tiny"), "--ids", "1,2",
                                    "--local-devices", "2", "--cluster", dir / "cluster.json"});
  EXPECT_EQ(mismatch.exit_code, 2) << mismatch.err;
  EXPECT_TRUE(contains(mismatch.err, "3 devices")) << mismatch.err;
}

// `huddle plan --weight-dtype` counts the weights as `huddle run --weight-dtype` keeps them:
// Q4_0 matrices take under a third of F32's memory on every device, F16 half; a bad name is a
// usage error.
TEST(DistributedCli, PlanCountsTheWeightDtypeItIsAskedFor) {
  testing::TempDir dir;
  const nlohmann::json cluster = {
      {"devices",
       {{{"name", "A"}, {"gflops", 50.0}, {"memory_bytes", 4e9}},
        {{"name", "B"}, {"gflops", 50.0}, {"memory_bytes", 4e9}}}},
      {"default_link", {{"bandwidth_bps", 1e9}, {"latency_s", 0.0005}}}};
  std::ofstream(dir / "cluster.json") << cluster.dump();
  const auto memory = [&](const std::string& dtype) {
    std::vector<std::string> args = {"plan",
                                     "--cluster",
                                     (dir / "cluster.json").string(),
                                     "--model",
                                     fixture_model("llama-tiny").string(),
                                     "--strategy",
                                     "megatron",
                                     "--json"};
    if (!dtype.empty()) args.insert(args.end(), {"--weight-dtype", dtype});
    const auto r = run_huddle(args);
    EXPECT_EQ(r.exit_code, 0) << dtype << ": " << r.err;
    std::vector<double> bytes;
    const nlohmann::json plan = nlohmann::json::parse(r.out);
    for (const auto& d : plan["devices"]) bytes.push_back(d["memory_bytes"].get<double>());
    return bytes;
  };
  const std::vector<double> f32 = memory(""), f16 = memory("f16"), q4 = memory("q4_0");
  ASSERT_EQ(f32.size(), 2u);
  ASSERT_EQ(q4.size(), 2u);
  ASSERT_EQ(f16.size(), 2u);
  for (std::size_t d = 0; d < 2; ++d) {
    EXPECT_LT(f16[d], 0.8 * f32[d]) << d;
    EXPECT_LT(q4[d], f16[d]) << d;
  }
  const auto bad = run_huddle({"plan", "--cluster", dir / "cluster.json", "--model",
                               fixture_model("llama-tiny"), "--weight-dtype", "q5_k"});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_TRUE(contains(bad.err, "q5_k")) << bad.err;
}

TEST(DistributedCli, TraceHasComputeAndCommunicationPerDevice) {
  testing::TempDir dir;
  const auto r = run_huddle({"run", "--model", fixture_model("gpt2-tiny"), "--ids", "1,2,3,4,5,6",
                             "--n-predict", "2", "--local-devices", "3", "--strategy", "galaxy",
                             "--trace", dir / "trace.json", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(dir / "trace.json");
  const nlohmann::json trace = nlohmann::json::parse(in);
  std::map<int, std::set<std::string>> categories;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "X") {
      categories[e["pid"].get<int>()].insert(e["cat"].get<std::string>());
      EXPECT_GE(e["dur"].get<double>(), 0.0);
    }
  }
  ASSERT_EQ(categories.size(), 3u);
  for (const auto& [pid, cats] : categories) {
    EXPECT_TRUE(cats.contains("compute") && cats.contains("comm")) << pid;
  }
  EXPECT_EQ(nlohmann::json::parse(r.out)["exposed_comm_ms"].size(), 3u);
}

// A pipeline over 3 processes: every stage runs once per slice (3 slices of a 40-token prompt,
// then one per decode step), and each stage after the first receives its slices from the one
// before: the trace shows the slices, per device.
TEST(DistributedCli, PipelineTraceShowsEverySliceOnEveryStage) {
  testing::TempDir dir;
  std::vector<std::int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back(1 + 7 * i);
  const auto r =
      run_huddle({"run", "--model", fixture_model("llama-tiny"), "--ids", ids_arg(prompt),
                  "--n-predict", "2", "--local-devices", "3", "--strategy", "pipeline", "--shares",
                  "2,1,1", "--trace", dir / "trace.json", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(dir / "trace.json");
  const nlohmann::json trace = nlohmann::json::parse(in);
  std::map<int, std::vector<std::int64_t>> received, sent;  // rows per pipe op, per device
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const std::string name = e["name"];
    const int pid = e["pid"];
    if (name.ends_with("@recv")) received[pid].push_back(e["args"]["rows"]);
    if (name.ends_with("@send")) sent[pid].push_back(e["args"]["rows"]);
  }
  // The 40-token prompt in slices of 14, 13, 13, then two decode steps of one token (the second
  // generated token is not fed back).
  const std::vector<std::int64_t> slices = {14, 13, 13, 1};
  EXPECT_EQ(sent[0], slices);
  EXPECT_EQ(received[1], slices);
  EXPECT_EQ(sent[1], slices);
  EXPECT_EQ(received[2], slices);
  EXPECT_TRUE(received[0].empty());
}

}  // namespace
}  // namespace huddle
