// `huddle serve` over real HTTP on 127.0.0.1: every endpoint and error, greedy text equal to
// `huddle run`'s, streaming, stop strings, authentication, concurrent clients, two devices.
#include "test_util.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <chrono>
#include <csignal>
#include <fstream>
#include <set>
#include <thread>

namespace huddle {
namespace {

using nlohmann::json;
using testing::BackgroundHuddle;
using testing::fixture_model;
using testing::run_huddle;

// A server on a free port, ready (health 200) when constructed.
class ServerProcess {
 public:
  explicit ServerProcess(std::vector<std::string> extra = {},
                         const std::string& model = "gpt2-tiny", bool wait_ready = true) {
    std::vector<std::string> args = {"serve",     "--model", fixture_model(model), "--port", "0",
                                     "--threads", "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    process_ = std::make_unique<BackgroundHuddle>(args);
    const std::string address = process_->worker_address(30);
    EXPECT_FALSE(address.empty()) << "no 'listening on' line";
    const auto colon = address.rfind(':');
    port_ = std::stoi(address.substr(colon + 1));
    if (!wait_ready) return;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      const auto res = client().Get("/health");
      if (res && res->status == 200) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "the server never became healthy";
  }
  // SIGTERM, so the server stops its local workers; SIGKILL (BackgroundHuddle) if it hangs.
  ~ServerProcess() {
    process_->kill(SIGTERM);
    EXPECT_FALSE(process_->wait_for_line("stopping on signal 15", 20, /*from_stderr=*/true).empty())
        << "SIGTERM did not reach the server's handler";
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (process_->alive() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_FALSE(process_->alive()) << "the server ignored SIGTERM";
  }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(std::chrono::seconds(60));
    return c;
  }
  int port() const { return port_; }
  int pid() const { return process_->pid(); }
  BackgroundHuddle& process() { return *process_; }
  // POST /v1/completions with `body`; the status and the parsed body.
  std::pair<int, json> complete(const json& body, const httplib::Headers& headers = {}) const {
    const auto res = client().Post("/v1/completions", headers, body.dump(), "application/json");
    if (!res) return {-1, json()};
    return {res->status, json::parse(res->body, nullptr, false)};
  }

 private:
  std::unique_ptr<BackgroundHuddle> process_;
  int port_ = 0;
};

// `huddle run --prompt P --n-predict N --json`'s generated text and ids.
json run_reference(const std::string& model, const std::string& prompt, int n,
                   std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"run",
                                   "--model",
                                   fixture_model(model),
                                   "--prompt",
                                   prompt,
                                   "--n-predict",
                                   std::to_string(n),
                                   "--json",
                                   "--threads",
                                   "1"};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto r = run_huddle(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return json::parse(r.out);
}

json greedy(const json& prompt, int max_tokens) {
  return {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}};
}

// The data: payloads of a Server-Sent Events body, in order.
std::vector<std::string> sse_payloads(const std::string& body) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while ((at = body.find("data: ", at)) != std::string::npos) {
    const std::size_t end = body.find("\n\n", at);
    out.push_back(body.substr(at + 6, end - at - 6));
    at = end;
  }
  return out;
}

void expect_error(const std::pair<int, json>& got, int status, const std::string& what) {
  EXPECT_EQ(got.first, status) << got.second;
  ASSERT_TRUE(got.second.contains("error")) << got.second;
  EXPECT_TRUE(got.second["error"]["message"].is_string());
  EXPECT_TRUE(got.second["error"]["type"].is_string());
  EXPECT_TRUE(got.second["error"].contains("code"));
  EXPECT_TRUE(testing::contains(got.second.dump(), what)) << got.second;
}

TEST(ServeHttp, HealthModelsAndUnknownRoutes) {
  ServerProcess server;
  auto c = server.client();
  const auto health = c.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(json::parse(health->body), json({{"status", "ok"}}));
  const auto models = c.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 200);
  const json m = json::parse(models->body);
  EXPECT_EQ(m["object"], "list");
  ASSERT_EQ(m["data"].size(), 1u);
  EXPECT_EQ(m["data"][0]["id"], "gpt2-tiny");
  EXPECT_EQ(m["data"][0]["object"], "model");
  const auto missing = c.Get("/v1/nothing");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(json::parse(missing->body)["error"]["type"], "not_found_error");
  const auto chat =
      c.Post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}]})",
             "application/json");
  ASSERT_TRUE(chat);
  EXPECT_EQ(chat->status, 400);
  EXPECT_EQ(json::parse(chat->body)["error"]["code"], "no_chat_template") << chat->body;
  const auto no_messages = c.Post("/v1/chat/completions", R"({"messages": 3})", "application/json");
  ASSERT_TRUE(no_messages);
  EXPECT_EQ(no_messages->status, 400);
  EXPECT_EQ(json::parse(no_messages->body)["error"]["param"], "messages");
  // Headers are limited too (cpp-httplib: 8 KiB a line).
  const auto huge_header = c.Get("/health", {{"X-Padding", std::string(20000, 'x')}});
  ASSERT_TRUE(huge_header);
  EXPECT_EQ(huge_header->status, 400);
}

