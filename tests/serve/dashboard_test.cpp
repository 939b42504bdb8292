// The dashboard in process: what plans look like in words, the step log's bounds, an Engine whose
// steps are logged (gpt2-tiny), and the page and data routes over HTTP on 127.0.0.1 (loading,
// ready, the API key).
#include "serve/dashboard.h"

#include "model/model.h"
#include "planner/strategies.h"
#include "runtime/executor.h"
#include "serve/engine.h"
#include "serve/plan_view.h"
#include "serve/request_error.h"
#include "serve/server.h"
#include "serve/step_log.h"
#include "test_util.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <thread>

namespace huddle::serve {
namespace {

using nlohmann::json;
using testing::contains;

TEST(PlanView, GalaxyGroupsLayersHeldAlikeAndGivesShares) {
  const Model model = Model::load(testing::fixture_model("llama-tiny"));
  const ModelConfig& c = model.config();
  const Plan plan = make_plan("galaxy", c, {"primary", "127.0.0.1:7001"}, {3, 1});
  const json view = plan_view(plan);
  EXPECT_EQ(view["strategy"], "galaxy");
  ASSERT_EQ(view["devices"].size(), 2u);
  EXPECT_EQ(view["devices"][1]["name"], "127.0.0.1:7001");
  EXPECT_DOUBLE_EQ(view["devices"][0]["share"].get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(view["devices"][1]["share"].get<double>(), 0.25);
  // Every layer is split alike: one line, naming the device's own heads and columns.
  const auto& holds = view["devices"][0]["holds"];
  ASSERT_EQ(holds.size(), 1u) << view;
  const std::string line = holds[0];
  const Range heads = plan.layers[0].heads[0];
  EXPECT_TRUE(contains(line, fmt::format("layers 0-{}:", c.layers - 1))) << line;
  const std::string own = heads.second - heads.first == 1
                              ? std::to_string(heads.first)
                              : fmt::format("{}-{}", heads.first, heads.second - 1);
  EXPECT_TRUE(contains(line, fmt::format("heads {} of {}", own, c.heads))) << line;
  EXPECT_TRUE(contains(line, "FFN columns")) << line;
  EXPECT_TRUE(contains(line, "its tokens of the residual")) << line;
}

TEST(PlanView, PipelineStagesAndTheLocalModel) {
  const Model model = Model::load(testing::fixture_model("llama-tiny"));
  const Plan plan = make_plan("pipeline", model.config(), {"primary", "w1"}, {1, 1});
  const json view = plan_view(plan);
  ASSERT_EQ(view["devices"].size(), 2u);
  const std::string first = view["devices"][0]["holds"][0];
  EXPECT_TRUE(contains(first, "stage 0: embedding")) << first;
  const std::string last = view["devices"][1]["holds"][0];
  EXPECT_TRUE(contains(last, "stage 1:")) << last;
  EXPECT_TRUE(contains(last, "head")) << last;

  const json local = local_plan_view("primary", 3);
  EXPECT_EQ(local["strategy"], "local");
  EXPECT_EQ(local["devices"][0]["holds"][0], "the whole model (3 layers)");
}

// After a lost device the session runs on fewer devices; the dashboard is told and shows them.
TEST(Dashboard, NewFactsReplaceTheDevicesAndPlan) {
  const Model model = Model::load(testing::fixture_model("llama-tiny"));
  ClusterFacts facts;
  facts.model_id = "m";
  facts.layers = model.config().layers;
  facts.devices = {{"primary", "this process", 1, 1}, {"w1", "w1", 1, 1}, {"w2", "w2", 1, 1}};
  facts.plan = make_plan("galaxy", model.config(), {"primary", "w1", "w2"}, {});
  Dashboard dashboard(facts);
  EXPECT_EQ(dashboard.cluster_json()["devices"].size(), 3u);
  facts.devices.pop_back();
  facts.plan = make_plan("galaxy", model.config(), {"primary", "w1"}, {});
  dashboard.set_facts(facts);
  const json now = dashboard.cluster_json();
  ASSERT_EQ(now["devices"].size(), 2u);
  EXPECT_EQ(now["devices"][1]["name"], "w1");
  EXPECT_EQ(now["plan"]["devices"].size(), 2u);
  EXPECT_EQ(now["plan_json"]["devices"].size(), 2u);
}

TEST(StepLog, KeepsTheLastRequestsAndCountsStepsPastTheLimit) {
  StepLog log(/*max_requests=*/2, /*max_steps=*/3);
  const auto now = std::chrono::steady_clock::now();
  log.add_step(now, 5, 0, {{1, 1, 0, 0}});  // no request running: ignored
  EXPECT_TRUE(log.requests().empty());
  for (int r = 0; r < 3; ++r) {
    log.request_started(5);
    for (int s = 0; s < 5; ++s)
      log.add_step(std::chrono::steady_clock::now(), s == 0 ? 5 : 1, s, {{2.0, 1.5, 10, 1000}});
    log.request_finished(5, "length");
  }
  const auto requests = log.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].id, 2u);
  EXPECT_EQ(requests[1].id, 3u);
  EXPECT_EQ(requests[1].steps.size(), 3u);
  EXPECT_EQ(requests[1].dropped_steps, 2);
  EXPECT_FALSE(requests[1].running);
  EXPECT_EQ(requests[1].finish_reason, "length");
}

// Op spans are kept for the first max_op_steps steps of each request only, and only asked for
// while that holds; a kept step comes back op by op with its names, per device.
TEST(StepLog, KeepsTheFirstStepsOpByOp) {
  StepLog log(/*max_requests=*/2, /*max_steps=*/8, /*max_op_steps=*/2);
  EXPECT_FALSE(log.wants_op_spans()) << "no request runs";
  log.request_started(3);
  const std::vector<std::vector<OpSpan>> ops = {
      {{"blk.0.qkv", false, 0, 40}, {"blk.0.all_reduce", true, 40, 10}},
      {{"blk.0.qkv", false, 5, 30}}};
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(log.wants_op_spans(), s < 2) << s;
    log.add_step(std::chrono::steady_clock::now(), s == 0 ? 3 : 1, s, {{1, 1, 0, 0}, {1, 1, 0, 0}},
                 ops);
  }
  log.request_finished(3, "length");
  EXPECT_FALSE(log.wants_op_spans());
  const RequestRecord r = log.requests().back();
  ASSERT_EQ(r.steps.size(), 4u);
  EXPECT_TRUE(r.steps[0].ops_kept);
  EXPECT_TRUE(r.steps[1].ops_kept);
  EXPECT_FALSE(r.steps[2].ops_kept);
  const std::optional<StepOps> last = log.step_ops(r.id);  // its last step kept op by op
  ASSERT_TRUE(last);
  EXPECT_EQ(last->step, 1u);
  EXPECT_EQ(last->tokens, 1);
  ASSERT_EQ(last->devices.size(), 2u);
  ASSERT_EQ(last->devices[0].size(), 2u);
  EXPECT_EQ(last->devices[0][1].name, "blk.0.all_reduce");
  EXPECT_TRUE(last->devices[0][1].comm);
  EXPECT_DOUBLE_EQ(last->devices[0][1].start_us, 40);
  EXPECT_DOUBLE_EQ(last->devices[1][0].duration_us, 30);
  EXPECT_TRUE(log.step_ops(r.id, 0));
  EXPECT_FALSE(log.step_ops(r.id, 2)) << "past max_op_steps";
  EXPECT_FALSE(log.step_ops(r.id + 1));

