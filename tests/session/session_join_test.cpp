// Workers that join a live Session (`huddle worker --join`) through a real admission port
// (net::JoinListener) and real worker processes: the next request runs on them — their share of
// the plan > 0 — with the single-device greedy ids of tests/fixtures/references; a join with the
// wrong key is refused and the session still answers; a joiner killed before the next request is
// left out and the request completes on the others.
#include "model/model.h"
#include "net/join_listener.h"
#include "net/key.h"
#include "runtime/generate.h"
#include "session/session.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <fstream>
#include <memory>
#include <mutex>
#include <thread>

namespace huddle {
namespace {

struct JoinReference {
  std::vector<std::int32_t> prompt, greedy;
};

JoinReference gpt2_reference() {
  std::ifstream in(testing::fixture("references/gpt2-tiny.generate.json"));
  const nlohmann::json j = nlohmann::json::parse(in);
  return {j["prompt"].get<std::vector<std::int32_t>>(),
          j["greedy"].get<std::vector<std::int32_t>>()};
}

const Model& gpt2_model() {
  static const Model model = Model::load(testing::fixture_model("gpt2-tiny"));
  return model;
}

std::vector<std::string> worker_args(const std::filesystem::path& key_file) {
  return {"worker",    "--listen", "127.0.0.1:0", "--key-file", key_file.string(),
          "--threads", "1",        "--timeout-s", "5"};
}

// A primary's admission port and the session's log, with one key for every worker.
class Admission {
 public:
  Admission()
      : key_file_(testing::make_key_file(dir_.path())),
        key_(net::load_key_file(key_file_)),
        listener_(net::Listener::bind(net::parse_endpoint("127.0.0.1:0")), key_, channel(),
                  [this](const std::string& line) { note(line); }) {
    listener_.start();
  }

  // A worker that the session names from the start (--workers).
  std::unique_ptr<testing::BackgroundHuddle> start_worker() {
    return std::make_unique<testing::BackgroundHuddle>(worker_args(key_file_));
  }
  // A worker that joins with `key_file` (default: the cluster's); its address once it has
  // joined ("" when it did not).
  std::unique_ptr<testing::BackgroundHuddle> start_joiner(std::string& address) {
    std::vector<std::string> args = worker_args(key_file_);
    args.insert(args.end(), {"--join", listener_.address()});
    auto worker = std::make_unique<testing::BackgroundHuddle>(args);
    address = worker->worker_address();
    if (worker->wait_for_line("joined the primary", 30, /*from_stderr=*/true).empty())
      address.clear();
    return worker;
  }

  SessionOptions options(std::vector<std::string> workers, std::vector<double> shares) {
    SessionOptions o;
    o.workers = std::move(workers);
    o.key = key_;
    o.plan.strategy = "galaxy";
    o.plan.shares = std::move(shares);
    o.plan.timeout_s = 5;
    o.plan_tokens = 8;
    o.joins = [this] { return listener_.take(); };
    o.on_join = [this](const std::vector<std::string>& admitted) {
      std::lock_guard lock(mutex_);
      admitted_.insert(admitted_.end(), admitted.begin(), admitted.end());
    };
    o.log = [this](const std::string& line) { note(line); };
    return o;
  }

  const std::filesystem::path& dir() const { return dir_.path(); }
  net::JoinListener& listener() { return listener_; }
  std::vector<std::string> admitted() {
    std::lock_guard lock(mutex_);
    return admitted_;
  }
  std::string log() {
    std::lock_guard lock(mutex_);
    return log_;
  }

 private:
  static net::ChannelOptions channel() {
    net::ChannelOptions c;
    c.handshake_timeout = net::Duration(5000);
    c.io_timeout = net::Duration(5000);
    return c;
  }
  void note(const std::string& line) {
    std::lock_guard lock(mutex_);
    log_ += line + "\n";
  }

