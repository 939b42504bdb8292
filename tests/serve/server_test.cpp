// The server in process (no `huddle` binary): Server over an Engine on gpt2-tiny, spoken to over
// HTTP on 127.0.0.1. The loading state, the ready state and a stop that waits for running requests.
#include "serve/server.h"

#include "model/model.h"
#include "runtime/executor.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <thread>

namespace huddle::serve {
namespace {

using nlohmann::json;

TEST(Server, LoadingThenReadyThenStopped) {
  const Model model = Model::load(testing::fixture_model("gpt2-tiny"));
  const auto tokenizer = Tokenizer::load(testing::fixture_model("gpt2-tiny"));
  Executor executor(model.graph(), model.weights(), model.config().max_positions);
  EngineOptions options;
  options.context = model.config().max_positions;
  options.stop_ids = model.config().eos_ids;
  options.vocab_size = static_cast<std::int32_t>(model.config().vocab_size);
  Engine engine(executor, *tokenizer, options);

  ServerOptions server_options;
  server_options.port = 0;
  server_options.model_id = "tiny";
  Server server(server_options);
  const int port = server.bind();
  ASSERT_GT(port, 0);
  std::thread http([&] { server.listen(); });
  httplib::Client client("127.0.0.1", port);
  const std::string body = R"({"prompt": [1, 2, 3], "max_tokens": 4, "temperature": 0})";

  auto health = client.Get("/health");
  for (int i = 0; i < 100 && !health; ++i) {  // listen() may not have started yet
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    health = client.Get("/health");
  }
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 503);
  const auto loading = client.Post("/v1/completions", body, "application/json");
  ASSERT_TRUE(loading);
  EXPECT_EQ(loading->status, 503);
  EXPECT_EQ(json::parse(loading->body)["error"]["code"], "loading");

  server.set_engine(&engine);
  health = client.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  const auto ready = client.Post("/v1/completions", body, "application/json");
  ASSERT_TRUE(ready);
  ASSERT_EQ(ready->status, 200) << ready->body;
  const json answer = json::parse(ready->body);
  EXPECT_EQ(answer["model"], "tiny");
  EXPECT_EQ(answer["usage"]["prompt_tokens"], 3);
  EXPECT_EQ(answer["choices"][0]["text"], engine
                                              .complete(parse_completion_request(json::parse(body)),
                                                        [](std::string_view) { return true; })
                                              .text);
  server.stop();
  http.join();
  EXPECT_FALSE(client.Get("/health"));  // nobody listens any more
}

}  // namespace
}  // namespace huddle::serve
