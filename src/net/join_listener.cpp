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
    serving_.shutdown();
  }
  if (thread_.joinable()) thread_.join();
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

void JoinListener::accept_loop() {
  while (!stopping_.load()) {
    std::optional<Socket> socket;
    try {
      socket = listener_.accept(Duration(1000));
    } catch (const Error& e) {
      log(e.what());  // e.g. out of file descriptors: back off and keep listening
      std::this_thread::sleep_for(Duration(100));
      continue;
    }
    if (socket) serve(std::move(*socket));
  }
}

void JoinListener::serve(Socket socket) {
  const std::string peer = socket.peer();
  const auto deadline = Clock::now() + options_.handshake_timeout;
  try {
    {
      std::lock_guard lock(mutex_);
      if (stopping_.load()) return;
      serving_ = ShutdownHandle(socket);
    }
    struct Release {
      JoinListener& self;
      ~Release() {
        std::lock_guard lock(self.mutex_);
        self.serving_ = ShutdownHandle();
      }
    } release{*this};
    auto channel = SecureChannel::respond(std::move(socket), key_, options_);
    channel->set_deadline(deadline);
    const Endpoint worker = read_join(*channel, parse_endpoint(peer).host);
    const std::string address = worker.str();
    // Queued before the acknowledgement: a worker that has it is in the queue. One whose
    // acknowledgement fails gives up and exits, and the session's probe then leaves it out.
    {
      std::lock_guard lock(mutex_);
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
