// The HTTP server: OpenAI-compatible routes over an Engine (cpp-httplib).
//   GET  /health          503 {"status":"loading"} until set_engine(), then 200 {"status":"ok"}
//   GET  /v1/models       the served model
//   POST /v1/completions  text or token-id prompts; stream: true answers with Server-Sent Events
//   POST /v1/chat/completions  messages through the model's chat template (server_chat.cpp)
//   GET  /  and /v1/huddle/*   the dashboard (serve/dashboard_routes.h)
// Errors are OpenAI's {"error": {...}}: 400 bad request, 401 wrong or missing key (when an API
// key is set; /health needs none), 404 unknown route, 413 body too large, 503 while loading.
#pragma once

#include "serve/engine.h"

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>

namespace httplib {
class Server;
}

namespace huddle::serve {

class ChatTemplate;
class Dashboard;

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;       // 0: any free port
  std::string api_key;   // "" : no authentication
  std::string model_id;  // the name /v1/models reports and responses carry
  // Whether the model ships a chat template (tokenizer_config.json's chat_template).
  bool has_chat_template = false;
  // The parsed template (outlives the server); null when there is none or it does not parse,
  // and then chat requests get a 400 (code no_chat_template, or chat_template_unsupported
  // with chat_template_error as the reason).
  const ChatTemplate* chat_template = nullptr;
  std::string chat_template_error;
  std::size_t max_body_bytes = 1 << 20;
  int threads = 16;  // connections served at once (requests still take turns on the model)
};

class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the listening socket; returns the port. UsageError when the address cannot be bound.
  int bind();
  // Serves until stop() (call after bind(); blocks).
  void listen();
  void stop();
  // The model is ready: completions are answered from now on. `engine` outlives the server.
  void set_engine(Engine* engine) { engine_.store(engine); }
  // What the dashboard shows, once loaded (nullptr: loading). `dashboard` outlives the server.
  void set_dashboard(const Dashboard* dashboard) { dashboard_.store(dashboard); }

 private:
  void add_routes();
  void add_chat_route();

  ServerOptions options_;
  std::unique_ptr<httplib::Server> http_;
  std::atomic<Engine*> engine_{nullptr};
  std::atomic<const Dashboard*> dashboard_{nullptr};
  std::int64_t created_;    // when the server started, Unix seconds
  int listen_socket_ = -1;  // owned by http_
};

}  // namespace huddle::serve
