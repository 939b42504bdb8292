// JoinListener: a primary's admission port (`huddle serve --admit HOST:PORT`). Workers started
// with `huddle worker --join` dial it (net/join.h); each that authenticates with the cluster's
// key and announces a well-formed address is acknowledged and queued for take(), which the
// primary's Session calls between requests (session/session.h). Anything else — a wrong key,
// garbage, another kind of OPEN, silence — is refused, logged, and the listener goes on.
//
// Connections are served one at a time in the listener's thread, each within one deadline
// (ChannelOptions::handshake_timeout from the accept, handshake and JOIN together): a silent
// client delays other joins by at most that, and never the requests, which do not go through
// here. Messages are capped at a JOIN's size before anything is allocated.
#pragma once

#include "net/key.h"
#include "net/secure_channel.h"
#include "net/socket.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace huddle::net {

class JoinListener {
 public:
  // `log` receives one line per join admitted or refused (default: stderr).
  JoinListener(Listener listener, const PresharedKey& key, ChannelOptions options,
               std::function<void(const std::string&)> log = {});
  JoinListener(const JoinListener&) = delete;
  JoinListener& operator=(const JoinListener&) = delete;
  ~JoinListener();  // stop()

  // Starts the accept loop in a background thread.
  void start();
  // Stops accepting, wakes the connection being served and joins the thread. Idempotent.
  void stop();

  std::string address() const { return listener_.address(); }
  std::uint16_t port() const { return listener_.port(); }

  // The workers admitted since the last call ("host:port", in arrival order; one that joined
  // twice is listed once). Any thread.
  std::vector<std::string> take();

  struct Stats {
    std::uint64_t admitted = 0;
    std::uint64_t refused = 0;
  };
  Stats stats() const;

 private:
  void accept_loop();
  void serve(Socket socket);
  void log(const std::string& line) const;

  Listener listener_;
  PresharedKey key_;
  ChannelOptions options_;
  std::function<void(const std::string&)> log_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  mutable std::mutex mutex_;
  std::vector<std::string> admitted_;
  ShutdownHandle serving_;  // the connection being served, for stop()
  Stats stats_;
};

}  // namespace huddle::net