  // A step without ops (a runner that reports none) keeps none: the request has none to show.
  log.request_started(1);
  log.add_step(std::chrono::steady_clock::now(), 1, 0, {{1, 1, 0, 0}});
  EXPECT_FALSE(log.requests().back().steps[0].ops_kept);
  EXPECT_FALSE(log.step_ops(log.requests().back().id));

  // The dashboard's JSON: the step flagged in requests_json, then op by op.
  Dashboard dashboard({"tiny", "gpt2", 1, 32, {{"primary", "this process", 1, 1}}, {}, ""});
  StepLog& own = dashboard.log();
  own.request_started(3);
  own.add_step(std::chrono::steady_clock::now(), 3, 0, {{1, 1, 0, 0}, {1, 1, 0, 0}}, ops);
  own.request_finished(1, "length");
  const json requests = dashboard.requests_json();
  EXPECT_EQ(requests["requests"][0]["steps"][0][3], true) << requests;
  const json step = dashboard.step_ops_json(std::nullopt, std::nullopt);
  EXPECT_EQ(step["request"], 1);
  EXPECT_EQ(step["step"], 0);
  ASSERT_EQ(step["devices"].size(), 2u);
  EXPECT_EQ(step["devices"][0]["name"], "primary");
  EXPECT_EQ(step["devices"][1]["name"], "device 1");  // no facts for it
  EXPECT_EQ(step["devices"][0]["ops"][1], json({"blk.0.all_reduce", 0.04, 0.01, "comm"}));
  EXPECT_EQ(step["devices"][1]["ops"][0], json({"blk.0.qkv", 0.005, 0.03, "compute"}));
  EXPECT_THROW(dashboard.step_ops_json(1, 5), RequestError);
  EXPECT_THROW(dashboard.step_ops_json(7, std::nullopt), RequestError);
}

