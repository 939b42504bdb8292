#include "net/server.h"

#include "core/error.h"

#include <cstdio>

namespace huddle::net {

Server::Server(Listener listener, const PresharedKey& key, ServerOptions options,
               SessionHandler handler)
    : options_(std::move(options)),
      handler_(std::move(handler)),
      acceptor_(std::move(listener), key,
                AcceptorOptions{.channel = options_.channel,
                                .max_handshakes = options_.max_handshakes,
                                .refused = [this](const std::string& peer,
                                                  const std::string& why) { refused(peer, why); },
                                .log = [this](const std::string& line) { log(line); }},
                [this](std::unique_ptr<SecureChannel> channel, const std::string&,
                       Clock::time_point deadline) { handle(std::move(channel), deadline); }) {}

Server::~Server() {
  stop();
}

void Server::log(const std::string& line) {
  if (options_.log) {
    options_.log(line);
  } else {
    std::fprintf(stderr, "huddle server %s: %s\n", acceptor_.address().c_str(), line.c_str());
  }
}

void Server::refused(const std::string& peer, const std::string& why) {
  {
    std::lock_guard lock(mutex_);
    ++stats_.connections_refused;
  }
  log(fmt::format("refused {}: {}", peer, why));
}

void Server::start() {
  acceptor_.start();
}

void Server::stop() {
  // Joins every connection thread: only they start sessions and add links, and any that gets
  // past its OPEN from here on sees stopping() and refuses.
  acceptor_.stop();
  {
    std::lock_guard lock(mutex_);
    if (session_channel_ != nullptr) session_channel_->shutdown();
    for (auto& [rank, link] : pending_links_) link->shutdown();
    links_cv_.notify_all();
  }
  if (session_thread_.joinable()) session_thread_.join();
}

Server::Stats Server::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void Server::handle(std::unique_ptr<SecureChannel> channel, Clock::time_point deadline) {
  OpenRequest open;
  try {
    open = read_open(*channel);
  } catch (const TransportError&) {
    if (Clock::now() < deadline) throw;
    // The socket's own message would name the idle timeout, not this deadline.
    throw TransportError(fmt::format("{}: no OPEN within the handshake deadline of {}",
                                     channel->name(),
                                     format_duration(options_.channel.handshake_timeout)));
  }
  std::unique_lock lock(mutex_);
  std::string refusal;
  if (acceptor_.stopping()) {
    refusal = "the worker is stopping";
  } else if (open.kind == wire::OpenKind::kSession) {
    if (!session_active_) {
      start_session(std::move(channel), open, lock);
      return;
    }
    refusal = fmt::format("busy: this worker is serving session {}", session_id_);
  } else if (!session_active_ || open.session_id != session_id_) {
    refusal = fmt::format("no session {} on this worker", open.session_id);
  } else if (session_world_ != 0 && open.world != session_world_) {
    refusal =
        fmt::format("world size {} does not match the session's {}", open.world, session_world_);
  } else if (pending_links_.contains(open.rank) ||
             links_acking_.contains({open.session_id, open.rank})) {
    refusal = fmt::format("duplicate link from rank {}", open.rank);
  } else if (pending_links_.size() + links_acking_.size() >= options_.max_pending_links) {
    refusal = "too many pending links";
  } else {
    add_link(std::move(channel), open, lock);
    return;
  }
  lock.unlock();
  channel->close(refusal);
  throw TransportError(refusal);  // the acceptor counts and logs it: "refused PEER: busy: ..."
}

void Server::start_session(std::unique_ptr<SecureChannel> channel, const OpenRequest& open,
                           std::unique_lock<std::mutex>& lock) {
  // Claim the worker, so that other connections see it busy while this one is acknowledged.
  session_active_ = true;
  session_id_ = open.session_id;
  session_world_ = 0;
  pending_links_.clear();
  session_channel_ = channel.get();  // stop() may shut it down from here on
  std::thread previous = std::move(session_thread_);
  lock.unlock();
  try {
    // The last session's thread has ended its session and only closes its channel.
    if (previous.joinable()) previous.join();
    ack_open(*channel);
    channel->set_deadline(Clock::time_point::max());
    lock.lock();
    if (acceptor_.stopping()) throw TransportError("the worker is stopping");
    session_thread_ = std::thread(
        [this, ch = std::move(channel), open]() mutable { run_session(std::move(ch), open); });
    ++stats_.sessions_started;
    lock.unlock();
  } catch (...) {
    // Free the worker before the channel goes (it is destroyed with this frame, or with the
    // thread's closure): nobody may see the session, or a pointer to its channel, after that.
    if (!lock.owns_lock()) lock.lock();
    end_session_locked();
    lock.unlock();
    throw;
  }
}

void Server::add_link(std::unique_ptr<SecureChannel> channel, const OpenRequest& open,
                      std::unique_lock<std::mutex>& lock) {
  const std::pair<std::uint64_t, int> key{open.session_id, open.rank};
  session_world_ = open.world;
  links_acking_.insert(key);
  lock.unlock();
  try {
    ack_open(*channel);
    channel->set_deadline(Clock::time_point::max());
  } catch (...) {
    lock.lock();
    links_acking_.erase(key);
    lock.unlock();
    throw;
  }
  lock.lock();
  links_acking_.erase(key);
  // The session may have ended (or the server begun to stop) meanwhile: then the link is dropped.
  if (session_active_ && session_id_ == open.session_id && !acceptor_.stopping()) {
    pending_links_.emplace(open.rank, std::move(channel));
    links_cv_.notify_all();
  }
  lock.unlock();
}

void Server::end_session_locked() {
  session_channel_ = nullptr;
  pending_links_.clear();
  session_active_ = false;
  links_cv_.notify_all();
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
    end_session_locked();
  }
  channel->close(outcome);
  channel.reset();
}

std::unique_ptr<SecureChannel> Server::take_link(std::uint64_t session_id, int from_rank, int world,
                                                 Duration timeout) {
  std::unique_lock lock(mutex_);
  const bool ok = links_cv_.wait_for(lock, timeout, [&] {
    return acceptor_.stopping() || !session_active_ || session_id != session_id_ ||
           pending_links_.contains(from_rank);
  });
  if (acceptor_.stopping() || !session_active_ || session_id != session_id_) {
    throw TransportError(
        fmt::format("server {}: session {} is not active", acceptor_.address(), session_id));
  }
  if (!ok) {
    throw TransportError(
        fmt::format("timed out after {} waiting for rank {} of session {} to connect to {}",
                    format_duration(timeout), from_rank, session_id, acceptor_.address()));
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
