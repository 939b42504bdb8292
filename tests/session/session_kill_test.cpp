// A live Session over three real `huddle worker` processes, one of which is killed (SIGKILL) at a
// random point of a request — before its first step, during the prefill, during decoding — in a
// seeded loop over strategies and planners: every request completes with the single-device greedy
// ids of tests/fixtures/references, and the session reports the recovery naming the dead worker.
// Also: every worker killed (the primary finishes alone); a worker killed while the weights
// travel. Each trial is bounded by the peer
// timeout (a step fails within it; a dead worker refuses the probe at once).
#include "model/model.h"
#include "net/key.h"
#include "runtime/generate.h"
#include "session/session.h"
#include "test_util.h"

#include <fmt/format.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <thread>

namespace huddle {
namespace {

// At least kMinTrials; more (up to kMaxTrials) while the loop has run less than kBudget, so the
// test's time stays bounded on a slow machine (or under ThreadSanitizer) and every seed still
// gives the first kMinTrials trials.
constexpr int kMinTrials = 20;
constexpr int kMaxTrials = 27;
constexpr std::chrono::seconds kBudget(60);

struct Reference {
  std::vector<std::int32_t> prompt, greedy;
};
Reference reference(const std::string& model) {
  std::ifstream in(testing::fixture("references/" + model + ".generate.json"));
  const nlohmann::json j = nlohmann::json::parse(in);
  return {j["prompt"].get<std::vector<std::int32_t>>(),
          j["greedy"].get<std::vector<std::int32_t>>()};
}

const Model& model(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Model>> models;
  auto& m = models[name];
  if (!m) m = std::make_unique<Model>(Model::load(testing::fixture_model(name)));
  return *m;
}

// Three workers on 127.0.0.1 with one key; a killed one is replaced by restart().
class Workers {
 public:
  // The workers wait 5 s for a silent peer.
  Workers() : key_file_(testing::make_key_file(dir_.path())), key_(net::load_key_file(key_file_)) {
    for (int i = 0; i < 3; ++i) start(i);
  }
  const std::vector<std::string>& addresses() const { return addresses_; }
  const net::PresharedKey& key() const { return key_; }
  const std::filesystem::path& dir() const { return dir_.path(); }
  // Waits until the worker at `address` logs that a primary opened a session on it (its setup
  // arrived; its weights have not); false after `timeout_s`.
  bool wait_for_session(const std::string& address, double timeout_s = 30) {
    for (std::size_t i = 0; i < addresses_.size(); ++i) {
      if (addresses_[i] == address)
        return !processes_[i]->wait_for_line("opened by", timeout_s, /*from_stderr=*/true).empty();
    }
    return false;
  }
  void kill(const std::string& address, int signal = SIGKILL) {
    for (std::size_t i = 0; i < addresses_.size(); ++i) {
      if (addresses_[i] == address) processes_[i]->kill(signal);
    }
  }
  // Replaces the workers that are gone.
  void restart() {
    for (int i = 0; i < 3; ++i) {
      if (!processes_[static_cast<std::size_t>(i)]->alive()) start(i);
    }
  }

 private:
  void start(int i) {
    auto p = std::make_unique<testing::BackgroundHuddle>(
        std::vector<std::string>{"worker", "--listen", "127.0.0.1:0", "--key-file",
                                 key_file_.string(), "--threads", "1", "--timeout-s", "5"});
    const std::string address = p->worker_address();
    HUDDLE_CHECK(!address.empty(), "worker {} did not start", i);
    if (processes_.size() <= static_cast<std::size_t>(i)) {
      processes_.resize(static_cast<std::size_t>(i) + 1);
      addresses_.resize(static_cast<std::size_t>(i) + 1);
    }
    processes_[static_cast<std::size_t>(i)] = std::move(p);
    addresses_[static_cast<std::size_t>(i)] = address;
  }

