// Server: the accept loop of a worker. It serves one session at a time, refuses a second one
// with "busy", hands mesh links of the active session to it, and survives bad clients: any
// failure of a connection (wrong key, garbage, timeout, a handler that throws) is logged and the
// loop goes on.
//
// Order the runtime must follow: the primary opens the session (open_session) before any rank
// opens mesh links to this worker; links for any other session are refused.
//
// A connection is authenticated in the accept thread, so a client that stalls its handshake
// delays the next accept by at most ChannelOptions::handshake_timeout.
#pragma once

#include "net/session.h"

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

namespace huddle::net {

struct ServerOptions {
  ChannelOptions channel;
  // Receives one line per event (refusals, handler errors). Default: stderr.
  std::function<void(const std::string&)> log;
  std::size_t max_pending_links = 64;
};

class Server final : public LinkAcceptor {
 public:
  // Runs in the session's own thread. `control` is the channel to the session's opener; `links`
  // gives the mesh links other ranks open to this worker for this session. An exception ends
  // the session (logged); returning ends it normally. Either way the channel is closed after.
  using SessionHandler =
      std::function<void(SecureChannel& control, const OpenRequest& open, LinkAcceptor& links)>;

  Server(Listener listener, const PresharedKey& key, ServerOptions options, SessionHandler handler);
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  ~Server() override;  // stop()

  // Starts the accept loop in a background thread.
  void start();
  // Stops accepting, shuts the active session's channel down, joins every thread. Idempotent.
  void stop();

  std::uint16_t port() const { return listener_.port(); }
  std::string address() const { return listener_.address(); }

  struct Stats {
    std::uint64_t sessions_started = 0;
    std::uint64_t sessions_failed = 0;      // handler threw
    std::uint64_t connections_refused = 0;  // handshake/OPEN failures and busy refusals
  };
  Stats stats() const;

  // LinkAcceptor: links of the active session, acknowledged.
  std::unique_ptr<SecureChannel> take_link(std::uint64_t session_id, int from_rank, int world,
                                           Duration timeout) override;

 private:
  void accept_loop();
  void handle(Socket socket);
  void run_session(std::unique_ptr<SecureChannel> channel, OpenRequest open);
  void log(const std::string& line);
  void reap_finished_session();

  Listener listener_;
  PresharedKey key_;
  ServerOptions options_;
  SessionHandler handler_;
  std::thread accept_thread_;
  std::atomic<bool> stopping_{false};

  mutable std::mutex mutex_;
  std::condition_variable links_cv_;
  std::thread session_thread_;
  bool session_active_ = false;
  std::uint64_t session_id_ = 0;
  SecureChannel* session_channel_ = nullptr;
  std::map<int, std::unique_ptr<SecureChannel>> pending_links_;  // by rank, of the active session
  int session_world_ = 0;
  Stats stats_;
};

}  // namespace huddle::net
