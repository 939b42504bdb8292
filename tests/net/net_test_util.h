// Helpers for the net tests: fast options, an echo server, and a man-in-the-middle relay that
// can rewrite the initiator's frames after the handshake (tamper, replay, truncate, resize).
#pragma once

#include "core/error.h"
#include "net/server.h"
#include "net/wire.h"

#include <atomic>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace huddle::net::testing {

inline ChannelOptions fast_options(Duration io = Duration(2000)) {
  ChannelOptions o;
  o.handshake_timeout = Duration(2000);
  o.io_timeout = io;
  return o;
}

inline Endpoint loopback(std::uint16_t port = 0) {
  return Endpoint{"127.0.0.1", port};
}

inline std::vector<std::byte> bytes_of(std::string_view s) {
  const auto b = std::as_bytes(std::span(s));
  return {b.begin(), b.end()};
}

inline std::string string_of(std::span<const std::byte> b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

// A worker whose sessions echo every message back (tag + 1) until the peer closes. Collects log
// lines for assertions.
class EchoServer {
 public:
  explicit EchoServer(const PresharedKey& key, ChannelOptions options = fast_options(),
                      std::size_t max_handshakes = ServerOptions{}.max_handshakes) {
    ServerOptions so;
    so.channel = options;
    so.max_handshakes = max_handshakes;
    so.log = [this](const std::string& line) {
      std::lock_guard lock(mutex_);
      log_.push_back(line);
    };
    server_ =
        std::make_unique<Server>(Listener::bind(loopback()), key, so,
                                 [](SecureChannel& control, const OpenRequest&, LinkAcceptor&) {
                                   for (;;) {
                                     Message m = control.recv();
                                     if (m.tag == 999)
                                       throw InputError("handler failure requested by the client");
                                     control.send(m.tag + 1, m.payload);
                                   }
                                 });
    server_->start();
  }

  Server& server() { return *server_; }
  Endpoint endpoint() const { return loopback(server_->port()); }
  std::vector<std::string> log() const {
    std::lock_guard lock(mutex_);
    return log_;
  }
  bool log_contains(std::string_view text) const {
    for (const auto& line : log()) {
      if (line.find(text) != std::string::npos) return true;
    }
    return false;
  }
  // Waits (bounded) until the server has logged `count` lines; returns whether it did.
  bool wait_for_log(std::size_t count) const {
    for (int i = 0; i < 500; ++i) {
      if (log().size() >= count) return true;
      std::this_thread::sleep_for(Duration(10));
    }
    return false;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> log_;
  std::unique_ptr<Server> server_;
};

// One round trip on an opened session; returns the echoed payload.
inline std::string echo(SecureChannel& channel, const std::string& text) {
  channel.send(7, bytes_of(text));
  const Message m = channel.recv();
  if (m.tag != 8) throw TransportError("echo: wrong tag");
  return string_of(m.payload);
}

// Relays one connection to `target`. The initiator's handshake bytes pass through unchanged;
// after that each initiator frame (header + ciphertext + tag, as on the wire) is handed to
// `rewrite`, which returns the byte strings to forward instead (none: drop the frame), and
// whether to close both connections after forwarding them.
struct RelayAction {
  std::vector<std::vector<std::byte>> frames;
  bool close = false;
};

class Relay {
 public:
  using Rewrite = std::function<RelayAction(int index, std::vector<std::byte> frame)>;

  Relay(Endpoint target, Rewrite rewrite)
      : listener_(Listener::bind(loopback())),
        target_(std::move(target)),
        rewrite_(std::move(rewrite)) {
    thread_ = std::thread([this] { run(); });
  }
  ~Relay() {
    listener_.interrupt();
    {
      std::lock_guard lock(mutex_);
      if (client_) client_->shutdown();
      if (server_) server_->shutdown();
    }
    if (thread_.joinable()) thread_.join();
  }
  Endpoint endpoint() const { return loopback(listener_.port()); }

 private:
  void run() {
    std::optional<Socket> client = listener_.accept(Duration(5000));
    if (!client) return;
    Socket server;
    try {
      server = Socket::connect(target_, Duration(2000));
    } catch (const Error&) {
      return;
    }
    {
      std::lock_guard lock(mutex_);
      client_ = &*client;
      server_ = &server;
    }
    std::thread back([&] { pump_back(server, *client); });
    try {
      forward(*client, server);
    } catch (const Error&) {
    }
    client->shutdown();
    server.shutdown();
    back.join();
    std::lock_guard lock(mutex_);
    client_ = server_ = nullptr;
  }

  static void pump_back(Socket& from, Socket& to) {
    std::vector<std::byte> buf(1);
    try {
      for (;;) {
        from.recv_exact(buf, Wait::idle_for(Duration(5000)), "relay");
        to.send_all(buf, Wait::idle_for(Duration(5000)), "relay");
      }
    } catch (const Error&) {
      to.shutdown();
    }
  }

  void forward(Socket& from, Socket& to) {
    const Wait wait = Wait::idle_for(Duration(5000));
    std::vector<std::byte> handshake(wire::kHelloBytes + wire::kAuthBytes);
    from.recv_exact(handshake, wait, "relay handshake");
    to.send_all(handshake, wait, "relay handshake");
    for (int index = 0;; ++index) {
      std::vector<std::byte> frame(wire::kFrameHeaderBytes);
      from.recv_exact(frame, wait, "relay header");
      const auto len = wire::load_le<std::uint32_t>(frame.data());
      frame.resize(wire::kFrameHeaderBytes + len + wire::kAeadTagBytes);
      from.recv_exact(std::span(frame).subspan(wire::kFrameHeaderBytes), wait, "relay body");
      const RelayAction action = rewrite_(index, std::move(frame));
      for (const auto& piece : action.frames) to.send_all(piece, wait, "relay frame");
      if (action.close) return;
    }
  }

  Listener listener_;
  Endpoint target_;
  Rewrite rewrite_;
  std::mutex mutex_;
  Socket* client_ = nullptr;
  Socket* server_ = nullptr;
  std::thread thread_;
};

// The TransportError message `fn` throws, or "(no error)".
inline std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const TransportError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace huddle::net::testing