  testing::TempDir dir_;
  std::filesystem::path key_file_;
  net::PresharedKey key_;
  std::mutex mutex_;
  std::string log_;
  std::vector<std::string> admitted_;
  net::JoinListener listener_;  // last: its thread logs into the members above
};

std::vector<std::int32_t> greedy_ids(Session& session, const JoinReference& ref) {
  GenerationOptions options;
  options.n_predict = static_cast<int>(ref.greedy.size());
  return generate(session.runner(), ref.prompt, options).generated;
}

// Device `d`'s attention heads in the first layer of `plan`.
std::int64_t heads_on(const Plan& plan, std::size_t d) {
  const auto& r = plan.layers.at(0).heads.at(d);
  return r.second - r.first;
}

TEST(SessionJoin, AWorkerThatJoinsIsUsedByTheNextRequest) {
  const JoinReference ref = gpt2_reference();
  Admission admission;
  auto first = admission.start_worker();
  const std::string first_address = first->worker_address();
  ASSERT_FALSE(first_address.empty());
  // Fixed shares: the joiner's share comes from its speed measured next to the primary's.
  Session session(gpt2_model(), admission.options({first_address}, {1, 1}));
  EXPECT_EQ(greedy_ids(session, ref), ref.greedy);
  ASSERT_EQ(session.plan().num_devices(), 2);

  std::string joined;
  auto joiner = admission.start_joiner(joined);
  ASSERT_FALSE(joined.empty()) << admission.log();
  EXPECT_EQ(greedy_ids(session, ref), ref.greedy) << admission.log();
  const Plan& plan = session.plan();
  ASSERT_EQ(plan.num_devices(), 3) << admission.log();
  const std::vector<std::string> names = session.device_names();
  ASSERT_EQ(names.size(), 3u);
  EXPECT_EQ(names[2], joined);
  EXPECT_GT(plan.token_shares.at(2), 0);
  EXPECT_GT(heads_on(plan, 2), 0);
  EXPECT_EQ(admission.admitted(), std::vector<std::string>{joined});
  EXPECT_TRUE(testing::contains(admission.log(), joined + " joined: ")) << admission.log();
  // It stays in use.
  EXPECT_EQ(greedy_ids(session, ref), ref.greedy);
  EXPECT_EQ(session.plan().num_devices(), 3);
  EXPECT_TRUE(session.recoveries().empty());
  session.finish();
}

TEST(SessionJoin, APrimaryThatRunsAloneTakesInAJoiner) {
  const JoinReference ref = gpt2_reference();
  Admission admission;
  SessionOptions options = admission.options({}, {});
  options.plan.strategy.clear();  // this device alone: local
  Session session(gpt2_model(), options);
  EXPECT_EQ(greedy_ids(session, ref), ref.greedy);
  ASSERT_EQ(session.plan().num_devices(), 1);

  std::string joined;
  auto joiner = admission.start_joiner(joined);
  ASSERT_FALSE(joined.empty()) << admission.log();
  EXPECT_EQ(greedy_ids(session, ref), ref.greedy) << admission.log();
  ASSERT_EQ(session.plan().num_devices(), 2) << admission.log();
  EXPECT_EQ(session.plan().strategy, "galaxy");
  EXPECT_EQ(session.device_names().at(1), joined);
  EXPECT_GT(heads_on(session.plan(), 1), 0);
  session.finish();
}

TEST(SessionJoin, AJoinWithTheWrongKeyIsRefusedAndTheSessionStillAnswers) {
  const JoinReference ref = gpt2_reference();
  Admission admission;
  auto first = admission.start_worker();
  const std::string first_address = first->worker_address();
  ASSERT_FALSE(first_address.empty());
  Session session(gpt2_model(), admission.options({first_address}, {1, 1}));
  EXPECT_EQ(greedy_ids(session, ref), ref.greedy);

  const std::filesystem::path wrong = testing::make_key_file(admission.dir(), "other.key");
  std::vector<std::string> args = worker_args(wrong);
  args.insert(args.end(), {"--join", admission.listener().address()});
  const testing::ProcessResult r = testing::run_huddle(args, 60);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(testing::contains(r.err, "bad key")) << r.err;
  EXPECT_TRUE(testing::contains(r.err, "join the primary at " + admission.listener().address()))
      << r.err;
  // The worker gives up as soon as its side of the handshake fails; the listener's connection
  // thread counts the refusal when its side does, possibly a moment later.
  for (int i = 0; i < 500 && admission.listener().stats().refused == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_GE(admission.listener().stats().refused, 1u);
  EXPECT_EQ(admission.listener().stats().admitted, 0u);

  EXPECT_EQ(greedy_ids(session, ref), ref.greedy) << admission.log();
  EXPECT_EQ(session.plan().num_devices(), 2);
  EXPECT_TRUE(admission.admitted().empty());
  EXPECT_TRUE(testing::contains(admission.log(), "refused a join")) << admission.log();
  session.finish();
}

TEST(SessionJoin, AJoinerThatDiesBeforeTheNextRequestIsLeftOut) {
  const JoinReference ref = gpt2_reference();
  Admission admission;
  auto first = admission.start_worker();
  const std::string first_address = first->worker_address();
  ASSERT_FALSE(first_address.empty());
  Session session(gpt2_model(), admission.options({first_address}, {1, 1}));
  EXPECT_EQ(greedy_ids(session, ref), ref.greedy);

  std::string joined;
  auto joiner = admission.start_joiner(joined);
  ASSERT_FALSE(joined.empty()) << admission.log();
  joiner->kill(SIGKILL);
  while (joiner->alive()) std::this_thread::sleep_for(std::chrono::milliseconds(10));

  EXPECT_EQ(greedy_ids(session, ref), ref.greedy) << admission.log();
  EXPECT_EQ(session.plan().num_devices(), 2);
  const std::vector<std::string> names = session.device_names();
  EXPECT_EQ(std::count(names.begin(), names.end(), joined), 0);
  EXPECT_TRUE(admission.admitted().empty());
  EXPECT_TRUE(testing::contains(admission.log(), "not admitting " + joined)) << admission.log();
  session.finish();
}

}  // namespace
}  // namespace huddle
