// The dashboard's data over real HTTP against `build/huddle serve --local-devices 2` (llama-tiny,
// galaxy): both devices with their addresses, their link, what each holds, and after a request
// its steps on both devices with the workers' reports (compute time, bytes sent, free memory).
#include "test_util.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <fmt/format.h>

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

// Three devices (gpt2-tiny, galaxy): the workers' op spans reach the primary, so the timeline's
// op-by-op view has every device's ops for the first steps of a request (the prompt and the first
// decode steps), each op named, timed within its step, and both computing and moving data.
TEST(DashboardHttp, ThreeDevicesEachStepOpByOp) {
  testing::BackgroundHuddle server({"serve", "--model", testing::fixture_model("gpt2-tiny"),
                                    "--port", "0", "--threads", "1", "--local-devices", "3"});
  const std::string address = server.worker_address(30);
  ASSERT_FALSE(address.empty()) << "no 'listening on' line";
  const int port = std::stoi(address.substr(address.rfind(':') + 1));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (get_json(port, "/health").first != 200 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto [none_status, none] = get_json(port, "/v1/huddle/ops");
  EXPECT_EQ(none_status, 404) << none;  // no request yet

  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(std::chrono::seconds(60));
  const auto done = client.Post("/v1/completions",
                                R"({"prompt": "Hello world", "max_tokens": 24, "temperature": 0})",
                                "application/json");
  ASSERT_TRUE(done);
  ASSERT_EQ(done->status, 200) << done->body;

  const auto [requests_status, requests] = get_json(port, "/v1/huddle/requests");
  ASSERT_EQ(requests_status, 200);
  ASSERT_EQ(requests["requests"].size(), 1u) << requests;
  const json& steps = requests["requests"][0]["steps"];
  ASSERT_GT(steps.size(), 16u) << "expected more steps than are kept op by op";
  for (std::size_t i = 0; i < steps.size(); ++i)
    EXPECT_EQ(steps[i][3].get<bool>(), i < 16) << "step " << i;

  const auto [cluster_status, cluster] = get_json(port, "/v1/huddle/cluster");
  ASSERT_EQ(cluster_status, 200);
  ASSERT_EQ(cluster["devices"].size(), 3u) << cluster;
  for (const std::size_t step : {std::size_t{0}, std::size_t{1}, std::size_t{15}}) {
    const auto [status, ops] =
        get_json(port, fmt::format("/v1/huddle/ops?request=1&step={}", step));
    ASSERT_EQ(status, 200) << ops;
    EXPECT_EQ(ops["request"], 1);
    EXPECT_EQ(ops["step"], step);
    EXPECT_EQ(ops["tokens"], steps[step][1]);
    ASSERT_EQ(ops["devices"].size(), 3u) << ops;
    for (std::size_t d = 0; d < 3; ++d) {
      const json& device = ops["devices"][d];
      EXPECT_EQ(device["index"], d);
      EXPECT_EQ(device["name"], cluster["devices"][d]["name"]);
      const double wall_ms = steps[step][2][d][0];
      int compute = 0, comm = 0;
      for (const json& op : device["ops"]) {
        ASSERT_EQ(op.size(), 4u) << op;
        EXPECT_FALSE(op[0].get<std::string>().empty()) << op;
        EXPECT_GE(op[1].get<double>(), 0) << op;
        EXPECT_GE(op[2].get<double>(), 0) << op;
        // Within the step as the device measured it (its clock; a little rounding).
        EXPECT_LE(op[1].get<double>() + op[2].get<double>(), wall_ms + 0.01) << op;
        (op[3] == "comm" ? comm : compute) += 1;
        EXPECT_TRUE(op[3] == "comm" || op[3] == "compute") << op;
      }
      // Galaxy: each device computes its heads and columns and exchanges the residual.
      EXPECT_GT(compute, 0) << "device " << d << " step " << step;
      EXPECT_GT(comm, 0) << "device " << d << " step " << step;
    }
  }
  // The latest step kept op by op, by default; steps past the first 16 are not kept.
  const auto [latest_status, latest] = get_json(port, "/v1/huddle/ops");
  ASSERT_EQ(latest_status, 200) << latest;
  EXPECT_EQ(latest["step"], 15);
  EXPECT_EQ(get_json(port, "/v1/huddle/ops?request=1&step=16").first, 404);
  EXPECT_EQ(get_json(port, "/v1/huddle/ops?request=2").first, 404);
  EXPECT_EQ(get_json(port, "/v1/huddle/ops?step=x").first, 400);

  server.kill(SIGTERM);
  EXPECT_FALSE(server.wait_for_line("stopping on signal 15", 20, /*from_stderr=*/true).empty());
}

}  // namespace
}  // namespace huddle
