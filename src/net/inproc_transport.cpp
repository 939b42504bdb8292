#include "net/inproc_transport.h"

#include "core/error.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

namespace huddle::net {

namespace {

struct Pending {
  std::uint32_t tag = 0;
  std::vector<std::byte> payload;
  Clock::time_point deliver_at;
};

// One direction between two ranks.
struct Link {
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<Pending> queue;
  Clock::time_point busy_until{};
  bool closed = false;  // no more messages will come (sender died or closed)
  std::string closed_reason;
  std::string error;  // set when the link is broken for the receiver too
};

class InprocTransport;

}  // namespace

struct InprocCluster::State {
  int size = 0;
  InprocOptions options;
  std::vector<std::unique_ptr<Link>> links;  // [src * size + dst]
  std::vector<std::unique_ptr<InprocTransport>> endpoints;

  Link& link(int src, int dst) { return *links[static_cast<std::size_t>(src * size + dst)]; }
  void close_rank(int r, const std::string& why);
};

namespace {

class InprocTransport final : public Transport {
 public:
  InprocTransport(InprocCluster::State& state, int rank)
      : state_(state), rank_(rank), timeout_ms_(state.options.timeout.count()) {}

  int rank() const override { return rank_; }
  int size() const override { return state_.size; }
  std::string peer_name(int peer) const override { return fmt::format("rank {} (inproc)", peer); }
  Duration timeout() const override { return Duration(timeout_ms_.load()); }
  void set_timeout(Duration timeout) override { timeout_ms_.store(timeout.count()); }

  void send(int peer, std::uint32_t tag, std::span<const std::byte> payload) override {
    check_peer(peer);
    Link& link = state_.link(rank_, peer);
    std::lock_guard lock(link.mutex);
    if (link.closed || !link.error.empty()) {
      throw TransportError(fmt::format("{}: connection closed: {}", peer_name(peer),
                                       link.error.empty() ? link.closed_reason : link.error));
    }
    const auto now = Clock::now();
    Clock::time_point deliver_at = now;
    if (state_.options.link.active()) {
      const auto start = std::max(now, link.busy_until);
      LinkEmulation bw_only = state_.options.link;
      bw_only.latency = Duration(0);
      link.busy_until = start + bw_only.delay(payload.size());
      deliver_at = link.busy_until + state_.options.link.latency;
    }
    link.queue.push_back(Pending{tag, {payload.begin(), payload.end()}, deliver_at});
    link.cv.notify_all();
    bytes_sent_ += payload.size();
  }

  std::uint64_t bytes_sent() const override { return bytes_sent_.load(); }

  Message recv(int peer) override {
    Pending p = pop(peer, "a message");
    return Message{p.tag, std::move(p.payload)};
  }

  void recv_into(int peer, std::uint32_t tag, std::span<std::byte> out) override {
    Pending p = pop(peer, fmt::format("message {} ({} bytes)", tag, out.size()));
    if (p.tag != tag || p.payload.size() != out.size()) {
      const std::string why =
          fmt::format("expected message tag {} of {} bytes, got tag {} with {} bytes", tag,
                      out.size(), p.tag, p.payload.size());
      Link& link = state_.link(peer, rank_);
      {
        std::lock_guard lock(link.mutex);
        if (link.error.empty()) link.error = why;
      }
      throw TransportError(fmt::format("{}: {}", peer_name(peer), why));
    }
    if (!out.empty()) std::memcpy(out.data(), p.payload.data(), out.size());
  }

  void close() override {
    state_.close_rank(rank_, fmt::format("rank {} closed the session", rank_));
  }

 private:
  void check_peer(int peer) const {
    HUDDLE_CHECK(peer >= 0 && peer < state_.size && peer != rank_, "bad peer {} for rank {} of {}",
                 peer, rank_, state_.size);
  }

  Pending pop(int peer, const std::string& what) {
    check_peer(peer);
    Link& link = state_.link(peer, rank_);
    const Duration timeout = this->timeout();
    const auto deadline = Clock::now() + timeout;
    std::unique_lock lock(link.mutex);
    for (;;) {
      if (!link.error.empty()) {
        throw TransportError(
            fmt::format("{}: connection unusable: {}", peer_name(peer), link.error));
      }
      const auto now = Clock::now();
      if (!link.queue.empty() && link.queue.front().deliver_at <= now) {
        Pending p = std::move(link.queue.front());
        link.queue.pop_front();
        if (p.payload.size() > state_.options.max_message_bytes) {
          link.error = fmt::format("message of {} bytes exceeds the limit of {} bytes",
                                   p.payload.size(), state_.options.max_message_bytes);
          throw TransportError(fmt::format("{}: {}", peer_name(peer), link.error));
        }
        return p;
      }
      if (link.queue.empty() && link.closed) {
        throw TransportError(fmt::format("{}: peer closed the connection while we waited for {}",
                                         peer_name(peer), what));
      }
      if (now >= deadline) {
        throw TransportError(fmt::format("{}: timed out after {} waiting for {}", peer_name(peer),
                                         format_duration(timeout), what));
      }
      auto wake = deadline;
      if (!link.queue.empty()) wake = std::min(wake, link.queue.front().deliver_at);
      link.cv.wait_until(lock, wake);
    }
  }

  InprocCluster::State& state_;
  int rank_;
  std::atomic<std::int64_t> timeout_ms_;
  std::atomic<std::uint64_t> bytes_sent_{0};  // payload bytes this rank has sent
};

}  // namespace

void InprocCluster::State::close_rank(int r, const std::string& why) {
  for (int other = 0; other < size; ++other) {
    if (other == r) continue;
    {  // Messages r already sent stay deliverable; nothing more will come.
      Link& out = link(r, other);
      std::lock_guard lock(out.mutex);
      out.closed = true;
      if (out.closed_reason.empty()) out.closed_reason = why;
      out.cv.notify_all();
    }
    {  // r itself receives nothing more.
      Link& in = link(other, r);
      std::lock_guard lock(in.mutex);
      if (in.error.empty()) in.error = why;
      in.closed = true;
      if (in.closed_reason.empty()) in.closed_reason = why;
      in.cv.notify_all();
    }
  }
}

InprocCluster::InprocCluster(int size, InprocOptions options) : state_(std::make_unique<State>()) {
  HUDDLE_CHECK(size >= 1, "cluster size {}", size);
  state_->size = size;
  state_->options = options;
  for (int i = 0; i < size * size; ++i) state_->links.push_back(std::make_unique<Link>());
  for (int r = 0; r < size; ++r)
    state_->endpoints.push_back(std::make_unique<InprocTransport>(*state_, r));
}

InprocCluster::~InprocCluster() = default;

int InprocCluster::size() const {
  return state_->size;
}

Transport& InprocCluster::rank(int r) {
  HUDDLE_CHECK(r >= 0 && r < state_->size);
  return *state_->endpoints[static_cast<std::size_t>(r)];
}

void InprocCluster::kill(int r) {
  HUDDLE_CHECK(r >= 0 && r < state_->size);
  state_->close_rank(r, fmt::format("rank {} was killed", r));
}

}  // namespace huddle::net
