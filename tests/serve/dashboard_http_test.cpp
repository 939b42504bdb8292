// The dashboard's data over real HTTP against `build/huddle serve --local-devices 2` (llama-tiny,
// galaxy): both devices with their addresses, their link, what each holds, and after a request
// its steps on both devices with the workers' reports (compute time, bytes sent, free memory).
#include "test_util.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <csignal>
#include <thread>

namespace huddle {
namespace {

using nlohmann::json;
using testing::contains;

// GET `path`'s status and parsed body (-1 when nothing answered).
std::pair<int, json> get_json(int port, const std::string& path) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(std::chrono::seconds(60));
  const auto res = client.Get(path);
  if (!res) return {-1, json()};
  return {res->status, json::parse(res->body, nullptr, false)};
}

TEST(DashboardHttp, TwoDevicesTheirPlanAndEachStepOnBoth) {
  testing::BackgroundHuddle server({"serve", "--model", testing::fixture_model("llama-tiny"),
                                    "--port", "0", "--threads", "1", "--local-devices", "2"});
  const std::string address = server.worker_address(30);
  ASSERT_FALSE(address.empty()) << "no 'listening on' line";
  const int port = std::stoi(address.substr(address.rfind(':') + 1));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (get_json(port, "/health").first != 200 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));

  const auto [status, cluster] = get_json(port, "/v1/huddle/cluster");
  ASSERT_EQ(status, 200) << cluster;
  EXPECT_EQ(cluster["model"]["id"], "llama-tiny");
  EXPECT_EQ(cluster["model"]["architecture"], "llama");
  ASSERT_EQ(cluster["devices"].size(), 2u) << cluster;
  EXPECT_EQ(cluster["devices"][0]["name"], "primary");
  EXPECT_EQ(cluster["devices"][0]["address"], "this process");
  const std::string worker = cluster["devices"][1]["name"];
  EXPECT_TRUE(worker.starts_with("127.0.0.1:")) << worker;
  EXPECT_EQ(cluster["devices"][1]["role"], "worker");
  EXPECT_GT(cluster["devices"][1]["weight_bytes"].get<std::int64_t>(), 0);
  EXPECT_TRUE(cluster["devices"][1]["speed"].is_null());  // nothing measured yet
  ASSERT_EQ(cluster["links"].size(), 1u);
  EXPECT_EQ(cluster["links"][0]["b_name"], worker);
  EXPECT_EQ(cluster["plan"]["strategy"], "galaxy");
  ASSERT_EQ(cluster["plan"]["devices"].size(), 2u);
  for (const json& d : cluster["plan"]["devices"]) {
    EXPECT_DOUBLE_EQ(d["share"].get<double>(), 0.5);
    ASSERT_FALSE(d["holds"].empty());
    EXPECT_TRUE(contains(d["holds"][0].get<std::string>(), "heads")) << d;
  }
  EXPECT_EQ(cluster["plan_json"]["strategy"], "galaxy");

  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(std::chrono::seconds(60));
  const auto done =
      client.Post("/v1/completions", R"({"prompt": "The quick brown fox", "max_tokens": 6,
                                         "temperature": 0})",
                  "application/json");
  ASSERT_TRUE(done);
  ASSERT_EQ(done->status, 200) << done->body;
  const json answer = json::parse(done->body);

  const auto [requests_status, requests] = get_json(port, "/v1/huddle/requests");
  ASSERT_EQ(requests_status, 200);
  ASSERT_EQ(requests["requests"].size(), 1u) << requests;
  const json& r = requests["requests"][0];
  EXPECT_FALSE(r["running"].get<bool>());
  EXPECT_EQ(r["finish_reason"], answer["choices"][0]["finish_reason"]);
  EXPECT_EQ(r["prompt_tokens"], answer["usage"]["prompt_tokens"]);
  EXPECT_EQ(r["completion_tokens"], answer["usage"]["completion_tokens"]);
  ASSERT_FALSE(r["steps"].empty());
  EXPECT_EQ(r["steps"][0][1], answer["usage"]["prompt_tokens"]);  // the prompt in one step
  for (const json& step : r["steps"]) {
    ASSERT_EQ(step[2].size(), 2u) << step;  // a report from each device
    for (const json& device : step[2]) {
      EXPECT_GT(device[0].get<double>(), 0) << step;  // wall time
      EXPECT_GE(device[1].get<double>(), 0) << step;  // compute time
    }
  }
  // Tensor parallelism: both devices send their partial results every step.
  EXPECT_GT(r["steps"][0][2][1][2].get<std::int64_t>(), 0) << r["steps"][0];

  const auto [again, measured] = get_json(port, "/v1/huddle/cluster");
  ASSERT_EQ(again, 200);
  for (const json& d : measured["devices"]) {
    EXPECT_TRUE(d["speed"]["prefill_tokens_per_s"].is_number()) << d;
    EXPECT_GT(d["bytes_sent_last_request"].get<std::int64_t>(), 0) << d;
  }
  EXPECT_GT(measured["devices"][1]["free_memory_bytes"].get<std::int64_t>(), 0) << measured;

  server.kill(SIGTERM);
  EXPECT_FALSE(server.wait_for_line("stopping on signal 15", 20, /*from_stderr=*/true).empty());
}

}  // namespace
}  // namespace huddle
