#include "net/join.h"

#include "core/error.h"
#include "net/session.h"
#include "net/wire.h"

#include <algorithm>
#include <vector>

namespace huddle::net {
namespace {

bool is_wildcard_host(const std::string& host) {
  return host.empty() || host == "0.0.0.0" || host == "::" || host == "*";
}

// A host name or address literal: printable, no spaces, no brackets or colons beyond an IPv6
// literal's (parse_endpoint checks the rest).
bool is_plausible_host(std::string_view host) {
  return !host.empty() && std::all_of(host.begin(), host.end(), [](char c) {
    return c > ' ' && c < 127 && c != '[' && c != ']' && c != '/' && c != '@';
  });
}

}  // namespace

JoinAnnouncement announcement_for(const Endpoint& listen) {
  JoinAnnouncement a;
  a.port = listen.port;
  if (!is_wildcard_host(listen.host)) a.host = listen.host;
  return a;
}

std::unique_ptr<SecureChannel> request_join(const Endpoint& primary, const PresharedKey& key,
                                            const ChannelOptions& options,
                                            const JoinAnnouncement& announcement) {
  if (announcement.port == 0 || announcement.host.size() > wire::kMaxJoinHostBytes) {
    throw UsageError(fmt::format("cannot announce '{}' port {} when joining {}", announcement.host,
                                 announcement.port, primary.str()));
  }
  auto channel = SecureChannel::connect(primary, key, options);
  wire::Open open;
  open.kind = static_cast<std::uint32_t>(wire::OpenKind::kJoin);
  channel->send(wire::kTagOpen, wire::encode(open));
  wire::Join join;
  join.port = announcement.port;
  join.host_bytes = static_cast<std::uint16_t>(announcement.host.size());
  std::vector<std::byte> payload(wire::kJoinBytes + announcement.host.size());
  const wire::JoinBytes record = wire::encode(join);
  std::copy(record.begin(), record.end(), payload.begin());
  std::transform(announcement.host.begin(), announcement.host.end(),
                 payload.begin() + wire::kJoinBytes, [](char c) { return std::byte(c); });
  channel->send(wire::kTagJoin, payload);
  const Message reply = channel->recv();  // a refusal arrives as a Close frame and throws
  if (reply.tag != wire::kTagOpenAck || !reply.payload.empty()) {
    throw TransportError(
        fmt::format("{}: expected the join's acknowledgement, got tag {} with {} "
                    "bytes",
                    channel->name(), reply.tag, reply.payload.size()));
  }
  return channel;
}

Endpoint read_join(SecureChannel& channel, const std::string& peer_host) {
  auto refuse = [&](const std::string& what) {
    const std::string msg = fmt::format("malformed join: {}", what);
    channel.close(msg);
    return TransportError(fmt::format("{}: {}", channel.name(), msg));
  };
  wire::OpenBytes open_bytes{};
  channel.recv_into(wire::kTagOpen, open_bytes);
  const wire::Open open = wire::decode_open(open_bytes);
  if (open.kind != static_cast<std::uint32_t>(wire::OpenKind::kJoin)) {
    const std::string why = fmt::format(
        "this is a primary's admission port: it takes joins only (OPEN kind {})", open.kind);
    channel.close(why);
    throw TransportError(fmt::format("{}: {}", channel.name(), why));
  }
  if (open.rank != 0 || open.world != 0 || open.session_id != 0 || open.reserved != 0)
    throw refuse("its OPEN carries a rank, world or session");
  const Message m = channel.recv();
  if (m.tag != wire::kTagJoin)
    throw refuse(fmt::format("expected tag {}, got {}", wire::kTagJoin, m.tag));
  if (m.payload.size() < wire::kJoinBytes)
    throw refuse(
        fmt::format("{} bytes, fewer than the record's {}", m.payload.size(), wire::kJoinBytes));
  const wire::Join join = wire::decode_join(
      std::span<const std::byte, wire::kJoinBytes>(m.payload.data(), wire::kJoinBytes));
  if (join.reserved != 0) throw refuse("reserved field is not 0");
  if (join.port == 0) throw refuse("port 0");
  if (join.host_bytes > wire::kMaxJoinHostBytes)
    throw refuse(
        fmt::format("host of {} bytes (at most {})", join.host_bytes, wire::kMaxJoinHostBytes));
  if (m.payload.size() != wire::kJoinBytes + join.host_bytes) {
    throw refuse(fmt::format("{} bytes for a host of {}", m.payload.size() - wire::kJoinBytes,
                             join.host_bytes));
  }
  std::string host;
  for (std::size_t i = wire::kJoinBytes; i < m.payload.size(); ++i)
    host.push_back(static_cast<char>(m.payload[i]));
  if (host.empty()) host = peer_host;
  if (!is_plausible_host(host)) throw refuse("the host is not a name or an address");
  Endpoint endpoint{host, join.port};
  try {
    endpoint = parse_endpoint(endpoint.str());
  } catch (const Error& e) {
    throw refuse(e.what());
  }
  return endpoint;
}

}  // namespace huddle::net
