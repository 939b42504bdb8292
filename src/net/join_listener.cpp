#include "net/join_listener.h"

#include "core/error.h"
#include "net/join.h"
#include "net/session.h"
#include "net/wire.h"

#include <algorithm>
#include <cstdio>

namespace huddle::net {

namespace {

// A joiner sends two short messages: nothing longer is read (or allocated).
ChannelOptions capped_for_joins(ChannelOptions options) {
  options.max_frame_bytes = static_cast<std::uint32_t>(wire::kJoinBytes + wire::kMaxJoinHostBytes);
  options.max_message_bytes = wire::kJoinBytes + wire::kMaxJoinHostBytes;
  return options;
}

}  // namespace

JoinListener::JoinListener(Listener listener, const PresharedKey& key, ChannelOptions options,
                           std::function<void(const std::string&)> log)
    : log_(std::move(log)),
      acceptor_(std::move(listener), key,
                AcceptorOptions{.channel = capped_for_joins(options),
                                .max_handshakes = kMaxJoinHandshakes,
                                .refused = [this](const std::string& peer,
                                                  const std::string& why) { refused(peer, why); },
                                .log = [this](const std::string& line) { this->log(line); }},
                [this](std::unique_ptr<SecureChannel> channel, const std::string& peer,
                       Clock::time_point) { admit(std::move(channel), peer); }) {}

JoinListener::~JoinListener() {
  stop();
}

void JoinListener::start() {
  acceptor_.start();
}

void JoinListener::stop() {
  acceptor_.stop();
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
  std::fprintf(stderr, "huddle: admission %s: %s\n", acceptor_.address().c_str(), line.c_str());
}

void JoinListener::refused(const std::string& peer, const std::string& why) {
  {
    std::lock_guard lock(mutex_);
    ++stats_.refused;
  }
  log(fmt::format("refused a join from {}: {}", peer, why));
}

void JoinListener::admit(std::unique_ptr<SecureChannel> channel, const std::string& peer) {
  const Endpoint worker = read_join(*channel, parse_endpoint(peer).host);
  const std::string address = worker.str();
  // Queued before the acknowledgement: a worker that has it is in the queue. One whose
  // acknowledgement fails gives up and exits, and the session's probe then leaves it out.
  {
    std::lock_guard lock(mutex_);
    if (acceptor_.stopping()) throw TransportError("the primary is stopping");
    if (std::find(admitted_.begin(), admitted_.end(), address) == admitted_.end())
      admitted_.push_back(address);
    ++stats_.admitted;
  }
  ack_open(*channel);
  log(fmt::format("{} joins: it takes sessions on {}", peer, address));
  channel->close("admitted");
}

}  // namespace huddle::net