TEST(ServeHttp, GreedyTextEqualsRunAndTokenIdPrompts) {
  for (const std::string model : {"gpt2-tiny", "llama-tiny"}) {
    ServerProcess server({}, model);
    const json reference = run_reference(model, "The quick brown fox", 8);
    const auto [status, body] = server.complete(greedy("The quick brown fox", 8));
    ASSERT_EQ(status, 200) << body;
    EXPECT_EQ(body["object"], "text_completion");
    EXPECT_TRUE(body["id"].get<std::string>().starts_with("cmpl-"));
    EXPECT_TRUE(body["created"].is_number_integer());
    EXPECT_EQ(body["model"], model);
    ASSERT_EQ(body["choices"].size(), 1u);
    EXPECT_EQ(body["choices"][0]["index"], 0);
    EXPECT_EQ(body["choices"][0]["text"], reference["text"]) << model;
    const std::size_t generated = reference["generated"].size();
    EXPECT_EQ(body["choices"][0]["finish_reason"], generated == 8 ? "length" : "stop");
    EXPECT_EQ(body["usage"]["prompt_tokens"], reference["prompt_ids"].size());
    EXPECT_EQ(body["usage"]["completion_tokens"], generated);
    EXPECT_EQ(body["usage"]["total_tokens"], reference["prompt_ids"].size() + generated);
    // The same prompt as token ids gives the same text.
    const auto by_ids = server.complete(greedy(reference["prompt_ids"], 8));
    ASSERT_EQ(by_ids.first, 200) << by_ids.second;
    EXPECT_EQ(by_ids.second["choices"][0]["text"], reference["text"]);
  }
}

