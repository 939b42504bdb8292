// A worker that starts after the primary: the primary's one mesh builder (runtime/mesh.h over
// net::connect_mesh and net::dial_with_retry) retries it with backoff until it is up, and the
// session gives the single-device greedy ids.
#include "model/model.h"
#include "net/server.h"
#include "planner/strategies.h"
#include "runtime/cluster.h"
#include "runtime/generate.h"
#include "runtime/worker.h"
#include "test_util.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <memory>
#include <thread>

namespace huddle {
namespace {

using net::Duration;

std::unique_ptr<net::Server> start_worker(const net::PresharedKey& key, std::uint16_t port) {
  WorkerOptions w;
  w.key = key;
  net::ServerOptions s;
  s.channel = w.channel;
  s.log = [](const std::string&) {};
  auto server = std::make_unique<net::Server>(net::Listener::bind({"127.0.0.1", port}), key, s,
                                              make_worker_handler(std::move(w)));
  server->start();
  return server;
}

TEST(LateWorker, ThePrimaryRetriesAWorkerThatStartsLate) {
  const Model model = Model::load(testing::fixture_model("gpt2-tiny"));
  std::ifstream in(testing::fixture("references/gpt2-tiny.generate.json"));
  const nlohmann::json ref = nlohmann::json::parse(in);
  const auto prompt = ref["prompt"].get<std::vector<std::int32_t>>();
  const auto greedy = ref["greedy"].get<std::vector<std::int32_t>>();
  const Plan plan = make_plan("galaxy", model.config(), {"primary", "w1", "w2"}, {2, 1, 1});
  const net::PresharedKey key = net::PresharedKey::random();

  const auto early = start_worker(key, 0);
  std::uint16_t late_port = 0;
  {
    const net::Listener probe = net::Listener::bind({"127.0.0.1", 0});  // free a moment ago
    late_port = probe.port();
  }
  std::unique_ptr<net::Server> late;
  std::thread starter([&] {
    std::this_thread::sleep_for(Duration(500));
    late = start_worker(key, late_port);
  });

  ClusterOptions options;
  options.workers = {fmt::format("127.0.0.1:{}", early->port()),
                     fmt::format("127.0.0.1:{}", late_port)};
  options.key = key;
  options.timeout = Duration(20000);
  std::vector<std::int32_t> ids;
  try {
    Cluster cluster(model, plan, options);  // dials the late worker until it is up
    GenerationOptions g;
    g.n_predict = static_cast<int>(greedy.size());
    ids = generate(cluster.runner(), prompt, g).generated;
    cluster.finish();
  } catch (...) {
    starter.join();
    throw;
  }
  starter.join();
  EXPECT_EQ(ids, greedy);
  EXPECT_EQ(late->stats().sessions_started, 1u);
}

}  // namespace
}  // namespace huddle
