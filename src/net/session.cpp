#include "net/session.h"

#include "core/error.h"

#include <algorithm>
#include <thread>

namespace huddle::net {

namespace {

void wait_ack(SecureChannel& channel) {
  const Message reply = channel.recv();  // a refusal arrives as a Close frame and throws
  if (reply.tag != wire::kTagOpenAck || !reply.payload.empty()) {
    throw TransportError(
        fmt::format("{}: expected an OPEN acknowledgement, got tag {} with {} bytes",
                    channel.name(), reply.tag, reply.payload.size()));
  }
}

std::unique_ptr<SecureChannel> open(const Endpoint& peer, const PresharedKey& key,
                                    const ChannelOptions& options, const wire::Open& request) {
  auto channel = SecureChannel::connect(peer, key, options);
  const wire::OpenBytes bytes = wire::encode(request);
  channel->send(wire::kTagOpen, bytes);
  wait_ack(*channel);
  return channel;
}

}  // namespace

std::unique_ptr<SecureChannel> open_session(const Endpoint& worker, const PresharedKey& key,
                                            const ChannelOptions& options,
                                            std::uint64_t session_id) {
  wire::Open request;
  request.kind = static_cast<std::uint32_t>(wire::OpenKind::kSession);
  request.session_id = session_id;
  return open(worker, key, options, request);
}

std::unique_ptr<SecureChannel> open_link(const Endpoint& peer, const PresharedKey& key,
                                         const ChannelOptions& options, std::uint64_t session_id,
                                         int from_rank, int world) {
  HUDDLE_CHECK(world >= 1 && static_cast<std::uint32_t>(world) <= wire::kMaxWorld &&
                   from_rank >= 0 && from_rank < world,
               "rank {} of {}", from_rank, world);
  wire::Open request;
  request.kind = static_cast<std::uint32_t>(wire::OpenKind::kMeshLink);
  request.rank = static_cast<std::uint32_t>(from_rank);
  request.world = static_cast<std::uint32_t>(world);
  request.session_id = session_id;
  return open(peer, key, options, request);
}

namespace {

// Retrying cannot fix a key or version mismatch; anything else may pass.
bool is_permanent(const std::string& error) {
  return error.find("bad key") != std::string::npos ||
         error.find("protocol version") != std::string::npos;
}

}  // namespace

std::unique_ptr<SecureChannel> dial_with_retry(
    const std::function<std::unique_ptr<SecureChannel>(const ChannelOptions&)>& attempt,
    const ChannelOptions& options, Clock::time_point deadline, std::string_view what) {
  const auto start = Clock::now();
  std::string last_error;
  Duration backoff{20};
  int attempts = 0;
  for (;;) {
    ++attempts;
    try {
      ChannelOptions o = options;
      const auto left = std::chrono::duration_cast<Duration>(deadline - Clock::now());
      o.handshake_timeout = std::max(Duration(1), std::min(o.handshake_timeout, left));
      return attempt(o);
    } catch (const TransportError& e) {
      last_error = e.what();
      if (is_permanent(last_error)) break;
    }
    const auto left = std::chrono::duration_cast<Duration>(deadline - Clock::now());
    if (left.count() <= 0) break;
    std::this_thread::sleep_for(std::min(backoff, left));
    backoff = std::min(backoff * 2, Duration(1000));
    if (Clock::now() >= deadline) break;
  }
  const auto spent = std::chrono::duration_cast<Duration>(Clock::now() - start);
  throw TransportError(fmt::format("cannot {}: {} ({} attempt{} in {})", what, last_error, attempts,
                                   attempts == 1 ? "" : "s", format_duration(spent)));
}

OpenRequest read_open(SecureChannel& channel) {
  wire::OpenBytes bytes{};
  channel.recv_into(wire::kTagOpen, bytes);
  const wire::Open o = wire::decode_open(bytes);
  auto bad = [&](const std::string& what) {
    const std::string msg = fmt::format("malformed OPEN: {}", what);
    channel.close(msg);
    return TransportError(fmt::format("{}: {}", channel.name(), msg));
  };
  if (o.reserved != 0) throw bad("reserved field is not 0");
  OpenRequest r;
  r.session_id = o.session_id;
  if (o.kind == static_cast<std::uint32_t>(wire::OpenKind::kSession)) {
    r.kind = wire::OpenKind::kSession;
    if (o.rank != 0 || o.world != 0) throw bad("a session request carries a rank");
    return r;
  }
  if (o.kind != static_cast<std::uint32_t>(wire::OpenKind::kMeshLink)) {
    throw bad(fmt::format("unknown kind {}", o.kind));
  }
  if (o.world < 1 || o.world > wire::kMaxWorld) throw bad(fmt::format("world size {}", o.world));
  if (o.rank >= o.world) throw bad(fmt::format("rank {} of {}", o.rank, o.world));
  r.kind = wire::OpenKind::kMeshLink;
  r.rank = static_cast<int>(o.rank);
  r.world = static_cast<int>(o.world);
  return r;
}

void ack_open(SecureChannel& channel) {
  channel.send(wire::kTagOpenAck, {});
}

ListenerAcceptor::ListenerAcceptor(Listener& listener, const PresharedKey& key,
                                   ChannelOptions options)
    : listener_(listener), key_(key), options_(options) {}

std::unique_ptr<SecureChannel> ListenerAcceptor::take_link(std::uint64_t session_id, int from_rank,
                                                           int world, Duration timeout) {
  const auto deadline = Clock::now() + timeout;
  const auto key = std::make_pair(session_id, from_rank);
  for (;;) {
    if (auto it = pending_.find(key); it != pending_.end()) {
      auto channel = std::move(it->second);
      pending_.erase(it);
      return channel;
    }
    const auto left = std::chrono::duration_cast<Duration>(deadline - Clock::now());
    if (left.count() <= 0) {
      throw TransportError(
          fmt::format("timed out after {} waiting for rank {} of session {} to connect to {}",
                      format_duration(timeout), from_rank, session_id, listener_.address()));
    }
    std::optional<Socket> socket = listener_.accept(left);
    if (!socket) {
      if (listener_.interrupted())
        throw TransportError(fmt::format("listener {} closed", listener_.address()));
      continue;
    }
    try {
      auto channel = SecureChannel::respond(std::move(*socket), key_, options_);
      const OpenRequest r = read_open(*channel);
      if (r.kind != wire::OpenKind::kMeshLink) {
        channel->close("this endpoint accepts only mesh links");
        throw TransportError(
            fmt::format("{}: asked for a session; only mesh links accepted", channel->name()));
      }
      if (r.session_id == session_id && r.world != world) {
        const std::string why =
            fmt::format("world size {} does not match ours ({})", r.world, world);
        channel->close(why);
        throw TransportError(fmt::format("{}: {}", channel->name(), why));
      }
      const auto got = std::make_pair(r.session_id, r.rank);
      if (pending_.contains(got)) {
        channel->close("duplicate link");
        throw TransportError(
            fmt::format("{}: duplicate link from rank {}", channel->name(), r.rank));
      }
      ack_open(*channel);
      pending_.emplace(got, std::move(channel));
    } catch (const Error& e) {
      dropped_.push_back(e.what());
    }
  }
}

}  // namespace huddle::net
