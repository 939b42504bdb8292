// Faults of the worker Server found in review, each reproduced: a session whose start fails,
// stop() during a session, and clients that stall their handshake (slowloris).
#include "net/server.h"

#include "net_test_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <poll.h>
#include <sys/socket.h>

#include <thread>

namespace huddle::net {
namespace {

using testing::echo;
using testing::EchoServer;
using testing::error_of;
using testing::fast_options;
using ::testing::HasSubstr;

// Authenticates, asks for a session and resets the connection at once (SO_LINGER 0), so that
// the worker's acknowledgement of the session usually fails: the session's start fails on the
// worker's side. When the worker was quicker, its session fails on the first read instead.
void open_session_then_reset(const Endpoint& worker, const PresharedKey& key) {
  Socket socket = Socket::connect(worker, Duration(2000));
  const int fd = socket.fd();
  auto channel = SecureChannel::initiate(std::move(socket), key, fast_options());
  const linger reset{1, 0};
  ASSERT_EQ(::setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset), 0);
  wire::Open request;
  request.kind = static_cast<std::uint32_t>(wire::OpenKind::kSession);
  request.session_id = 77;
  channel->send(wire::kTagOpen, wire::encode(request));
  channel.reset();  // closes the socket: RST
}

// A session on `es`, retried (bounded) while the worker is still ending an earlier one; null
// when it stays busy.
std::unique_ptr<SecureChannel> open_when_free(EchoServer& es, const PresharedKey& key,
                                              std::uint64_t id) {
  for (int attempt = 0; attempt < 150; ++attempt) {
    try {
      return open_session(es.endpoint(), key, fast_options(), id);
    } catch (const TransportError& e) {
      if (std::string(e.what()).find("busy") == std::string::npos) throw;
      std::this_thread::sleep_for(Duration(20));
    }
  }
  return nullptr;
}

// Before the fix a failed acknowledgement left the worker "busy" for ever, with a pointer to the
// freed channel that stop() then used (AddressSanitizer reports it when `es` is destroyed).
TEST(ServerFaults, SessionWhoseStartFailsLeavesTheWorkerFree) {
  const PresharedKey key = PresharedKey::random();
  EchoServer es(key);
  for (int trial = 0; trial < 20; ++trial) {
    open_session_then_reset(es.endpoint(), key);
    auto ch = open_when_free(es, key, 100 + static_cast<std::uint64_t>(trial));
    ASSERT_TRUE(ch) << "trial " << trial
                    << ": the worker stayed busy; last log line: " << es.log().back();
    EXPECT_EQ(echo(*ch, "free"), "free");
  }
}

TEST(ServerFaults, StopDuringASessionEndsItAndReturns) {
  const PresharedKey key = PresharedKey::random();
  EchoServer es(key);
  auto ch = open_session(es.endpoint(), key, fast_options(), 1);
  EXPECT_EQ(echo(*ch, "running"), "running");
  Socket silent = Socket::connect(es.endpoint(), Duration(2000));  // a handshake in flight too
  std::vector<std::byte> hello(wire::kHelloBytes);
  silent.recv_exact(hello, Wait::idle_for(Duration(5000)), "the worker's HELLO");
  es.server().stop();
  EXPECT_THAT(error_of([&] { ch->recv(); }), HasSubstr("closed"));
  std::byte more{};
  EXPECT_THAT(error_of([&] {
                silent.recv_exact(std::span(&more, 1), Wait::idle_for(Duration(5000)), "EOF");
              }),
              HasSubstr("closed"));
  es.server().stop();  // idempotent
}

// The slowloris fault: the handshake ran in the accept thread, so one silent connection held
// every other peer back for the whole handshake timeout (here 20 s, longer than the real peer
// waits).
TEST(ServerFaults, SilentConnectionDoesNotDelayARealPeer) {
  const PresharedKey key = PresharedKey::random();
  ChannelOptions server = fast_options();
  server.handshake_timeout = Duration(20000);
  EchoServer es(key, server);
  Socket silent = Socket::connect(es.endpoint(), Duration(2000));
  std::vector<std::byte> hello(wire::kHelloBytes);
  silent.recv_exact(hello, Wait::idle_for(Duration(5000)), "the worker's HELLO");

  ChannelOptions client = fast_options();
  client.handshake_timeout = Duration(5000);  // generous: only a failure waits this long
  auto ch = open_session(es.endpoint(), key, client, 1);
  EXPECT_EQ(echo(*ch, "prompt"), "prompt");
  // The silent connection is still open: the worker neither finished nor dropped it.
  pollfd p{silent.fd(), POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 0), 0);
  EXPECT_EQ(es.server().stats().connections_refused, 0u);
}

// The OPEN that follows the handshake falls under the same deadline: an authenticated client
// that never says what it wants is dropped after handshake_timeout, not io_timeout (20 s).
TEST(ServerFaults, HandshakeDeadlineCoversTheOpen) {
  const PresharedKey key = PresharedKey::random();
  ChannelOptions server = fast_options(Duration(20000));
  server.handshake_timeout = Duration(300);
  EchoServer es(key, server);
  auto idle = SecureChannel::connect(es.endpoint(), key, fast_options());
  ASSERT_TRUE(es.wait_for_log(1));
  EXPECT_TRUE(es.log_contains("no OPEN within the handshake deadline of 300ms")) << es.log()[0];
  EXPECT_THAT(error_of([&] { idle->recv(); }), HasSubstr("closed"));
  auto ch = open_session(es.endpoint(), key, fast_options(), 2);
  EXPECT_EQ(echo(*ch, "alive"), "alive");
}

// At most max_handshakes connections are authenticated at once; the next waits in the backlog
// until one of them ends (here: the silent ones time out) and is then served.
TEST(ServerFaults, HandshakesInFlightAreBoundedAndTheNextPeerWaitsItsTurn) {
  const PresharedKey key = PresharedKey::random();
  ChannelOptions server = fast_options();
  server.handshake_timeout = Duration(500);
  EchoServer es(key, server, /*max_handshakes=*/2);
  Socket silent1 = Socket::connect(es.endpoint(), Duration(2000));
  Socket silent2 = Socket::connect(es.endpoint(), Duration(2000));
  std::vector<std::byte> hello(wire::kHelloBytes);
  silent1.recv_exact(hello, Wait::idle_for(Duration(5000)), "the worker's HELLO");
  silent2.recv_exact(hello, Wait::idle_for(Duration(5000)), "the worker's HELLO");

  ChannelOptions client = fast_options();
  client.handshake_timeout = Duration(10000);
  auto ch = open_session(es.endpoint(), key, client, 3);
  EXPECT_EQ(echo(*ch, "served"), "served");
  // This peer's handshake could only start once a silent one had timed out and been logged.
  EXPECT_TRUE(es.log_contains("timed out after 500ms waiting for HELLO"));
}

}  // namespace
}  // namespace huddle::net
