#include "net/join_listener.h"

#include "core/error.h"
#include "net/join.h"
#include "net/session.h"
#include "net/wire.h"

#include <algorithm>
#include <cstdio>

namespace huddle::net {

JoinListener::JoinListener(Listener listener, const PresharedKey& key, ChannelOptions options,
                           std::function<void(const std::string&)> log)
    : listener_(std::move(listener)), key_(key), options_(options), log_(std::move(log)) {
  // A joiner sends two short messages: nothing longer is read (or allocated).
  options_.max_frame_bytes = static_cast<std::uint32_t>(wire::kJoinBytes + wire::kMaxJoinHostBytes);
  options_.max_message_bytes = wire::kJoinBytes + wire::kMaxJoinHostBytes;
}

JoinListener::~JoinListener() {
  stop();
}

void JoinListener::start() {
  HUDDLE_CHECK(!thread_.joinable(), "join listener started twice");
  thread_ = std::thread([this] { accept_loop(); });
}

void JoinListener::stop() {
  stopping_.store(true);
  listener_.interrupt();
  {
    std::lock_guard lock(mutex_);
    joining_cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  // No connection starts from here on: wake those in flight and join them.
  std::list<Joining> joining;
  {
    std::lock_guard lock(mutex_);
    for (Joining& j : joining_) j.socket.shutdown();
    joining.splice(joining.end(), joining_);
  }
  for (Joining& j : joining) {
    if (j.thread.joinable()) j.thread.join();
  }
}

std::vector<std::string> JoinListener::take() {
  std::lock_guard lock(mutex_);
  return std::exchange(admitted_, {});
}

JoinListener::Stats JoinListener::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void JoinListener::log(const std::string& line) const {
  if (log_) {
    log_(line);
    return;
  }
  std::fprintf(stderr, "huddle: admission %s: %s\n", listener_.address().c_str(), line.c_str());
}

std::size_t JoinListener::in_flight_locked() const {
  return static_cast<std::size_t>(
      std::count_if(joining_.begin(), joining_.end(), [](const Joining& j) { return !j.done; }));
}

void JoinListener::reap_locked() {
  // A done thread has left its last critical section: joining it is immediate.
  for (auto it = joining_.begin(); it != joining_.end();) {
    if (it->done) {
      it->thread.join();
      it = joining_.erase(it);
    } else {
      ++it;
    }
  }
}

void JoinListener::accept_loop() {
  while (!stopping_.load()) {
    {
      std::unique_lock lock(mutex_);
      reap_locked();
      if (in_flight_locked() >= kMaxJoinHandshakes) {
        // Leave new connections in the backlog until one ends.
        joining_cv_.wait_for(lock, Duration(1000), [&] {
          return stopping_.load() || in_flight_locked() < kMaxJoinHandshakes;
        });
        continue;
      }
    }
    std::optional<Socket> socket;
    try {
      socket = listener_.accept(Duration(1000));
    } catch (const Error& e) {
      log(e.what());  // e.g. out of file descriptors: back off and keep listening
      std::this_thread::sleep_for(Duration(100));
      continue;
    }
    if (socket) start_serving(std::move(*socket));
  }
}

void JoinListener::start_serving(Socket socket) {
  const std::string peer = socket.peer();
  std::string error;
  {
    std::lock_guard lock(mutex_);
    Joining& j = joining_.emplace_back();
    try {
      j.socket = ShutdownHandle(socket);
      j.thread = std::thread([this, &j, s = std::move(socket)]() mutable {
        serve(std::move(s));
        std::lock_guard done(mutex_);
        j.socket = ShutdownHandle();
        j.done = true;
        joining_cv_.notify_all();
      });
    } catch (const std::exception& e) {  // no descriptor or thread left: drop this connection
      joining_.pop_back();
      ++stats_.refused;
      error = e.what();
    }
  }
  if (!error.empty()) log(fmt::format("refused a join from {}: {}", peer, error));
}

void JoinListener::serve(Socket socket) {
  const std::string peer = socket.peer();
  const auto deadline = Clock::now() + options_.handshake_timeout;
  try {
    auto channel = SecureChannel::respond(std::move(socket), key_, options_);
    channel->set_deadline(deadline);
    const Endpoint worker = read_join(*channel, parse_endpoint(peer).host);
    const std::string address = worker.str();
    // Queued before the acknowledgement: a worker that has it is in the queue. One whose
    // acknowledgement fails gives up and exits, and the session's probe then leaves it out.
    {
      std::lock_guard lock(mutex_);
      if (stopping_.load()) throw TransportError("the primary is stopping");
      if (std::find(admitted_.begin(), admitted_.end(), address) == admitted_.end())
        admitted_.push_back(address);
      ++stats_.admitted;
    }
    ack_open(*channel);
    log(fmt::format("{} joins: it takes sessions on {}", peer, address));
    channel->close("admitted");
  } catch (const Error& e) {
    {
      std::lock_guard lock(mutex_);
      ++stats_.refused;
    }
    log(fmt::format("refused a join from {}: {}", peer, e.what()));
  }
}

}  // namespace huddle::net
