// Server: a worker's session port. It serves one session at a time, refuses a second one with
// "busy", hands mesh links of the active session to it, and survives bad clients: any failure of
// a connection (wrong key, garbage, timeout, a handler that throws) is logged and the server goes
// on.
//
// Order the runtime must follow: the primary opens the session (open_session) before any rank
// opens mesh links to this worker; links for any other session are refused.
//
// Connections are taken by an Acceptor (net/acceptor.h): each is authenticated on a thread of its
// own, and its handshake and OPEN together must finish within one deadline
// (ChannelOptions::handshake_timeout from the accept), so a client that stalls (slowloris) delays
// nobody else. At most ServerOptions::max_handshakes connections are served at once; more wait in
// the listen backlog until one of those ends.
//
// A session's start is all or nothing: when its acknowledgement or its thread fails, the worker
// takes sessions again at once. stop() wakes what the server waits on (connections in flight, the
// session's control channel, links not yet taken) and joins every thread; a handler blocked on a
// mesh link it has taken returns when that link fails or times out.
#pragma once

#include "net/acceptor.h"
#include "net/session.h"

#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

namespace huddle::net {

struct ServerOptions {
  ChannelOptions channel;
  // Receives one line per event (refusals, handler errors). Default: stderr.
  std::function<void(const std::string&)> log;
  std::size_t max_pending_links = 64;
  std::size_t max_handshakes = 16;  // connections being served (handshake and OPEN) at once
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
  // Stops accepting, wakes and joins every thread (see above). Idempotent; one caller at a time.
  void stop();

  std::uint16_t port() const { return acceptor_.port(); }
  std::string address() const { return acceptor_.address(); }

  struct Stats {
    std::uint64_t sessions_started = 0;
    std::uint64_t sessions_failed = 0;      // handler threw
    std::uint64_t connections_refused = 0;  // handshake/OPEN failures, busy, failed starts
  };
  Stats stats() const;

  // LinkAcceptor: links of the active session, acknowledged.
  std::unique_ptr<SecureChannel> take_link(std::uint64_t session_id, int from_rank, int world,
                                           Duration timeout) override;

 private:
  // The Acceptor's handler: reads the OPEN and starts a session, queues a link, or refuses.
  void handle(std::unique_ptr<SecureChannel> channel, Clock::time_point deadline);
  // With mutex_ held by `lock`; returns with it released. Throws, with the worker free again,
  // when the session cannot start.
  void start_session(std::unique_ptr<SecureChannel> channel, const OpenRequest& open,
                     std::unique_lock<std::mutex>& lock);
  // With mutex_ held by `lock`; returns with it released.
  void add_link(std::unique_ptr<SecureChannel> channel, const OpenRequest& open,
                std::unique_lock<std::mutex>& lock);
  void run_session(std::unique_ptr<SecureChannel> channel, OpenRequest open);
  void end_session_locked();
  void refused(const std::string& peer, const std::string& why);  // counted and logged
  void log(const std::string& line);

  ServerOptions options_;
  SessionHandler handler_;

  mutable std::mutex mutex_;
  std::condition_variable links_cv_;
  std::thread session_thread_;
  bool session_active_ = false;
  std::uint64_t session_id_ = 0;
  SecureChannel* session_channel_ = nullptr;  // owned by the session thread (or its starter)
  std::map<int, std::unique_ptr<SecureChannel>> pending_links_;  // by rank, of the active session
  std::set<std::pair<std::uint64_t, int>> links_acking_;  // (session, rank) being acknowledged
  int session_world_ = 0;
  Stats stats_;
  // Last: its threads use everything above (stop() joins them before any of it goes).
  Acceptor acceptor_;
};

}  // namespace huddle::net
