// TCP sockets with a timeout on every wait: RAII Socket and Listener, endpoint parsing.
//
// Every blocking call takes a Wait: it fails when no byte moves for `idle`, or when the absolute
// `deadline` passes, whichever comes first. Errors are TransportError naming the peer address
// and what was being waited for. Sockets are non-blocking underneath (poll), TCP_NODELAY is set
// on every connection, and SIGPIPE is never raised.
//
// Thread safety: one thread may send while another receives on the same Socket; shutdown() may
// be called from any thread and wakes both.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace huddle::net {

using Clock = std::chrono::steady_clock;
using Duration = std::chrono::milliseconds;

struct Wait {
  Duration idle{5000};
  Clock::time_point deadline = Clock::time_point::max();

  static Wait idle_for(Duration d) { return Wait{d, Clock::time_point::max()}; }
  // Both limits equal: at most `d` in total.
  static Wait total(Duration d) { return Wait{d, Clock::now() + d}; }
};

// "0.3s", "5s", "250ms": for error messages.
std::string format_duration(Duration d);

struct Endpoint {
  std::string host;  // name, IPv4 literal, or IPv6 literal without brackets
  std::uint16_t port = 0;

  std::string str() const;  // "host:port" or "[v6]:port"
};

// Parses "HOST:PORT", "[V6ADDR]:PORT" (port 0..65535). Throws InputError naming the text.
Endpoint parse_endpoint(std::string_view text);

class Socket {
 public:
  Socket() = default;
  Socket(int fd, std::string peer);  // takes ownership of a connected fd
  Socket(Socket&& other) noexcept;
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket();

  // Resolves and connects, trying each address in turn, within `timeout` in total.
  static Socket connect(const Endpoint& endpoint, Duration timeout);

  bool valid() const { return fd_ >= 0; }
  const std::string& peer() const { return peer_; }
  int fd() const { return fd_; }

  // Sends every byte or throws. `what` names the data in errors ("frame of 1024 bytes").
  void send_all(std::span<const std::byte> data, const Wait& wait, std::string_view what);
  // Receives exactly data.size() bytes or throws ("peer closed", timeout, reset).
  void recv_exact(std::span<std::byte> data, const Wait& wait, std::string_view what);
  // Wakes any thread blocked in send_all/recv_exact (they throw); idempotent.
  void shutdown();
  void close();

 private:
  int fd_ = -1;
  std::string peer_;
};

// Shuts a Socket down from another thread although its owner may move or close it meanwhile: the
// handle holds its own duplicate of the descriptor, so it never acts on a descriptor number that
// was closed and reused. While a handle lives the connection stays open (no FIN is sent when the
// Socket alone closes), so drop handles as soon as their owner is done with the socket.
class ShutdownHandle {
 public:
  ShutdownHandle() = default;
  // TransportError naming the peer when no descriptor is left to duplicate.
  explicit ShutdownHandle(const Socket& socket);
  ShutdownHandle(ShutdownHandle&& other) noexcept;
  ShutdownHandle& operator=(ShutdownHandle&& other) noexcept;
  ShutdownHandle(const ShutdownHandle&) = delete;
  ShutdownHandle& operator=(const ShutdownHandle&) = delete;
  ~ShutdownHandle();

  // Wakes every thread blocked on the socket (they throw); idempotent, any thread.
  void shutdown();

 private:
  int fd_ = -1;
};

class Listener {
 public:
  Listener() = default;
  Listener(Listener&& other) noexcept;
  Listener& operator=(Listener&& other) noexcept;
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  ~Listener();

  // Binds and listens (SO_REUSEADDR). Port 0 picks an ephemeral port; see port().
  static Listener bind(const Endpoint& endpoint, int backlog = 64);

  std::uint16_t port() const { return port_; }
  std::string address() const;  // "host:port" with the bound port

  // Waits up to `timeout` for a connection; nullopt on timeout or after interrupt().
  // Throws TransportError only when the listening socket itself fails.
  std::optional<Socket> accept(Duration timeout);
  // Makes a blocked accept() (and all later ones) return nullopt; safe from any thread.
  void interrupt();
  bool interrupted() const;

 private:
  void close();

  int fd_ = -1;
  int wake_pipe_[2] = {-1, -1};
  std::string host_;
  std::uint16_t port_ = 0;
};

}  // namespace huddle::net
