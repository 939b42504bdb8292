#include "net/secure_channel.h"

#include "core/error.h"
#include "net/wire.h"

#include <algorithm>
#include <array>
#include <cstring>

namespace huddle::net {

namespace {

// Keep at most this much send buffer between messages.
constexpr std::size_t kKeepSendBuffer = 4u << 20;

std::string frame_what(std::uint64_t bytes) {
  return fmt::format("frame of {} bytes", bytes);
}

}  // namespace

std::unique_ptr<SecureChannel> SecureChannel::connect(const Endpoint& endpoint,
                                                      const PresharedKey& key,
                                                      const ChannelOptions& options) {
  return initiate(Socket::connect(endpoint, options.handshake_timeout), key, options);
}

std::unique_ptr<SecureChannel> SecureChannel::initiate(Socket socket, const PresharedKey& key,
                                                       const ChannelOptions& options) {
  const SessionKeys keys =
      run_handshake(socket, key, wire::Role::kInitiator, options.handshake_timeout);
  return std::unique_ptr<SecureChannel>(new SecureChannel(std::move(socket), options, keys));
}

std::unique_ptr<SecureChannel> SecureChannel::respond(Socket socket, const PresharedKey& key,
                                                      const ChannelOptions& options) {
  const SessionKeys keys =
      run_handshake(socket, key, wire::Role::kResponder, options.handshake_timeout);
  return std::unique_ptr<SecureChannel>(new SecureChannel(std::move(socket), options, keys));
}

SecureChannel::SecureChannel(Socket socket, const ChannelOptions& options, const SessionKeys& keys)
    : socket_(std::move(socket)),
      options_(options),
      io_timeout_ms_(options.io_timeout.count()),
      name_(socket_.peer()),
      sealer_(keys.send),
      opener_(keys.recv) {
  HUDDLE_CHECK(options_.send_frame_bytes > 0 && options_.max_frame_bytes > 0,
               "frame sizes must be positive");
}

SecureChannel::~SecureChannel() = default;  // the Aeads wipe their keys

std::string SecureChannel::name() const {
  std::lock_guard lock(name_mutex_);
  return name_;
}

void SecureChannel::set_name(std::string name) {
  std::lock_guard lock(name_mutex_);
  name_ = std::move(name);
}

void SecureChannel::fail(const std::string& what) {
  // Socket errors already start with "peer ADDRESS:"; replace it with our (richer) name.
  std::string msg = what;
  const std::string prefix = fmt::format("peer {}: ", socket_.peer());
  if (msg.starts_with(prefix)) msg = msg.substr(prefix.size());
  msg = fmt::format("{}: {}", name(), msg);
  {
    std::lock_guard lock(error_mutex_);
    if (error_.empty()) error_ = msg;
  }
  broken_.store(true);
  socket_.shutdown();
  throw TransportError(msg);
}

void SecureChannel::check_usable() const {
  if (!broken_.load()) return;
  std::lock_guard lock(error_mutex_);
  throw TransportError(fmt::format("{}: connection unusable after an earlier error: {}", name(),
                                   error_.empty() ? "shut down" : error_));
}

void SecureChannel::shutdown() {
  {
    std::lock_guard lock(error_mutex_);
    if (error_.empty()) error_ = "connection shut down locally";
  }
  broken_.store(true);
  socket_.shutdown();
}

// ---- sending ----

void SecureChannel::send_frame(std::uint16_t kind, std::uint16_t flags, std::uint32_t tag,
                               std::span<const std::byte> payload) {
  wire::FrameHeader header;
  header.length = static_cast<std::uint32_t>(payload.size());
  header.kind = kind;
  header.flags = flags;
  header.tag = tag;
  const wire::FrameHeaderBytes head = wire::encode(header);
  const std::size_t total = head.size() + payload.size() + wire::kAeadTagBytes;
  send_buffer_.resize(total);
  std::memcpy(send_buffer_.data(), head.data(), head.size());
  unsigned char* cipher = send_buffer_.data() + head.size();
  sealer_.seal(wire::frame_nonce(send_counter_),
               reinterpret_cast<const unsigned char*>(head.data()), head.size(),
               reinterpret_cast<const unsigned char*>(payload.data()), payload.size(), cipher,
               cipher + payload.size());
  ++send_counter_;
  try {
    socket_.send_all(std::as_bytes(std::span(send_buffer_)), io_wait(), frame_what(payload.size()));
  } catch (const TransportError& e) {
    fail(e.what());
  }
}

void SecureChannel::send(std::uint32_t tag, std::span<const std::byte> payload) {
  std::lock_guard lock(send_mutex_);
  check_usable();
  const std::size_t step = options_.send_frame_bytes;
  std::size_t offset = 0;
  do {
    const std::size_t n = std::min(step, payload.size() - offset);
    const bool more = offset + n < payload.size();
    send_frame(static_cast<std::uint16_t>(wire::FrameKind::kData), more ? wire::kFlagMore : 0, tag,
               payload.subspan(offset, n));
    offset += n;
  } while (offset < payload.size());
  if (send_buffer_.capacity() > kKeepSendBuffer) std::vector<unsigned char>().swap(send_buffer_);
}

void SecureChannel::close(std::string_view reason) {
  try {
    std::lock_guard lock(send_mutex_);
    if (!broken_.load()) {
      const std::string_view r = reason.substr(0, wire::kMaxCloseReason);
      send_frame(static_cast<std::uint16_t>(wire::FrameKind::kClose), 0, 0,
                 std::as_bytes(std::span(r)));
    }
  } catch (const TransportError&) {
    // Best effort: the peer may already be gone.
  }
  shutdown();
}

// ---- receiving ----

SecureChannel::FrameIn SecureChannel::read_header(std::string_view expecting) {
  wire::FrameHeaderBytes head{};
  try {
    socket_.recv_exact(head, io_wait(), expecting);
  } catch (const TransportError& e) {
    fail(e.what());
  }
  const wire::FrameHeader h = wire::decode_frame_header(head);
  if (!wire::is_known_frame_kind(h.kind)) fail(fmt::format("frame of unknown kind {}", h.kind));
  if ((h.flags & ~wire::kKnownFlags) != 0)
    fail(fmt::format("frame with unknown flags 0x{:04x}", h.flags));
  if (h.length > options_.max_frame_bytes) {
    fail(fmt::format("frame of {} bytes exceeds the limit of {} bytes", h.length,
                     options_.max_frame_bytes));
  }
  // The sender never marks an empty frame "more": refusing it bounds every message's frames.
  if ((h.flags & wire::kFlagMore) != 0 && h.length == 0) fail("empty frame marked 'more'");
  if (h.kind == static_cast<std::uint16_t>(wire::FrameKind::kClose) &&
      (h.length > wire::kMaxCloseReason || h.flags != 0)) {
    fail(fmt::format("close frame of {} bytes is malformed", h.length));
  }
  return FrameIn{h.length, h.kind, h.flags, h.tag};
}

void SecureChannel::read_body(const FrameIn& frame, std::span<std::byte> out) {
  HUDDLE_CHECK(out.size() == frame.length);
  std::array<unsigned char, wire::kAeadTagBytes> mac{};
  try {
    socket_.recv_exact(out, io_wait(), frame_what(frame.length));
    socket_.recv_exact(std::as_writable_bytes(std::span(mac)), io_wait(), frame_what(frame.length));
  } catch (const TransportError& e) {
    fail(e.what());
  }
  wire::FrameHeader h;
  h.length = frame.length;
  h.kind = frame.kind;
  h.flags = frame.flags;
  h.tag = frame.tag;
  const wire::FrameHeaderBytes head = wire::encode(h);
  // In place: the ciphertext was read into `out`.
  if (!opener_.open(wire::frame_nonce(recv_counter_),
                    reinterpret_cast<const unsigned char*>(head.data()), head.size(),
                    reinterpret_cast<unsigned char*>(out.data()), out.size(), mac.data())) {
    fail(
        fmt::format("authentication tag mismatch on frame {} ({} bytes): tampered, replayed or "
                    "reordered data",
                    recv_counter_, frame.length));
  }
  ++recv_counter_;
}

void SecureChannel::read_close(const FrameIn& frame) {
  std::string reason(frame.length, '\0');
  read_body(frame, std::as_writable_bytes(std::span(reason)));
  for (char& c : reason) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  fail(fmt::format("peer closed the connection: {}", reason.empty() ? "no reason given" : reason));
}

Message SecureChannel::recv() {
  std::lock_guard lock(recv_mutex_);
  check_usable();
  Message msg;
  bool first = true;
  for (;;) {
    const FrameIn frame = read_header(first ? "a message" : "the rest of a message");
    if (frame.kind == static_cast<std::uint16_t>(wire::FrameKind::kClose)) read_close(frame);
    if (first) {
      msg.tag = frame.tag;
    } else if (frame.tag != msg.tag) {
      fail(fmt::format("message with tag {} continues with tag {}", msg.tag, frame.tag));
    }
    if (msg.payload.size() + frame.length > options_.max_message_bytes) {
      fail(fmt::format("message of more than {} bytes exceeds the limit of {} bytes",
                       msg.payload.size() + frame.length, options_.max_message_bytes));
    }
    const std::size_t offset = msg.payload.size();
    msg.payload.resize(offset + frame.length);
    read_body(frame, std::span(msg.payload).subspan(offset));
    first = false;
    if ((frame.flags & wire::kFlagMore) == 0) return msg;
  }
}

void SecureChannel::recv_into(std::uint32_t tag, std::span<std::byte> out) {
  std::lock_guard lock(recv_mutex_);
  check_usable();
  std::size_t offset = 0;
  for (;;) {
    const FrameIn frame =
        read_header(offset == 0 ? fmt::format("message {} ({} bytes)", tag, out.size())
                                : fmt::format("the rest of message {}", tag));
    if (frame.kind == static_cast<std::uint16_t>(wire::FrameKind::kClose)) read_close(frame);
    const bool more = (frame.flags & wire::kFlagMore) != 0;
    if (frame.tag != tag || offset + frame.length > out.size() ||
        (!more && offset + frame.length != out.size())) {
      fail(fmt::format("expected message tag {} of {} bytes, got tag {} with {}{} bytes", tag,
                       out.size(), frame.tag, offset + frame.length, more ? "+" : ""));
    }
    read_body(frame, out.subspan(offset, frame.length));
    offset += frame.length;
    if (!more) return;
  }
}

}  // namespace huddle::net
