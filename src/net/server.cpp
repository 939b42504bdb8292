#include "net/server.h"

#include "core/error.h"

#include <cstdio>

namespace huddle::net {

Server::Server(Listener listener, const PresharedKey& key, ServerOptions options,
               SessionHandler handler)
    : listener_(std::move(listener)),
      key_(key),
      options_(std::move(options)),
      handler_(std::move(handler)) {}

Server::~Server() {
  stop();
}

void Server::log(const std::string& line) {
  if (options_.log) {
    options_.log(line);
  } else {
    std::fprintf(stderr, "huddle server %s: %s\n", listener_.address().c_str(), line.c_str());
  }
}

void Server::start() {
  HUDDLE_CHECK(!accept_thread_.joinable(), "server started twice");
  accept_thread_ = std::thread([this] { accept_loop(); });
}

void Server::stop() {
  stopping_.store(true);
  listener_.interrupt();
  if (accept_thread_.joinable()) accept_thread_.join();
  {
    std::lock_guard lock(mutex_);
    if (session_channel_ != nullptr) session_channel_->shutdown();
    links_cv_.notify_all();
  }
  if (session_thread_.joinable()) session_thread_.join();
}

Server::Stats Server::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void Server::accept_loop() {
  while (!stopping_.load()) {
    std::optional<Socket> socket;
    try {
      socket = listener_.accept(Duration(1000));
    } catch (const Error& e) {
      log(e.what());  // e.g. out of file descriptors: back off and keep serving
      std::this_thread::sleep_for(Duration(100));
      continue;
    }
    if (socket) handle(std::move(*socket));
  }
}

void Server::reap_finished_session() {
  // Called with mutex_ held. A finished session thread has left its last critical section.
  if (!session_active_ && session_thread_.joinable()) session_thread_.join();
}

void Server::handle(Socket socket) {
  const std::string peer = socket.peer();
  try {
    auto channel = SecureChannel::respond(std::move(socket), key_, options_.channel);
    const OpenRequest open = read_open(*channel);
    std::unique_lock lock(mutex_);
    reap_finished_session();
    std::string refusal;
    if (open.kind == wire::OpenKind::kSession) {
      if (session_active_) {
        refusal = fmt::format("busy: this worker is serving session {}", session_id_);
      } else {
        session_active_ = true;
        session_id_ = open.session_id;
        session_world_ = 0;
        pending_links_.clear();
        session_channel_ = channel.get();
        ++stats_.sessions_started;
        lock.unlock();
        ack_open(*channel);
        lock.lock();
        session_thread_ = std::thread(
            [this, ch = std::move(channel), open]() mutable { run_session(std::move(ch), open); });
        return;
      }
    } else if (!session_active_ || open.session_id != session_id_) {
      refusal = fmt::format("no session {} on this worker", open.session_id);
    } else if (session_world_ != 0 && open.world != session_world_) {
      refusal =
          fmt::format("world size {} does not match the session's {}", open.world, session_world_);
    } else if (pending_links_.contains(open.rank)) {
      refusal = fmt::format("duplicate link from rank {}", open.rank);
    } else if (pending_links_.size() >= options_.max_pending_links) {
      refusal = "too many pending links";
    } else {
      session_world_ = open.world;
      lock.unlock();
      ack_open(*channel);
      lock.lock();
      // The session may have ended while we acknowledged; then the link is dropped.
      if (session_active_ && session_id_ == open.session_id) {
        pending_links_.emplace(open.rank, std::move(channel));
        links_cv_.notify_all();
      }
      return;
    }
    ++stats_.connections_refused;
    lock.unlock();
    log(fmt::format("refused {}: {}", peer, refusal));
    channel->close(refusal);
  } catch (const Error& e) {
    {
      std::lock_guard lock(mutex_);
      ++stats_.connections_refused;
    }
    log(fmt::format("refused {}: {}", peer, e.what()));
  } catch (const std::exception& e) {
    log(fmt::format("refused {}: unexpected error: {}", peer, e.what()));
  }
}

void Server::run_session(std::unique_ptr<SecureChannel> channel, OpenRequest open) {
  std::string outcome = "session ended";
  try {
    handler_(*channel, open, *this);
  } catch (const std::exception& e) {
    outcome = fmt::format("session {} failed: {}", open.session_id, e.what());
    log(outcome);
    std::lock_guard lock(mutex_);
    ++stats_.sessions_failed;
  }
  {
    // Unpublish the channel before closing it, so that stop() never touches a dead one, and
    // take new sessions from here on: a primary that sees the control channel close may open the
    // next session at once (a new session first joins this thread, which only closes it).
    std::lock_guard lock(mutex_);
    session_channel_ = nullptr;
    pending_links_.clear();
    session_active_ = false;
    links_cv_.notify_all();
  }
  channel->close(outcome);
  channel.reset();
}

std::unique_ptr<SecureChannel> Server::take_link(std::uint64_t session_id, int from_rank, int world,
                                                 Duration timeout) {
  std::unique_lock lock(mutex_);
  const bool ok = links_cv_.wait_for(lock, timeout, [&] {
    return stopping_.load() || !session_active_ || session_id != session_id_ ||
           pending_links_.contains(from_rank);
  });
  if (stopping_.load() || !session_active_ || session_id != session_id_) {
    throw TransportError(
        fmt::format("server {}: session {} is not active", listener_.address(), session_id));
  }
  if (!ok) {
    throw TransportError(
        fmt::format("timed out after {} waiting for rank {} of session {} to connect to {}",
                    format_duration(timeout), from_rank, session_id, listener_.address()));
  }
  if (session_world_ != world) {
    throw TransportError(
        fmt::format("rank {} of session {} says the world has {} ranks, we expect {}", from_rank,
                    session_id, session_world_, world));
  }
  auto node = pending_links_.extract(from_rank);
  return std::move(node.mapped());
}

}  // namespace huddle::net