TEST(StepLog, ARequestLeftByAnExceptionEndsAsAnError) {
  StepLog log;
  std::int64_t tokens = 0;
  {
    ObservedRequest observed(&log, 4, tokens);
    EXPECT_TRUE(log.requests().back().running);
    tokens = 2;
  }
  ASSERT_EQ(log.requests().size(), 1u);
  EXPECT_FALSE(log.requests()[0].running);
  EXPECT_EQ(log.requests()[0].finish_reason, "error");
  EXPECT_EQ(log.requests()[0].completion_tokens, 2);
}

TEST(DeviceSpeeds, PrefillTokensPerComputeSecondAndMedianDecodeStep) {
  RequestRecord r;
  r.steps.push_back({0, 10, 0, {{5, 4, 100, 0}, {5, 2, 50, 777}}});
  r.steps.push_back({5, 1, 10, {{1, 0.5, 10, 0}, {1, 0.25, 5, 0}}});
  r.steps.push_back({6, 1, 11, {{1, 0.7, 10, 0}, {1, 0.25, 5, 0}}});
  r.steps.push_back({7, 1, 12, {{1, 0.9, 10, 0}, {1, 0.25, 5, 0}}});
  const auto speeds = device_speeds(r);
  ASSERT_EQ(speeds.size(), 2u);
  EXPECT_NEAR(speeds[0].prefill_tokens_per_s, 2500, 1e-9);  // 10 tokens in 4 ms
  EXPECT_NEAR(speeds[1].prefill_tokens_per_s, 5000, 1e-9);
  EXPECT_DOUBLE_EQ(speeds[0].decode_compute_ms, 0.7);  // the median of 0.5, 0.7, 0.9
  EXPECT_EQ(speeds[0].bytes_sent, 130u);
  EXPECT_EQ(speeds[1].free_memory_bytes, 777);
}

// gpt2-tiny on this process, its steps logged as `huddle serve` logs them.
struct Served {
  Model model = Model::load(testing::fixture_model("gpt2-tiny"));
  std::unique_ptr<Tokenizer> tokenizer = Tokenizer::load(testing::fixture_model("gpt2-tiny"));
  Executor executor{model.graph(), model.weights(), model.config().max_positions};
  Dashboard dashboard{facts()};
  StepMeter meter;
  LoggingRunner runner{executor,
                       [this](double wall_s) { return std::vector{meter.take(wall_s, 0)}; },
                       dashboard.log()};
  Engine engine{runner, *tokenizer, options()};

  Served() { executor.set_observer(meter.observer()); }
  ClusterFacts facts() const {
    ClusterFacts f;
    f.model_id = "tiny";
    f.architecture = "gpt2";
    f.layers = model.config().layers;
    f.context = model.config().max_positions;
    f.devices.push_back({"primary", "this process", model.weight_bytes(), 0});
    return f;
  }
  EngineOptions options() {
    EngineOptions o;
    o.context = model.config().max_positions;
    o.vocab_size = static_cast<std::int32_t>(model.config().vocab_size);
    o.observer = &dashboard.log();  // no stop ids: every request runs to max_tokens
    return o;
  }
};

TEST(Dashboard, AnEngineRequestIsLoggedStepByStep) {
  Served s;
  const CompletionRequest request =
      parse_completion_request(json::parse(R"({"prompt": [1, 2, 3], "max_tokens": 5,
                                               "temperature": 0})"));
  const CompletionResult result = s.engine.complete(request, [](std::string_view) { return true; });
  const auto requests = s.dashboard.log().requests();
  ASSERT_EQ(requests.size(), 1u);
  const RequestRecord& r = requests[0];
  EXPECT_FALSE(r.running);
  EXPECT_EQ(r.finish_reason, "length");
  EXPECT_EQ(r.prompt_tokens, 3);
  EXPECT_EQ(r.completion_tokens, result.completion_tokens);
  // The prompt in one step, then one token per step: the last token generated is not fed.
  ASSERT_EQ(r.steps.size(), 5u);
  EXPECT_EQ(r.steps[0].tokens, 3);
  EXPECT_EQ(r.steps[0].position, 0);
  for (std::size_t i = 1; i < r.steps.size(); ++i) {
    EXPECT_EQ(r.steps[i].tokens, 1);
    EXPECT_EQ(r.steps[i].position, static_cast<std::int64_t>(2 + i));
    EXPECT_GE(r.steps[i].start_ms, r.steps[i - 1].start_ms);
  }
  ASSERT_EQ(r.steps[0].devices.size(), 1u);
  EXPECT_GT(r.steps[0].devices[0].compute_ms, 0);
  EXPECT_LE(r.steps[0].devices[0].compute_ms, r.steps[0].devices[0].wall_ms * 1.01 + 0.01);

  const json j = request_json(r);
  EXPECT_EQ(j["steps"].size(), 5u);
  EXPECT_EQ(j["completion_tokens"], 5);
  EXPECT_TRUE(j["tokens_per_s"].is_number());
  EXPECT_TRUE(j["decode_tokens_per_s"].is_number());
  const json cluster = s.dashboard.cluster_json();
  ASSERT_EQ(cluster["devices"].size(), 1u);
  EXPECT_TRUE(cluster["devices"][0]["speed"]["prefill_tokens_per_s"].is_number()) << cluster;
  EXPECT_EQ(cluster["plan"]["strategy"], "local");
  EXPECT_TRUE(cluster["links"].empty());
}

