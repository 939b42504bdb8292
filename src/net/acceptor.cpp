#include "net/acceptor.h"

#include "core/error.h"

namespace huddle::net {

Acceptor::Acceptor(Listener listener, const PresharedKey& key, AcceptorOptions options,
                   Handler handler)
    : listener_(std::move(listener)),
      key_(key),
      options_(std::move(options)),
      handler_(std::move(handler)) {
  HUDDLE_CHECK(options_.max_handshakes > 0, "max_handshakes must be positive");
  HUDDLE_CHECK(options_.refused && options_.log && handler_, "acceptor callbacks are required");
}

Acceptor::~Acceptor() {
  stop();
}

void Acceptor::start() {
  HUDDLE_CHECK(!accept_thread_.joinable(), "acceptor started twice");
  accept_thread_ = std::thread([this] { accept_loop(); });
}

void Acceptor::stop() {
  stopping_.store(true);
  listener_.interrupt();
  {
    std::lock_guard lock(mutex_);
    ended_cv_.notify_all();
  }
  if (accept_thread_.joinable()) accept_thread_.join();
  // No connection starts from here on: wake those in flight and join them.
  std::list<Connection> connections;
  {
    std::lock_guard lock(mutex_);
    for (Connection& c : connections_) c.socket.shutdown();
    connections.splice(connections.end(), connections_);  // the nodes (and threads) stay put
  }
  for (Connection& c : connections) {
    if (c.thread.joinable()) c.thread.join();
  }
}

std::size_t Acceptor::in_flight_locked() const {
  std::size_t n = 0;
  for (const Connection& c : connections_) n += c.done ? 0 : 1;
  return n;
}

void Acceptor::reap_locked() {
  // A done thread has left its last critical section: joining it is immediate.
  for (auto it = connections_.begin(); it != connections_.end();) {
    if (it->done) {
      it->thread.join();
      it = connections_.erase(it);
    } else {
      ++it;
    }
  }
}

void Acceptor::accept_loop() {
  while (!stopping_.load()) {
    {
      std::unique_lock lock(mutex_);
      reap_locked();
      if (in_flight_locked() >= options_.max_handshakes) {
        // Leave new connections in the backlog until one ends.
        ended_cv_.wait_for(lock, Duration(1000), [&] {
          return stopping_.load() || in_flight_locked() < options_.max_handshakes;
        });
        continue;
      }
    }
    std::optional<Socket> socket;
    try {
      socket = listener_.accept(Duration(1000));
    } catch (const Error& e) {
      options_.log(e.what());  // e.g. out of file descriptors: back off and keep accepting
      std::this_thread::sleep_for(Duration(100));
      continue;
    }
    if (socket) start_connection(std::move(*socket));
  }
}

void Acceptor::start_connection(Socket socket) {
  const auto deadline = Clock::now() + options_.channel.handshake_timeout;
  const std::string peer = socket.peer();
  std::string error;
  {
    std::lock_guard lock(mutex_);
    Connection& c = connections_.emplace_back();
    try {
      c.socket = ShutdownHandle(socket);
      c.thread = std::thread([this, &c, deadline, s = std::move(socket)]() mutable {
        serve(std::move(s), deadline);
        std::lock_guard done(mutex_);
        c.socket = ShutdownHandle();  // lets the connection close if nobody else holds it
        c.done = true;
        ended_cv_.notify_all();
      });
    } catch (const std::exception& e) {  // no descriptor or thread left: drop this connection
      connections_.pop_back();
      error = e.what();
    }
  }
  if (!error.empty()) options_.refused(peer, error);
}

void Acceptor::serve(Socket socket, Clock::time_point deadline) {
  const std::string peer = socket.peer();
  try {
    auto channel = SecureChannel::respond(std::move(socket), key_, options_.channel);
    channel->set_deadline(deadline);
    handler_(std::move(channel), peer, deadline);
  } catch (const Error& e) {
    options_.refused(peer, e.what());
  } catch (const std::exception& e) {
    options_.refused(peer, fmt::format("unexpected error: {}", e.what()));
  }
}

}  // namespace huddle::net