TEST(ServeHttp, StreamingReassemblesToTheAnswerWithUsageAndDone) {
  ServerProcess server;
  const json request = greedy("Once upon a time", 12);
  const auto plain = server.complete(request);
  ASSERT_EQ(plain.first, 200);
  json streamed = request;
  streamed["stream"] = true;
  streamed["stream_options"] = {{"include_usage", true}};
  const auto res = server.client().Post("/v1/completions", streamed.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_TRUE(testing::contains(res->get_header_value("Content-Type"), "text/event-stream"));
  const std::vector<std::string> payloads = sse_payloads(res->body);
  ASSERT_GE(payloads.size(), 4u) << res->body;
  EXPECT_EQ(payloads.back(), "[DONE]");
  std::string text;
  std::string finish;
  std::set<std::string> ids;
  for (std::size_t i = 0; i + 2 < payloads.size(); ++i) {
    const json chunk = json::parse(payloads[i]);
    ids.insert(chunk["id"].get<std::string>());
    EXPECT_EQ(chunk["object"], "text_completion");
    text += chunk["choices"][0]["text"].get<std::string>();
    if (!chunk["choices"][0]["finish_reason"].is_null())
      finish = chunk["choices"][0]["finish_reason"].get<std::string>();
  }
  EXPECT_EQ(ids.size(), 1u);
  EXPECT_EQ(text, plain.second["choices"][0]["text"]);
  EXPECT_EQ(finish, plain.second["choices"][0]["finish_reason"]);
  const json usage = json::parse(payloads[payloads.size() - 2]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"], plain.second["usage"]);
}

TEST(ServeHttp, StopStringsAndFinishReasons) {
  ServerProcess server;
  const auto full = server.complete(greedy("Hello world", 16));
  ASSERT_EQ(full.first, 200);
  const std::string text = full.second["choices"][0]["text"];
  ASSERT_GE(text.size(), 6u) << "the fixture's answer is too short to cut";
  const std::string stop = text.substr(text.size() / 2, 3);
  json request = greedy("Hello world", 16);
  request["stop"] = json::array({stop, "\x01never"});
  const auto cut = server.complete(request);
  ASSERT_EQ(cut.first, 200);
  EXPECT_EQ(cut.second["choices"][0]["text"], text.substr(0, text.find(stop)));
  EXPECT_EQ(cut.second["choices"][0]["finish_reason"], "stop");
  // Streamed, the text before the stop arrives and nothing after it.
  request["stream"] = true;
  const auto res = server.client().Post("/v1/completions", request.dump(), "application/json");
  ASSERT_TRUE(res);
  std::string streamed;
  for (const std::string& p : sse_payloads(res->body)) {
    if (p == "[DONE]") break;
    streamed += json::parse(p)["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(streamed, cut.second["choices"][0]["text"]);
  const auto one = server.complete(greedy("Hello world", 1));
  ASSERT_EQ(one.first, 200);
  EXPECT_EQ(one.second["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(one.second["usage"]["completion_tokens"], 1);
}

TEST(ServeHttp, BadRequestsGetOpenAiErrors) {
  ServerProcess server({"--ctx-size", "16", "--max-body-bytes", "4096"});
  auto c = server.client();
  const auto malformed = c.Post("/v1/completions", "{\"prompt\": ", "application/json");
  ASSERT_TRUE(malformed);
  EXPECT_EQ(malformed->status, 400);
  EXPECT_EQ(json::parse(malformed->body)["error"]["type"], "invalid_request_error");
  expect_error(server.complete({{"prompt", "hi"}, {"max_tokens", "5"}}), 400, "max_tokens");
  expect_error(server.complete({{"prompt", 5}}), 400, "prompt");
  expect_error(server.complete({{"prompt", "hi"}, {"temperature", -1}}), 400, "temperature");
  expect_error(server.complete(greedy(json::array({1, 100000}), 1)), 400, "vocabulary");
  expect_error(server.complete(greedy(std::vector<int>(17, 5), 1)), 400, "context_length_exceeded");
  expect_error(server.complete(greedy(std::string(200, 'a') + " b c d e f g h i j k l m n o p", 1)),
               400, "context");
  // Exactly the context: one token fits.
  const auto fits = server.complete(greedy(std::vector<int>(16, 5), 4));
  ASSERT_EQ(fits.first, 200) << fits.second;
  EXPECT_LE(fits.second["usage"]["completion_tokens"].get<int>(), 1);
  const auto big = c.Post("/v1/completions", json({{"prompt", std::string(5000, 'a')}}).dump(),
                          "application/json");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
  // The server is still fine.
  EXPECT_EQ(server.complete(greedy("ok", 2)).first, 200);
}

TEST(ServeHttp, ApiKeyIsRequiredWhenSet) {
  ServerProcess server({"--api-key", "sesame"});
  expect_error(server.complete(greedy("hi", 2)), 401, "invalid_api_key");
  expect_error(server.complete(greedy("hi", 2), {{"Authorization", "Bearer wrong"}}), 401,
               "API key");
  const auto models = server.client().Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 401);
  EXPECT_EQ(server.complete(greedy("hi", 2), {{"Authorization", "Bearer sesame"}}).first, 200);
  const auto health = server.client().Get("/health");  // needs no key
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

TEST(ServeHttp, ConcurrentClientsAllGetTheirOwnAnswers) {
  ServerProcess server;
  constexpr int kClients = 50;
  std::vector<json> expected;
  for (int i = 0; i < kClients; ++i)
    expected.push_back(server.complete(greedy(json::array({i + 3, 7, 11}), 6)).second);
  std::vector<json> got(kClients);
  std::vector<int> status(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      json request = greedy(json::array({i + 3, 7, 11}), 6);
      request["stream"] = i % 2 == 1;
      const auto res = server.client().Post("/v1/completions", request.dump(), "application/json");
      if (!res) {
        status[static_cast<std::size_t>(i)] = -static_cast<int>(res.error());
        return;
      }
      status[static_cast<std::size_t>(i)] = res->status;
      if (i % 2 == 0) {
        got[static_cast<std::size_t>(i)] = json::parse(res->body)["choices"][0]["text"];
        return;
      }
      std::string text;
      for (const std::string& p : sse_payloads(res->body))
        if (p != "[DONE]") text += json::parse(p)["choices"][0]["text"].get<std::string>();
      got[static_cast<std::size_t>(i)] = text;
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kClients; ++i) {
    EXPECT_EQ(status[static_cast<std::size_t>(i)], 200) << i;
    EXPECT_EQ(got[static_cast<std::size_t>(i)],
              expected[static_cast<std::size_t>(i)]["choices"][0]["text"])
        << i;
  }
}

TEST(ServeHttp, TwoLocalDevicesGiveTheOneDeviceTextAndSurviveIdleness) {
  const json reference = run_reference("llama-tiny", "The quick brown fox", 8);
  // Workers drop a primary silent for --timeout-s; the server keeps the session alive.
  ServerProcess server({"--local-devices", "2", "--timeout-s", "1"}, "llama-tiny");
  for (int round = 0; round < 2; ++round) {
    const auto [status, body] = server.complete(greedy("The quick brown fox", 8));
    ASSERT_EQ(status, 200) << body;
    EXPECT_EQ(body["choices"][0]["text"], reference["text"]) << round;
    if (round == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  }
}

TEST(ServeHttp, StrategiesAndSharesGiveTheOneDeviceText) {
  const json reference = run_reference("llama-tiny", "The quick brown fox", 8);
  for (const std::string strategy : {"megatron", "pipeline"}) {
    ServerProcess server({"--local-devices", "2", "--strategy", strategy, "--shares", "3,1"},
                         "llama-tiny");
    const auto [status, body] = server.complete(greedy("The quick brown fox", 8));
    ASSERT_EQ(status, 200) << body;
    EXPECT_EQ(body["choices"][0]["text"], reference["text"]) << strategy;
  }
  const auto bad = run_huddle({"serve", "--model", fixture_model("llama-tiny"), "--port", "0",
                               "--local-devices", "2", "--shares", "3,x"});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_TRUE(testing::contains(bad.err, "--shares")) << bad.err;
}

// The planners run as in `huddle run`: hpipe for a cluster file, auto after profiling the local
// workers; either plan gives the one-device text. A planner with --shares is refused by name.
TEST(ServeHttp, PlannersGiveTheOneDeviceText) {
  const json reference = run_reference("llama-tiny", "The quick brown fox", 8);
  testing::TempDir dir;
  json devices = json::array();
  for (const auto& [name, gflops] : {std::pair{"L", 100.0}, {"M", 60.0}, {"S", 25.0}})
    devices.push_back({{"name", name}, {"gflops", gflops}, {"memory_bytes", 2000000}});
  const std::string cluster = (dir / "cluster.json").string();
  std::ofstream(cluster) << json{{"devices", devices},
                                 {"default_link", {{"bandwidth_bps", 1e9}, {"latency_s", 5e-4}}}}
                                .dump();
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--local-devices", "3", "--cluster", cluster, "--strategy", "hpipe", "--plan-tokens", "16"},
       "planner hpipe chose hpipe"},
      {{"--local-devices", "2", "--strategy", "auto"}, "profiled 2 devices"}};
  for (const auto& [args, line] : cases) {
    ServerProcess server(args, "llama-tiny");
    EXPECT_FALSE(server.process().wait_for_line(line, 30, /*from_stderr=*/true).empty()) << line;
    const auto [status, body] = server.complete(greedy("The quick brown fox", 8));
    ASSERT_EQ(status, 200) << body;
    EXPECT_EQ(body["choices"][0]["text"], reference["text"]) << line;
  }
  const auto bad = run_huddle({"serve", "--model", fixture_model("llama-tiny"), "--port", "0",
                               "--local-devices", "2", "--strategy", "hpipe", "--shares", "3,1"});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_TRUE(testing::contains(bad.err, "--strategy hpipe plans from the devices' speeds"))
      << bad.err;
}

// Between requests the server re-plans on the speeds it timed, as `huddle run --repeat` does: the
// cluster file claims the worker is 10x faster than the primary, and both are this machine (the
// same set-up and threshold as ProfileCli.RunReplansWhenMeasuredSpeedsContradictTheClusterFile).
// Every answer, before and after, is the one-device text.
TEST(ServeHttp, AServerReplansBetweenRequestsOnTheSpeedsItTimed) {
  const std::string prompt = "Once upon a time there was a little girl who lived in a village";
  const json reference = run_reference("gpt2-tiny", prompt, 8);
  testing::TempDir dir;
  const json cluster = {{"devices",
                         {{{"name", "P"}, {"gflops", 0.05}, {"memory_bytes", 4e9}},
                          {{"name", "W"}, {"gflops", 0.5}, {"memory_bytes", 4e9}}}},
                        {"default_link", {{"bandwidth_bps", 1e10}, {"latency_s", 1e-6}}}};
  std::ofstream(dir / "c.json") << cluster.dump();
  ServerProcess server({"--local-devices", "2", "--cluster", (dir / "c.json").string(),
                        "--strategy", "galaxy", "--plan-tokens", "16", "--replan-threshold",
                        "0.02"});
  for (int request = 0; request < 6; ++request) {
    const auto [status, body] = server.complete(greedy(prompt, 8));
    ASSERT_EQ(status, 200) << body;
    EXPECT_EQ(body["choices"][0]["text"], reference["text"]) << "request " << request;
  }
  EXPECT_FALSE(server.process().wait_for_line("; re-planning", 10, /*from_stderr=*/true).empty());
  const auto [status, body] = server.complete(greedy(prompt, 8));
  ASSERT_EQ(status, 200) << body;
  EXPECT_EQ(body["choices"][0]["text"], reference["text"]) << "after the re-plan";
}

// A worker started with --join while `huddle serve --admit` runs alone: the next completion runs
// on both devices and gives the one-device text; a worker with the wrong key is refused and the
// server goes on answering.
TEST(ServeHttp, AWorkerThatJoinsServesTheNextCompletion) {
  const json reference = run_reference("gpt2-tiny", "Once upon a time", 12);
  testing::TempDir dir;
  const std::string key = testing::make_key_file(dir.path()).string();
  ServerProcess server({"--admit", "127.0.0.1:0", "--key-file", key, "--timeout-s", "5"});
  const std::string line = server.process().wait_for_line("admitting workers on ", 30);
  ASSERT_FALSE(line.empty());
  const std::string admission = line.substr(line.rfind(' ') + 1);

  const std::string wrong = testing::make_key_file(dir.path(), "wrong.key").string();
  const auto refused = run_huddle({"worker", "--listen", "127.0.0.1:0", "--join", admission,
                                   "--key-file", wrong, "--timeout-s", "5"});
  EXPECT_EQ(refused.exit_code, 1) << refused.err;
  EXPECT_TRUE(testing::contains(refused.err, "bad key")) << refused.err;

  BackgroundHuddle worker({"worker", "--listen", "127.0.0.1:0", "--join", admission, "--key-file",
                           key, "--threads", "1", "--timeout-s", "5"});
  const std::string address = worker.worker_address();
  ASSERT_FALSE(address.empty());
  ASSERT_FALSE(worker.wait_for_line("joined the primary", 30, /*from_stderr=*/true).empty());
  const auto [status, body] = server.complete(greedy("Once upon a time", 12));
  ASSERT_EQ(status, 200) << body;
  EXPECT_EQ(body["choices"][0]["text"], reference["text"]);
  // The session took it in (at this request, or at an idle keep-alive before it).
  EXPECT_FALSE(server.process()
                   .wait_for_line("galaxy on 2 device(s) from now on, with " + address, 30,
                                  /*from_stderr=*/true)
                   .empty());
  // The worker served a session of the primary's.
  EXPECT_FALSE(worker.wait_for_line("MB of weights", 30, /*from_stderr=*/true).empty());
}

// The processes `pid` started (Linux: /proc/PID/task/PID/children).
std::vector<int> children_of(int pid) {
  std::ifstream in(fmt::format("/proc/{}/task/{}/children", pid, pid));
  std::vector<int> out;
  for (int child; in >> child;) out.push_back(child);
  return out;
}

// A worker killed while a streaming completion waits on it (stopped, then killed): the server
// re-plans on the devices left and the stream completes with the one-device text.
TEST(ServeHttp, AStreamingCompletionSurvivesAKilledWorker) {
  const json reference = run_reference("gpt2-tiny", "Once upon a time", 24);
  ServerProcess server({"--local-devices", "3"}, "gpt2-tiny");
  ASSERT_EQ(server.complete(greedy("Once upon a time", 2)).first, 200);
  const std::vector<int> workers = children_of(server.pid());
  ASSERT_EQ(workers.size(), 2u);
  // Stopped, the worker holds the next step until it is killed: the kill lands mid-request.
  ASSERT_EQ(::kill(workers[1], SIGSTOP), 0);
  std::thread killer([pid = workers[1]] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ::kill(pid, SIGKILL);
  });
  json request = greedy("Once upon a time", 24);
  request["stream"] = true;
  const auto res = server.client().Post("/v1/completions", request.dump(), "application/json");
  killer.join();
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  std::string text;
  std::string finish_reason;
  const std::vector<std::string> payloads = sse_payloads(res->body);
  ASSERT_FALSE(payloads.empty());
  EXPECT_EQ(payloads.back(), "[DONE]");
  for (const std::string& payload : payloads) {
    if (payload == "[DONE]") continue;
    const json chunk = json::parse(payload);
    ASSERT_FALSE(chunk.contains("error")) << payload;
    text += chunk["choices"][0]["text"].get<std::string>();
    if (!chunk["choices"][0]["finish_reason"].is_null())
      finish_reason = chunk["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(text, reference["text"]);
  EXPECT_FALSE(finish_reason.empty());
  const auto health = server.client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  // The dashboard shows the devices left and their plan.
  const auto cluster = server.client().Get("/v1/huddle/cluster");
  ASSERT_TRUE(cluster);
  const json facts = json::parse(cluster->body);
  EXPECT_EQ(facts["devices"].size(), 2u) << facts;
  EXPECT_EQ(facts["plan_json"]["devices"].size(), 2u) << facts;
  // The next request runs on the devices left.
  const auto next = server.complete(greedy("Once upon a time", 24));
  ASSERT_EQ(next.first, 200) << next.second;
  EXPECT_EQ(next.second["choices"][0]["text"], reference["text"]);
}

// With --no-recover a lost worker ends the session: 503 from then on.
TEST(ServeHttp, ALostWorkerTurnsHealthAndCompletionsInto503WithoutRecovery) {
  ServerProcess server({"--local-devices", "2", "--no-recover"}, "llama-tiny");
  ASSERT_EQ(server.complete(greedy("The quick brown fox", 4)).first, 200);
  const std::vector<int> workers = children_of(server.pid());
  ASSERT_EQ(workers.size(), 1u);
  ::kill(workers[0], SIGKILL);
  const auto failed = server.complete(greedy("The quick brown fox", 4));
  EXPECT_GE(failed.first, 500) << failed.second;
  ASSERT_TRUE(failed.second.contains("error")) << failed.second;
  const auto health = server.client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 503);
  EXPECT_EQ(json::parse(health->body)["status"], "error");
  expect_error(server.complete(greedy("The quick brown fox", 4)), 503, "unavailable");
}

TEST(ServeHttp, LoadingAnswers503) {
  // A "worker" that accepts connections (the kernel's backlog) but never speaks: the cluster
  // waits for its handshake, so the server stays loading for --timeout-s (then exits: the
  // cluster could not be assembled).
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  testing::TempDir dir;
  const auto key = testing::make_key_file(dir.path());
  {
    ServerProcess server({"--workers", fmt::format("127.0.0.1:{}", ntohs(addr.sin_port)),
                          "--key-file", key.string(), "--timeout-s", "5"},
                         "gpt2-tiny", /*wait_ready=*/false);
    const auto health = server.client().Get("/health");
    ASSERT_TRUE(health);
    EXPECT_EQ(health->status, 503);
    EXPECT_EQ(json::parse(health->body), json({{"status", "loading"}}));
    expect_error(server.complete(greedy("hi", 2)), 503, "loading");
  }
  ::close(listener);
}

TEST(ServeHttp, AClientThatLeavesMidStreamDoesNotStallOthers) {
  ServerProcess server;
  const auto expected = server.complete(greedy("Hello world", 20));
  ASSERT_EQ(expected.first, 200);
  for (int i = 0; i < 3; ++i) {
    // A raw connection: send a long streaming request, read the first bytes, hang up.
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<std::uint16_t>(server.port()));
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    json request = greedy("Hello world", 120);
    request["stream"] = true;
    const std::string body = request.dump();
    const std::string http = fmt::format(
        "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
        "application/json\r\nContent-Length: {}\r\n\r\n{}",
        body.size(), body);
    ASSERT_EQ(::send(fd, http.data(), http.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(http.size()));
    char first[64];
    EXPECT_GT(::recv(fd, first, sizeof first, 0), 0);
    ::close(fd);
    const auto after = server.complete(greedy("Hello world", 20));
    ASSERT_EQ(after.first, 200) << after.second;
    EXPECT_EQ(after.second["choices"][0]["text"], expected.second["choices"][0]["text"]);
  }
}

// Sends `request` to /v1/completions on a raw connection and returns the socket, unread.
int send_raw_completion(int port, const json& request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const std::string body = request.dump();
  const std::string http = fmt::format(
      "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
      "application/json\r\nContent-Length: {}\r\n\r\n{}",
      body.size(), body);
  EXPECT_EQ(::send(fd, http.data(), http.size(), MSG_NOSIGNAL), static_cast<ssize_t>(http.size()));
  return fd;
}

// The dashboard's log of requests (oldest first).
json logged_requests(const ServerProcess& server) {
  const auto res = server.client().Get("/v1/huddle/requests");
  EXPECT_TRUE(res);
  return res ? json::parse(res->body)["requests"] : json::array();
}

// Non-streamed requests whose clients hang up are cancelled between decode steps: one that held
// the model stops after the step it was in, one that waited behind it runs no step, and the
// next client is answered. A stopped worker holds the first request's prompt step until both
// clients have gone, so the order of events does not depend on the machine's speed; the figures
// checked are token counts from the server's log.
TEST(ServeHttp, AClientThatLeavesCancelsItsNonStreamedRequest) {
  ServerProcess server({"--local-devices", "2"}, "llama-tiny");
  const auto expected = server.complete(greedy("The quick brown fox", 8));  // request 1
  ASSERT_EQ(expected.first, 200) << expected.second;
  const std::vector<int> workers = children_of(server.pid());
  ASSERT_EQ(workers.size(), 1u);
  ASSERT_EQ(::kill(workers[0], SIGSTOP), 0);
  const int max_tokens = 100;  // the context (128) leaves room for all of them
  const int holder = send_raw_completion(server.port(), greedy("The quick brown fox", max_tokens));
  // Request 2 has the model (its prompt step waits on the worker).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  bool running = false;
  while (!running && std::chrono::steady_clock::now() < deadline) {
    for (const json& r : logged_requests(server))
      running = running || (r["id"] == 2 && r["running"].get<bool>());
    if (!running) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(running) << logged_requests(server);
  const int waiter = send_raw_completion(server.port(), greedy("The quick brown fox", max_tokens));
  ::close(holder);
  ::close(waiter);
  ASSERT_EQ(::kill(workers[0], SIGCONT), 0);

  const auto after = server.complete(greedy("The quick brown fox", 8));
  ASSERT_EQ(after.first, 200) << after.second;
  EXPECT_EQ(after.second["choices"][0]["text"], expected.second["choices"][0]["text"]);
  // The waiter may take its turn after the last request: wait until all four have ended.
  json log = logged_requests(server);
  const auto ended_by = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  const auto all_ended = [](const json& list) {
    for (const json& r : list)
      if (r["running"].get<bool>()) return false;
    return list.size() == 4;
  };
  while (!all_ended(log) && std::chrono::steady_clock::now() < ended_by) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    log = logged_requests(server);
  }
  ASSERT_EQ(log.size(), 4u) << log;
  const json& held = log[1];
  EXPECT_EQ(held["finish_reason"], "cancelled") << held;
  // Stopped at the first check after its prompt step (a token or two), not at max_tokens.
  EXPECT_LE(held["completion_tokens"].get<int>(), 2) << held;
  EXPECT_LE(held["steps"].size(), 2u) << held;
  // The waiter and the last request took their turns in some order: the waiter ran no step.
  int waited = 0, answered = 0;
  for (std::size_t i = 2; i < 4; ++i) {
    const json& r = log[i];
    if (r["finish_reason"] == "cancelled") {
      ++waited;
      EXPECT_EQ(r["completion_tokens"], 0) << r;
      EXPECT_TRUE(r["steps"].empty()) << r;
    } else {
      ++answered;
      EXPECT_EQ(r["finish_reason"], "length") << r;
      EXPECT_EQ(r["completion_tokens"], 8) << r;
    }
  }
  EXPECT_EQ(waited, 1) << log;
  EXPECT_EQ(answered, 1) << log;
}

}  // namespace
}  // namespace huddle