// GET `path` with an optional key; retries while listen() has not started.
httplib::Result get(int port, const std::string& path, const std::string& key = "") {
  httplib::Client client("127.0.0.1", port);
  httplib::Headers headers;
  if (!key.empty()) headers.emplace("Authorization", "Bearer " + key);
  auto res = client.Get(path, headers);
  for (int i = 0; i < 100 && !res; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    res = client.Get(path, headers);
  }
  return res;
}

TEST(Dashboard, ThePageLoadsWithoutAKeyAndTheDataNeedsOne) {
  Served s;
  ServerOptions options;
  options.port = 0;
  options.model_id = "tiny";
  options.api_key = "sesame";
  Server server(options);
  const int port = server.bind();
  std::thread http([&] { server.listen(); });

  const auto page = get(port, "/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_TRUE(contains(page->get_header_value("Content-Type"), "text/html"));
  EXPECT_TRUE(contains(page->body, "<script src=\"/dashboard.js\">")) << page->body;
  const auto script = get(port, "/dashboard.js");
  ASSERT_TRUE(script);
  EXPECT_EQ(script->status, 200);
  EXPECT_TRUE(contains(script->get_header_value("Content-Type"), "javascript"));
  EXPECT_TRUE(contains(script->body, "/v1/huddle/cluster"));
  EXPECT_EQ(get(port, "/dashboard.css")->status, 200);

  const auto no_key = get(port, "/v1/huddle/cluster");
  ASSERT_TRUE(no_key);
  EXPECT_EQ(no_key->status, 401);
  const auto loading = get(port, "/v1/huddle/cluster", "sesame");
  ASSERT_TRUE(loading);
  EXPECT_EQ(loading->status, 503);
  EXPECT_EQ(json::parse(loading->body)["error"]["code"], "loading");

  server.set_dashboard(&s.dashboard);
  server.set_engine(&s.engine);
  const auto cluster = get(port, "/v1/huddle/cluster", "sesame");
  ASSERT_TRUE(cluster);
  ASSERT_EQ(cluster->status, 200) << cluster->body;
  const json c = json::parse(cluster->body);
  EXPECT_EQ(c["model"]["id"], "tiny");
  EXPECT_EQ(c["devices"][0]["name"], "primary");
  EXPECT_TRUE(c["devices"][0]["speed"].is_null());  // nothing measured yet

  httplib::Client client("127.0.0.1", port);
  const httplib::Headers key = {{"Authorization", "Bearer sesame"}};
  const auto done =
      client.Post("/v1/completions", key,
                  R"({"prompt": [1, 2], "max_tokens": 3, "temperature": 0})", "application/json");
  ASSERT_TRUE(done);
  ASSERT_EQ(done->status, 200) << done->body;
  const auto all = get(port, "/v1/huddle/requests", "sesame");
  ASSERT_TRUE(all);
  ASSERT_EQ(all->status, 200);
  const json requests = json::parse(all->body)["requests"];
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0]["steps"].size(), 3u);
  EXPECT_EQ(requests[0]["prompt_tokens"], 2);
  const auto newer = get(port, "/v1/huddle/requests?after=1", "sesame");
  ASSERT_TRUE(newer);
  EXPECT_TRUE(json::parse(newer->body)["requests"].empty());
  const auto bad = get(port, "/v1/huddle/requests?after=x", "sesame");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(json::parse(bad->body)["error"]["param"], "after");

  server.stop();
  http.join();
}

}  // namespace
}  // namespace huddle::serve
