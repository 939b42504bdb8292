#include "serve/server.h"

#include "serve/completion_request.h"
#include "serve/dashboard_routes.h"
#include "serve/http_helpers.h"
#include "serve/openai_json.h"
#include "serve/request_error.h"

#include <fmt/format.h>
#include <httplib.h>

#include <chrono>
#include <cstdio>

#include <sys/socket.h>

namespace huddle::serve {
namespace {

using nlohmann::json;

// Streams one completion as Server-Sent Events.
void stream_completion(httplib::Response& res, Engine& engine, CompletionRequest request,
                       const ResponseHeader& header, ClientConnection connection) {
  stream_events(
      res, engine, std::move(request),
      {.first = std::nullopt,
       .piece =
           [header](const std::string& text) {
             return StreamEvents::Chunks{completion_chunk_json(header, text, "")};
           },
       .finish =
           [header](const std::string& reason) {
             return StreamEvents::Chunks{completion_chunk_json(header, "", reason)};
           },
       .usage = [header](const CompletionResult& r) { return usage_chunk_json(header, r); }},
      connection);
}

}  // namespace

std::optional<CompletionResult> complete_for(Engine& engine, const CompletionRequest& request,
                                             const ClientConnection& connection) {
  CompletionResult result = engine.complete(
      request, [](std::string_view) { return true; }, [&connection] { return connection.gone(); });
  if (result.cancelled) return std::nullopt;
  return result;
}

void stream_events(httplib::Response& res, Engine& engine, CompletionRequest request,
                   StreamEvents events, ClientConnection connection) {
  res.set_header("Cache-Control", "no-cache");
  // The provider runs on the connection's thread before cpp-httplib closes the socket, so the
  // connection is still the request's.
  res.set_chunked_content_provider(
      "text/event-stream", [&engine, request = std::move(request), events = std::move(events),
                            connection](std::size_t, httplib::DataSink& sink) {
        auto write = [&sink](const std::string& s) { return sink.write(s.data(), s.size()); };
        try {
          if (events.first && !write(sse(*events.first))) return false;
          const auto write_all = [&](const StreamEvents::Chunks& chunks) {
            for (const nlohmann::json& chunk : chunks)
              if (!write(sse(chunk))) return false;
            return true;
          };
          const CompletionResult result = engine.complete(
              request,
              [&](std::string_view text) { return write_all(events.piece(std::string(text))); },
              [&connection] { return connection.gone(); });
          if (result.cancelled) return false;
          write_all(events.finish(result.finish_reason));
          if (request.include_usage) write(sse(events.usage(result)));
        } catch (const RequestError& e) {
          write(sse(error_json(e.what(), e.type(), e.param(), e.code())));
        } catch (const std::exception& e) {
          write(sse(error_json(e.what(), "server_error")));
        }
        write("data: [DONE]\n\n");
        sink.done();
        return true;
      });
}

Server::Server(ServerOptions options)
    : options_(std::move(options)),
      http_(std::make_unique<httplib::Server>()),
      created_(unix_now()) {
  const auto threads = static_cast<std::size_t>(options_.threads);
  // cpp-httplib owns the queue it is handed.
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_->set_payload_max_length(options_.max_body_bytes);
  // Remember the listening socket (bind() widens its backlog); keep cpp-httplib's SO_REUSEADDR.
  http_->set_socket_options([this](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    listen_socket_ = static_cast<int>(sock);
  });
  add_routes();
}

Server::~Server() = default;

int Server::bind() {
  const int port = options_.port == 0
                       ? http_->bind_to_any_port(options_.host)
                       : (http_->bind_to_port(options_.host, options_.port) ? options_.port : -1);
  if (port < 0)
    throw UsageError(fmt::format("cannot listen on {}:{}", options_.host, options_.port));
  // cpp-httplib listens with a backlog of 5: a burst of clients beyond the busy threads would be
  // reset. Linux lets listen() be called again to widen it.
  ::listen(listen_socket_, SOMAXCONN);
  return port;
}

void Server::listen() {
  http_->listen_after_bind();
}

void Server::stop() {
  http_->stop();
}

void Server::add_routes() {
  http_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (options_.api_key.empty() || is_public_path(req.path))
      return httplib::Server::HandlerResponse::Unhandled;
    if (req.get_header_value("Authorization") == "Bearer " + options_.api_key)
      return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, RequestError(401, "a valid API key is required (Authorization: Bearer KEY)",
                                 "invalid_request_error", "", "invalid_api_key"));
    return httplib::Server::HandlerResponse::Handled;
  });
  // Statuses set by cpp-httplib itself (404 no route, 413 too large, 400 unreadable) get an
  // OpenAI-style body; handlers that answer an error set their own.
  http_->set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    const std::string message = res.status == 404
                                    ? fmt::format("no route {} {}", req.method, req.path)
                                : res.status == 413 ? std::string("the request body is too large")
                                                    : fmt::format("HTTP {}", res.status);
    send_json(res, res.status,
              error_json(message, res.status == 404 ? "not_found_error" : "invalid_request_error"));
  });
  http_->set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        try {
          std::rethrow_exception(ep);
        } catch (const RequestError& e) {
          send_error(res, e);
        } catch (const std::exception& e) {
          send_json(res, 500, error_json(e.what(), "server_error"));
        }
      });

  http_->Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const Engine* engine = engine_.load();
    if (engine == nullptr) {
      send_json(res, 503, {{"status", "loading"}});
    } else if (const std::string why = engine->failure(); !why.empty()) {
      send_json(res, 503, {{"status", "error"}, {"message", why}});
    } else {
      send_json(res, 200, {{"status", "ok"}});
    }
  });
  add_dashboard_routes(*http_, dashboard_);
  http_->Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, models_json(options_.model_id, created_));
  });
  http_->Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    Engine* engine = engine_.load();
    if (engine == nullptr) {
      throw RequestError(503, "the model is still loading", "unavailable_error", "", "loading");
    }
    CompletionRequest request = parse_completion_request(parse_json_body(req.body));
    engine->prompt_ids(request);  // 400 before any stream starts
    ResponseHeader header{new_completion_id(), unix_now(), options_.model_id};
    const ClientConnection connection(req);
    if (request.stream) {
      stream_completion(res, *engine, std::move(request), std::move(header), connection);
      return;
    }
    const std::optional<CompletionResult> result = complete_for(*engine, request, connection);
    if (!result) return;  // the client left: nothing to send it
    send_json(res, 200, completion_json(header, *result));
  });
  add_chat_route();  // server_chat.cpp
}

}  // namespace huddle::serve
