// JoinListener: a primary's admission port (`huddle serve --admit HOST:PORT`). Workers started
// with `huddle worker --join` dial it (net/join.h); each that authenticates with the cluster's
// key and announces a well-formed address is acknowledged and queued for take(), which the
// primary's Session calls between requests (session/session.h). Anything else — a wrong key,
// garbage, another kind of OPEN, silence — is refused, logged, and the listener goes on.
//
// Connections are taken by an Acceptor (net/acceptor.h): each is served on a thread of its own
// within one deadline (ChannelOptions::handshake_timeout from the accept, handshake and JOIN
// together), so a silent or byte-at-a-time client (slowloris) delays no other join; at most
// kMaxJoinHandshakes are served at once, more wait in the listen backlog. Requests never go
// through here. Messages are capped at a JOIN's size before anything is allocated.
#pragma once

#include "net/acceptor.h"

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace huddle::net {

class JoinListener {
 public:
  static constexpr std::size_t kMaxJoinHandshakes = 8;

  // `log` receives one line per join admitted or refused (default: stderr).
  JoinListener(Listener listener, const PresharedKey& key, ChannelOptions options,
               std::function<void(const std::string&)> log = {});
  JoinListener(const JoinListener&) = delete;
  JoinListener& operator=(const JoinListener&) = delete;
  ~JoinListener();  // stop()

  // Starts the accept loop in a background thread.
  void start();
  // Stops accepting, wakes the connections being served and joins every thread. Idempotent.
  void stop();

  std::string address() const { return acceptor_.address(); }
  std::uint16_t port() const { return acceptor_.port(); }

  // The workers admitted since the last call ("host:port", in arrival order; one that joined
  // twice is listed once). Any thread.
  std::vector<std::string> take();

  struct Stats {
    std::uint64_t admitted = 0;
    std::uint64_t refused = 0;
  };
  Stats stats() const;

 private:
  // The Acceptor's handler: reads the JOIN, queues the worker and acknowledges it.
  void admit(std::unique_ptr<SecureChannel> channel, const std::string& peer);
  void refused(const std::string& peer, const std::string& why);  // counted and logged
  void log(const std::string& line) const;

  std::function<void(const std::string&)> log_;
  mutable std::mutex mutex_;
  std::vector<std::string> admitted_;
  Stats stats_;
  // Last: its threads use everything above (stop() joins them before any of it goes).
  Acceptor acceptor_;
};

}  // namespace huddle::net
