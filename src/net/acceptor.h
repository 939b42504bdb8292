// Acceptor: the one way a listening port takes authenticated connections. Both a worker's Server
// (net/server.h) and a primary's admission port (net/join_listener.h) are an Acceptor plus what
// they do with a connection once it is authenticated; the accept loop, the bound, the deadline
// and the stop live here only.
//
// Why a shared part and not Server taking joins itself: the two ports belong to different
// processes (a worker's session port, a primary's admission port) with different limits (a
// JOIN's size caps the admission port's frames); dispatching joins in Server would give the
// worker code it must refuse, and the primary a session machinery it never uses.
//
// Contract:
// - Each accepted connection runs on a thread of its own: the handshake (SecureChannel::respond
//   with `channel`), then the handler with the authenticated channel. The channel's deadline
//   (SecureChannel::set_deadline) is set to `channel.handshake_timeout` from the accept, so a
//   silent or byte-at-a-time client (slowloris) holds one thread for at most that long and
//   delays nobody else. A handler that keeps the channel past its return (a session) lifts it.
// - At most `max_handshakes` connections are in flight (handshake or handler) at once; more
//   wait in the listen backlog until one ends.
// - A connection whose handshake fails, whose handler throws, or for which no thread or
//   descriptor is left is reported once to `refused` with the peer and the error.
// - stop() stops accepting, wakes every connection in flight (a duplicate of its descriptor is
//   shut down: blocked handshakes and handler reads throw) and joins every thread. After it
//   returns no handler runs and the owner's state may go away.
#pragma once

#include "net/key.h"
#include "net/secure_channel.h"
#include "net/socket.h"

#include <atomic>
#include <condition_variable>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace huddle::net {

struct AcceptorOptions {
  ChannelOptions channel;           // the responder's; handshake_timeout is each one's deadline
  std::size_t max_handshakes = 16;  // connections in flight at once (> 0)
  // A connection refused (see above): from its own thread, or the accept thread. Required.
  std::function<void(const std::string& peer, const std::string& why)> refused;
  // Failures of the listening socket itself (e.g. out of descriptors): the acceptor backs off
  // 100 ms and goes on. Required.
  std::function<void(const std::string& line)> log;
};

class Acceptor {
 public:
  // Runs on the connection's thread. `peer` is "host:port" as accepted; `deadline` is the
  // channel's. It owns the channel: it may close it or hand it to another thread. Throwing
  // refuses the connection (reported to `refused`, the channel destroyed).
  using Handler = std::function<void(std::unique_ptr<SecureChannel> channel,
                                     const std::string& peer, Clock::time_point deadline)>;

  Acceptor(Listener listener, const PresharedKey& key, AcceptorOptions options, Handler handler);
  Acceptor(const Acceptor&) = delete;
  Acceptor& operator=(const Acceptor&) = delete;
  ~Acceptor();  // stop()

  // Starts the accept loop in a background thread.
  void start();
  // See above. Idempotent; one caller at a time.
  void stop();
  // True from the first stop() on; any thread.
  bool stopping() const { return stopping_.load(); }

  std::uint16_t port() const { return listener_.port(); }
  std::string address() const { return listener_.address(); }

 private:
  // One connection in flight.
  struct Connection {
    std::thread thread;
    ShutdownHandle socket;  // stop() wakes the connection with it; released when it ends
    bool done = false;
  };

  void accept_loop();
  void start_connection(Socket socket);
  void serve(Socket socket, Clock::time_point deadline);
  void reap_locked();
  std::size_t in_flight_locked() const;

  Listener listener_;
  PresharedKey key_;
  AcceptorOptions options_;
  Handler handler_;
  std::thread accept_thread_;
  std::atomic<bool> stopping_{false};

  std::mutex mutex_;
  std::condition_variable ended_cv_;   // a connection ended, or stop()
  std::list<Connection> connections_;  // nodes stay put while their threads run
};

}  // namespace huddle::net
