// libFuzzer target: what a hostile client sends a worker, read by the worker's side of the
// protocol as net::Server reads it (SecureChannel::respond, read_open, then recv() until the
// channel fails), or a primary's admission port, over a socket pair. The first input byte picks
// the stage attacked (mod 4):
//   0: the rest goes raw from the start: HELLO and AUTH parsing;
//   1: a genuine handshake with the worker's key, then the rest raw: frame headers, lengths,
//      flags and kinds checked before decryption, as a man in the middle could send them;
//   2: a genuine handshake, then the rest as sealed messages [tag u32][length u16][payload]...,
//      sent with SecureChannel::send: OPEN decoding and validation, message reassembly;
//   3: as 2, read as a primary's admission port reads a join (net::read_join, JoinListener's
//      message limits): OPEN and JOIN decoding and validation.
// Every failure must be a TransportError; anything else, a crash or a hang is a finding.
#include "core/error.h"
#include "net/handshake.h"
#include "net/join.h"
#include "net/secure_channel.h"
#include "net/session.h"
#include "net/wire.h"

#include <fcntl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <thread>

namespace {

using namespace huddle::net;

ChannelOptions options() {
  ChannelOptions o;
  o.handshake_timeout = Duration(1000);
  o.io_timeout = Duration(200);
  o.max_frame_bytes = 1u << 16;
  o.max_message_bytes = 1u << 20;
  return o;
}

const PresharedKey& key() {
  static const PresharedKey k = PresharedKey::random();
  return k;
}

Socket wrap(int fd, const char* name) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL, 0) | O_NONBLOCK);
  return Socket(fd, name);
}

// The client's side, on its own thread; errors end it (the worker may hang up first). Modes 0
// and 1 leave `socket` open (half-closed) for the caller to close once the worker is done, so
// that the worker's own sends do not fail before it has read the input.
void client(Socket& socket, int mode, std::span<const std::byte> rest) {
  const Wait wait = Wait::idle_for(Duration(200));
  try {
    if (mode == 0) {
      socket.send_all(rest, wait, "fuzz bytes");
      ::shutdown(socket.fd(), SHUT_WR);
      return;
    }
    if (mode == 1) {
      run_handshake(socket, key(), wire::Role::kInitiator, Duration(1000));
      socket.send_all(rest, wait, "fuzz bytes");
      ::shutdown(socket.fd(), SHUT_WR);
      return;
    }
    auto channel = SecureChannel::initiate(std::move(socket), key(), options());
    while (rest.size() >= 6) {
      const auto tag = wire::load_le<std::uint32_t>(rest.data());
      std::size_t length = wire::load_le<std::uint16_t>(rest.data() + 4);
      rest = rest.subspan(6);
      length = std::min(length, rest.size());
      channel->send(tag, rest.first(length));
      rest = rest.subspan(length);
    }
    channel->close("fuzz input ends");
  } catch (const huddle::TransportError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const int mode = data[0] % 4;
  const auto rest = std::as_bytes(std::span(data + 1, size - 1));
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return 0;
  Socket client_socket = wrap(fds[0], "fuzz worker");
  std::thread peer([&] { client(client_socket, mode, rest); });
  {
    std::unique_ptr<SecureChannel> channel;
    try {
      if (mode == 3) {
        ChannelOptions admission = options();  // capped as JoinListener caps them
        admission.max_frame_bytes =
            static_cast<std::uint32_t>(wire::kJoinBytes + wire::kMaxJoinHostBytes);
        admission.max_message_bytes = wire::kJoinBytes + wire::kMaxJoinHostBytes;
        channel = SecureChannel::respond(wrap(fds[1], "fuzz joiner"), key(), admission);
        read_join(*channel, "127.0.0.1");  // admitted: the listener acknowledges and hangs up
      } else {
        channel = SecureChannel::respond(wrap(fds[1], "fuzz client"), key(), options());
        read_open(*channel);
        for (;;) channel->recv();
      }
    } catch (const huddle::TransportError&) {
    }
  }  // the worker hangs up: a client still sending fails at once
  peer.join();
  return 0;
}