  testing::TempDir dir_;
  std::filesystem::path key_file_;
  net::PresharedKey key_;
  std::vector<std::unique_ptr<testing::BackgroundHuddle>> processes_;
  std::vector<std::string> addresses_;
};

// A cluster file of four equal devices (the primary and the three workers), each with room for
// about half of the model, so every planner uses them all, and three still hold it.
std::string write_cluster(const std::filesystem::path& dir) {
  nlohmann::json devices = nlohmann::json::array();
  for (const std::string name : {"P", "A", "B", "C"})
    devices.push_back({{"name", name}, {"gflops", 10.0}, {"memory_bytes", 1'500'000}});
  const std::string path = (dir / "cluster.json").string();
  std::ofstream(path) << nlohmann::json{{"devices", devices},
                                        {"default_link",
                                         {{"bandwidth_bps", 1e9}, {"latency_s", 5e-4}}}}
                             .dump();
  return path;
}

enum class KillPoint { BeforeFirstStep, DuringPrefill, DuringDecode };
const char* point_name(KillPoint p) {
  switch (p) {
    case KillPoint::BeforeFirstStep:
      return "before the first step";
    case KillPoint::DuringPrefill:
      return "during the prefill";
    case KillPoint::DuringDecode:
      return "during decoding";
  }
  return "?";
}

struct Family {
  std::string model;
  std::string strategy;
  std::vector<double> shares;
  bool cluster = false;  // plan with a planner for the cluster file
};

// Kills `victims` at `point` of one greedy request on `session` and returns its ids. The kill
// runs on a thread `delay` after the step before the point begins; the token callback after the
// point waits for it, so the kill always lands before the request ends (in the step, or just
// before the next).
std::vector<std::int32_t> run_with_kill(Session& session, Workers& workers,
                                        const std::vector<std::string>& victims,
                                        const Reference& ref, KillPoint point, int decode_step,
                                        std::chrono::microseconds delay) {
  std::atomic<bool> killed = false;
  std::thread killer;
  auto launch = [&] {
    killer = std::thread([&] {
      std::this_thread::sleep_for(delay);
      for (const std::string& v : victims) workers.kill(v);
      killed = true;
    });
  };
  int tokens = 0;
  GenerationOptions options;
  options.n_predict = static_cast<int>(ref.greedy.size());
  options.on_token = [&](std::int32_t) {
    ++tokens;
    if (point == KillPoint::DuringDecode && tokens == decode_step) launch();
    const bool after_point = (point == KillPoint::DuringPrefill && tokens == 1) ||
                             (point == KillPoint::DuringDecode && tokens == decode_step + 1);
    while (after_point && !killed) std::this_thread::sleep_for(std::chrono::microseconds(100));
  };
  if (point == KillPoint::BeforeFirstStep) {
    for (const std::string& v : victims) workers.kill(v);
    killed = true;
  }
  if (point == KillPoint::DuringPrefill) launch();
  std::vector<std::int32_t> generated;
  try {
    generated = generate(session.runner(), ref.prompt, options).generated;
  } catch (...) {
    if (killer.joinable()) killer.join();
    throw;
  }
  if (killer.joinable()) killer.join();
  return generated;
}

TEST(SessionKill, OneOfThreeWorkersKilledAtRandomPointsAndTheRequestCompletes) {
  const std::vector<Family> families = {
      {"gpt2-tiny", "galaxy", {1, 1, 1, 1}},   {"llama-tiny", "galaxy", {4, 1, 2, 3}},
      {"gpt2-tiny", "megatron", {5, 3, 1, 1}}, {"llama-tiny", "sp", {}},
      {"gpt2-tiny", "pipeline", {}},           {"llama-tiny", "pipeline", {3, 1, 1, 2}},
      {"gpt2-tiny", "galaxy", {}, true},       {"llama-tiny", "hepti", {}, true},
      {"gpt2-tiny", "hpipe", {}, true}};
  Workers workers;
  const std::string cluster_file = write_cluster(workers.dir());
  std::mt19937 rng(20261126);
  int recovered_points[3] = {0, 0, 0};
  const auto began = std::chrono::steady_clock::now();
  int trials = 0;
  for (int trial = 0; trial < kMaxTrials; ++trial) {
    if (trial >= kMinTrials && std::chrono::steady_clock::now() - began > kBudget) break;
    ++trials;
    const Family& family = families[static_cast<std::size_t>(trial) % families.size()];
    const auto point = static_cast<KillPoint>(std::uniform_int_distribution<int>(0, 2)(rng));
    const int decode_step = std::uniform_int_distribution<int>(1, 12)(rng);
    const auto delay = std::chrono::microseconds(std::uniform_int_distribution<int>(0, 3000)(rng));
    const Reference ref = reference(family.model);

    SessionOptions options;
    options.workers = workers.addresses();
    options.key = workers.key();
    options.plan.strategy = family.strategy;
    options.plan.shares = family.shares;
    if (family.cluster) options.plan.cluster_file = cluster_file;
    options.plan.timeout_s = 5;
    options.plan_tokens = static_cast<std::int64_t>(ref.prompt.size());
    std::vector<std::string> log;
    options.log = [&log](const std::string& line) { log.push_back(line); };
    Session session(model(family.model), options);
    const std::vector<std::string> used = session.device_names();
    ASSERT_GE(used.size(), 2u) << family.strategy << " planned no worker";
    const std::string victim =
        used[1 + std::uniform_int_distribution<std::size_t>(0, used.size() - 2)(rng)];
    const std::string what =
        fmt::format("trial {}: {} {} {}, worker {} killed {} (step {}, +{} us)", trial,
                    family.model, family.strategy, family.cluster ? "(cluster)" : "", victim,
                    point_name(point), decode_step, delay.count());
    const std::vector<std::int32_t> generated =
        run_with_kill(session, workers, {victim}, ref, point, decode_step, delay);
    EXPECT_EQ(generated, ref.greedy) << what;
    ASSERT_EQ(session.recoveries().size(), 1u) << what;
    const SessionRecovery& r = session.recoveries().front();
    EXPECT_EQ(r.lost, std::vector<std::string>{victim}) << what;
    EXPECT_FALSE(r.reason.empty()) << what;
    EXPECT_EQ(r.devices, static_cast<int>(used.size()) - 1) << what;
    EXPECT_EQ(session.plan().num_devices(), static_cast<int>(used.size()) - 1) << what;
    const std::vector<std::string> now = session.device_names();
    EXPECT_EQ(std::count(now.begin(), now.end(), victim), 0) << what;
    const nlohmann::json json = session.recoveries_json();
    EXPECT_EQ(json[0]["lost"][0], victim) << what;
    EXPECT_TRUE(std::any_of(log.begin(), log.end(), [&](const std::string& line) {
      return testing::contains(line, "recovered from losing " + victim);
    })) << what;
    ++recovered_points[static_cast<int>(point)];
    session.finish();
    workers.restart();
  }
  EXPECT_GE(trials, kMinTrials);
  // The seed reaches every point.
  EXPECT_GT(recovered_points[0], 0);
  EXPECT_GT(recovered_points[1], 0);
  EXPECT_GT(recovered_points[2], 0);
}

TEST(SessionKill, EveryWorkerKilledAndThePrimaryFinishesAlone) {
  for (const KillPoint point : {KillPoint::BeforeFirstStep, KillPoint::DuringDecode}) {
    Workers workers;
    const Reference ref = reference("llama-tiny");
    SessionOptions options;
    options.workers = workers.addresses();
    options.key = workers.key();
    options.plan.strategy = "galaxy";
    options.plan.shares = {1, 1, 1, 1};  // (without shares galaxy would profile the workers)
    options.plan.timeout_s = 5;
    options.log = [](const std::string&) {};
    Session session(model("llama-tiny"), options);
    const std::vector<std::int32_t> generated = run_with_kill(
        session, workers, workers.addresses(), ref, point, 3, std::chrono::microseconds(500));
    EXPECT_EQ(generated, ref.greedy) << point_name(point);
    EXPECT_EQ(session.plan().strategy, "local");
    EXPECT_EQ(session.device_names(), std::vector<std::string>{"primary"});
    std::vector<std::string> lost;
    for (const SessionRecovery& r : session.recoveries())
      lost.insert(lost.end(), r.lost.begin(), r.lost.end());
    std::sort(lost.begin(), lost.end());
    std::vector<std::string> all = workers.addresses();
    std::sort(all.begin(), all.end());
    EXPECT_EQ(lost, all) << point_name(point);
    // The session goes on serving requests on the primary.
    GenerationOptions again;
    again.n_predict = static_cast<int>(ref.greedy.size());
    EXPECT_EQ(generate(session.runner(), ref.prompt, again).generated, ref.greedy);
  }
}

// Weights travel slowly (every mesh message the primary sends is delayed 20 ms), so a worker
// killed 300 ms into the session's start dies after it accepted the session, while the weights
// are sent: the session starts on the other devices.
TEST(SessionKill, AWorkerKilledWhileWeightsTravelIsSurvived) {
  Workers workers;
  const Reference ref = reference("gpt2-tiny");
  SessionOptions options;
  options.workers = workers.addresses();
  options.key = workers.key();
  options.plan.strategy = "megatron";
  options.plan.timeout_s = 5;
  options.plan.link.latency = net::Duration(20);
  options.log = [](const std::string&) {};
  const std::string victim = workers.addresses()[2];
  // Killed once its session is open (a worker never reached would be a configuration error, not
  // a loss), before its weights have all arrived.
  std::thread killer([&] {
    EXPECT_TRUE(workers.wait_for_session(victim));
    workers.kill(victim);
  });
  std::unique_ptr<Session> session;
  try {
    session = std::make_unique<Session>(model("gpt2-tiny"), options);
  } catch (...) {
    killer.join();
    throw;
  }
  killer.join();
  ASSERT_EQ(session->recoveries().size(), 1u);
  EXPECT_EQ(session->recoveries()[0].lost, std::vector<std::string>{victim});
  EXPECT_EQ(session->recoveries()[0].replayed_tokens, 0);
  EXPECT_EQ(session->plan().num_devices(), 3);
  GenerationOptions generation;
  generation.n_predict = static_cast<int>(ref.greedy.size());
  EXPECT_EQ(generate(session->runner(), ref.prompt, generation).generated, ref.greedy);
}

// A worker that stops answering (SIGSTOP: to the primary, a cut link looks the same) is given up
// once the step has waited the peer timeout and the probe's handshake has too.
TEST(SessionKill, AWorkerThatHangsIsGivenUpAfterTheTimeout) {
  Workers workers;
  const Reference ref = reference("llama-tiny");
  SessionOptions options;
  options.workers = workers.addresses();
  options.key = workers.key();
  options.plan.strategy = "galaxy";
  options.plan.shares = {1, 1, 1, 1};
  options.plan.timeout_s = 2;
  options.log = [](const std::string&) {};
  Session session(model("llama-tiny"), options);
  const std::string victim = workers.addresses()[0];
  workers.kill(victim, SIGSTOP);
  GenerationOptions generation;
  generation.n_predict = static_cast<int>(ref.greedy.size());
  EXPECT_EQ(generate(session.runner(), ref.prompt, generation).generated, ref.greedy);
  ASSERT_EQ(session.recoveries().size(), 1u);
  EXPECT_EQ(session.recoveries()[0].lost, std::vector<std::string>{victim});
  EXPECT_TRUE(testing::contains(session.recoveries()[0].reason, "timed out") ||
              testing::contains(session.recoveries()[0].reason, victim))
      << session.recoveries()[0].reason;
  workers.kill(victim, SIGKILL);
}

// The cluster file gives room for gpt2-tiny on four devices, not on the three left after a loss:
// the request ends with the reason, and so does every later one (the session has no devices).
TEST(SessionKill, NoDeviceLeftThatHoldsTheModelEndsTheSessionClearly) {
  Workers workers;
  const Reference ref = reference("gpt2-tiny");
  nlohmann::json devices = nlohmann::json::array();
  for (const std::string name : {"P", "A", "B", "C"}) {
    devices.push_back(
        {{"name", name}, {"gflops", 10.0}, {"memory_bytes", name == "P" ? 1'300'000 : 800'000}});
  }
  const std::string cluster_file = (workers.dir() / "small.json").string();
  std::ofstream(cluster_file) << nlohmann::json{
      {"devices", devices},
      {"default_link",
       {{"bandwidth_bps", 1e9},
        {"latency_s", 5e-4}}}}.dump();
  SessionOptions options;
  options.workers = workers.addresses();
  options.key = workers.key();
  options.plan.strategy = "galaxy";
  options.plan.cluster_file = cluster_file;
  options.plan.timeout_s = 5;
  options.plan_tokens = static_cast<std::int64_t>(ref.prompt.size());  // memory for 16 tokens
  options.log = [](const std::string&) {};
  Session session(model("gpt2-tiny"), options);
  ASSERT_EQ(session.plan().num_devices(), 4);
  const std::string victim = workers.addresses()[1];
  workers.kill(victim);
  GenerationOptions generation;
  generation.n_predict = 4;
  try {
    generate(session.runner(), ref.prompt, generation);
    FAIL() << "expected a PlanError";
  } catch (const PlanError& e) {
    EXPECT_TRUE(testing::contains(e.what(), "cannot go on without " + victim)) << e.what();
    EXPECT_TRUE(testing::contains(e.what(), "does not fit")) << e.what();
  }
  try {
    generate(session.runner(), ref.prompt, generation);
    FAIL() << "expected a TransportError";
  } catch (const TransportError& e) {
    EXPECT_TRUE(testing::contains(e.what(), "no devices left")) << e.what();
    EXPECT_TRUE(testing::contains(e.what(), "does not fit")) << e.what();
  }
}

TEST(SessionKill, WithoutRecoveryTheLostWorkerIsNamed) {
  Workers workers;
  const Reference ref = reference("gpt2-tiny");
  SessionOptions options;
  options.workers = workers.addresses();
  options.key = workers.key();
  options.plan.timeout_s = 5;
  options.recover = false;
  Session session(model("gpt2-tiny"), options);
  workers.kill(workers.addresses()[1]);
  GenerationOptions generation;
  generation.n_predict = 4;
  try {
    generate(session.runner(), ref.prompt, generation);
    FAIL() << "expected a TransportError";
  } catch (const TransportError& e) {
    EXPECT_TRUE(testing::contains(e.what(), workers.addresses()[1])) << e.what();
  }
  EXPECT_TRUE(session.recoveries().empty());
}

}  // namespace
}  // namespace huddle
