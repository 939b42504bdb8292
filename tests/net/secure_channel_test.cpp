// Handshake, framing and hostile-peer tests for SecureChannel and the worker Server.
#include "net/secure_channel.h"
#include "net/channel_cost.h"

#include "net_test_util.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sodium.h>
#include <sys/socket.h>
#include <chrono>
#include <thread>

namespace huddle::net {
namespace {

using testing::bytes_of;
using testing::echo;
using testing::EchoServer;
using testing::error_of;
using testing::fast_options;
using ::testing::HasSubstr;
using testing::loopback;
using testing::Relay;
using testing::string_of;

// Channel pair over loopback without a Server: (initiator, responder).
std::pair<std::unique_ptr<SecureChannel>, std::unique_ptr<SecureChannel>> channel_pair(
    const PresharedKey& key, ChannelOptions options = fast_options()) {
  Listener l = Listener::bind(loopback());
  std::unique_ptr<SecureChannel> responder;
  std::string error;
  std::thread t([&] {
    try {
      std::optional<Socket> s = l.accept(Duration(2000));
      if (s) responder = SecureChannel::respond(std::move(*s), key, options);
    } catch (const Error& e) {
      error = e.what();
    }
  });
  auto initiator = SecureChannel::connect(loopback(l.port()), key, options);
  t.join();
  if (!responder) throw TransportError("responder failed: " + error);
  return {std::move(initiator), std::move(responder)};
}

TEST(SecureChannel, HandshakeAndMessagesBothWays) {
  const PresharedKey key = PresharedKey::random();
  auto [a, b] = channel_pair(key);
  a->send(1, bytes_of("hello"));
  Message m = b->recv();
  EXPECT_EQ(m.tag, 1u);
  EXPECT_EQ(string_of(m.payload), "hello");
  b->send(2, {});
  m = a->recv();
  EXPECT_EQ(m.tag, 2u);
  EXPECT_TRUE(m.payload.empty());
}

TEST(SecureChannel, LargeMessagesAreSplitAndReassembled) {
  ChannelOptions o = fast_options();
  o.send_frame_bytes = 4096;
  auto [a, b] = channel_pair(PresharedKey::random(), o);
  std::vector<std::byte> big(3 * 4096 + 17);
  randombytes_buf(big.data(), big.size());
  std::thread sender([&, &a = a] {
    a->send(5, big);
    a->send(6, big);
  });
  EXPECT_EQ(b->recv().payload, big);
  std::vector<std::byte> into(big.size());
  b->recv_into(6, into);
  EXPECT_EQ(into, big);
  sender.join();
}

TEST(SecureChannel, RecvIntoRefusesWrongTagOrSizeAndStaysBroken) {
  auto [a, b] = channel_pair(PresharedKey::random());
  a->send(3, bytes_of("abcd"));
  std::vector<std::byte> out(8);
  EXPECT_THAT(error_of([&, &b = b] { b->recv_into(3, out); }),
              HasSubstr("expected message tag 3 of 8 bytes, got tag 3 with 4 bytes"));
  EXPECT_TRUE(b->broken());
  EXPECT_THAT(error_of([&, &b = b] { b->recv(); }), HasSubstr("unusable after an earlier error"));
}

TEST(SecureChannel, CloseReasonReachesThePeer) {
  auto [a, b] = channel_pair(PresharedKey::random());
  a->close("done for today");
  EXPECT_THAT(error_of([&, &b = b] { b->recv(); }),
              HasSubstr("peer closed the connection: done for today"));
}

TEST(SecureChannel, SilentPeerTimesOutWithinTheConfiguredTimeout) {
  auto [a, b] = channel_pair(PresharedKey::random(), fast_options(Duration(300)));
  const std::string err = error_of([&, &b = b] { b->recv(); });
  EXPECT_THAT(err, HasSubstr("timed out after 300ms"));
  EXPECT_THAT(err, HasSubstr("127.0.0.1"));
}

TEST(SecureChannel, PeerGoneMidExchangeIsAnErrorNamingIt) {
  auto [a, b] = channel_pair(PresharedKey::random());
  b->set_name("rank 3 (test)");
  a->send(1, bytes_of("x"));
  a.reset();  // the process "dies": socket closed without a Close frame
  EXPECT_EQ(string_of(b->recv().payload), "x");
  const std::string err = error_of([&, &b = b] { b->recv(); });
  EXPECT_THAT(err, HasSubstr("rank 3 (test)"));
  EXPECT_THAT(err, HasSubstr("closed"));
}

TEST(SecureChannel, ShutdownWakesABlockedReceiver) {
  auto [a, b] = channel_pair(PresharedKey::random(), fast_options(Duration(60000)));
  std::thread t([&, &b = b] { b->shutdown(); });
  EXPECT_THROW(b->recv(), TransportError);
  t.join();
}

// ---- Server: authentication and hostile clients ----

TEST(Server, ServesASession) {
  const PresharedKey key = PresharedKey::random();
  EchoServer es(key);
  auto ch = open_session(es.endpoint(), key, fast_options(), 1);
  EXPECT_EQ(echo(*ch, "ping"), "ping");
}

TEST(Server, WrongKeyIsRefusedAndServerKeepsServing) {
  const PresharedKey key = PresharedKey::random();
  EchoServer es(key);
  const std::string err =
      error_of([&] { open_session(es.endpoint(), PresharedKey::random(), fast_options(), 1); });
  EXPECT_THAT(err, HasSubstr("bad key"));
  ASSERT_TRUE(es.wait_for_log(1));
  EXPECT_TRUE(es.log_contains("bad key")) << es.log()[0];
  EXPECT_EQ(es.server().stats().connections_refused, 1u);
  auto ch = open_session(es.endpoint(), key, fast_options(), 2);
  EXPECT_EQ(echo(*ch, "still here"), "still here");
}

TEST(Server, SecondSessionIsRefusedAsBusy) {
  const PresharedKey key = PresharedKey::random();
  EchoServer es(key);
  auto first = open_session(es.endpoint(), key, fast_options(), 1);
  EXPECT_THAT(error_of([&] { open_session(es.endpoint(), key, fast_options(), 2); }),
              HasSubstr("busy"));
  EXPECT_EQ(echo(*first, "a"), "a");
  first->close("bye");
  first.reset();
  // Once the first session has ended, a new one is served.
  std::unique_ptr<SecureChannel> next;
  for (int i = 0; i < 200 && !next; ++i) {
    try {
      next = open_session(es.endpoint(), key, fast_options(), 3);
    } catch (const TransportError&) {
      std::this_thread::sleep_for(Duration(10));
    }
  }
  ASSERT_TRUE(next);
  EXPECT_EQ(echo(*next, "b"), "b");
}

TEST(Server, HandlerFailureIsLoggedAndServerKeepsServing) {
  const PresharedKey key = PresharedKey::random();
  EchoServer es(key);
  {
    auto ch = open_session(es.endpoint(), key, fast_options(), 1);
    ch->send(999, {});
    EXPECT_THAT(error_of([&] { ch->recv(); }), HasSubstr("handler failure requested"));
  }
  ASSERT_TRUE(es.wait_for_log(1));
  EXPECT_TRUE(es.log_contains("handler failure requested"));
  std::unique_ptr<SecureChannel> ch;
  for (int i = 0; i < 200 && !ch; ++i) {
    try {
      ch = open_session(es.endpoint(), key, fast_options(), 2);
    } catch (const TransportError&) {
      std::this_thread::sleep_for(Duration(10));
    }
  }
  ASSERT_TRUE(ch);
  EXPECT_EQ(echo(*ch, "ok"), "ok");
  EXPECT_EQ(es.server().stats().sessions_failed, 1u);
}

// Sends raw bytes to the server, then checks that it logged `expected` and still serves.
void expect_refused_then_serving(EchoServer& es, const PresharedKey& key,
                                 const std::vector<std::byte>& raw, std::string_view expected,
                                 bool half_close = true) {
  const std::size_t before = es.log().size();
  {
    Socket s = Socket::connect(es.endpoint(), Duration(1000));
    s.send_all(raw, Wait::idle_for(Duration(1000)), "raw bytes");
    if (half_close) ::shutdown(s.fd(), SHUT_WR);
    std::vector<std::byte> sink(4096);
    try {  // read until the server hangs up (it sends its HELLO first)
      for (;;) s.recv_exact(std::span(sink).first(1), Wait::idle_for(Duration(3000)), "reply");
    } catch (const TransportError&) {
    }
  }
  ASSERT_TRUE(es.wait_for_log(before + 1));
  EXPECT_TRUE(es.log_contains(expected)) << es.log().back();
  auto ch = open_session(es.endpoint(), key, fast_options(), 42);
  EXPECT_EQ(echo(*ch, "alive"), "alive");
}

TEST(Server, RandomBytesAreRefused) {
  const PresharedKey key = PresharedKey::random();
  EchoServer es(key);
  std::vector<std::byte> junk(1000);
  randombytes_buf(junk.data(), junk.size());
  junk[0] = std::byte{'G'};  // never the magic by chance
  expect_refused_then_serving(es, key, junk, "not a huddle peer");
}

TEST(Server, HttpRequestIsRefused) {
  const PresharedKey key = PresharedKey::random();
  EchoServer es(key);
  expect_refused_then_serving(es, key, bytes_of("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
                              "not a huddle peer (first bytes 47 45 54 20");
}

TEST(Server, TruncatedHelloIsRefused) {
  const PresharedKey key = PresharedKey::random();
  EchoServer es(key);
  wire::Hello h;
  const wire::HelloBytes full = wire::encode(h);
  expect_refused_then_serving(es, key, {full.begin(), full.begin() + 30},
                              "peer closed the connection after 22 of 64 bytes of HELLO");
}

TEST(Server, FutureVersionHelloIsRefusedNamingBothVersions) {
  const PresharedKey key = PresharedKey::random();
  EchoServer es(key);
  wire::Hello h;
  h.version = wire::kProtocolVersion + 1;
  const wire::HelloBytes hello = wire::encode(h);
  expect_refused_then_serving(es, key, {hello.begin(), hello.end()},
                              fmt::format("protocol version {} not supported (this is {})",
                                          h.version, wire::kProtocolVersion));
}

TEST(Server, ClientSeesTheServersVersion) {
  // A "future" server: answers any connection with a HELLO of the next version.
  Listener l = Listener::bind(loopback());
  std::thread t([&] {
    std::optional<Socket> s = l.accept(Duration(2000));
    if (!s) return;
    wire::Hello h;
    h.version = wire::kProtocolVersion + 1;
    h.role = wire::Role::kResponder;
    try {
      s->send_all(wire::encode(h), Wait::idle_for(Duration(1000)), "HELLO");
      std::vector<std::byte> sink(wire::kHelloBytes);
      s->recv_exact(sink, Wait::idle_for(Duration(1000)), "HELLO");
    } catch (const Error&) {
    }
  });
  const std::string err = error_of(
      [&] { SecureChannel::connect(loopback(l.port()), PresharedKey::random(), fast_options()); });
  t.join();
  EXPECT_THAT(err, HasSubstr(fmt::format("protocol version {} not supported (this is {})",
                                         wire::kProtocolVersion + 1, wire::kProtocolVersion)));
}

TEST(Server, HelloWithWrongRoleIsRefused) {
  const PresharedKey key = PresharedKey::random();
  EchoServer es(key);
  wire::Hello h;
  h.role = wire::Role::kResponder;  // a reflected server HELLO
  const wire::HelloBytes hello = wire::encode(h);
  expect_refused_then_serving(es, key, {hello.begin(), hello.end()}, "HELLO has role 2");
}

TEST(Server, SilentClientTimesOutAndServerKeepsServing) {
  const PresharedKey key = PresharedKey::random();
  ChannelOptions o = fast_options();
  o.handshake_timeout = Duration(300);
  EchoServer es(key, o);
  Socket silent = Socket::connect(es.endpoint(), Duration(1000));
  ASSERT_TRUE(es.wait_for_log(1));
  EXPECT_TRUE(es.log_contains("timed out after 300ms waiting for HELLO")) << es.log()[0];
  auto ch = open_session(es.endpoint(), key, fast_options(), 1);
  EXPECT_EQ(echo(*ch, "alive"), "alive");
}

// ---- tampering on the wire (a man in the middle without the key) ----

using testing::RelayAction;

// Opens a session through a relay that applies `rewrite` to the client's frames, sends "one",
// "two", "three" (frames 1-3; frame 0 is OPEN) without waiting, and returns the server's first
// log line. Also checks that the server still serves an honest client afterwards.
std::string server_error_through_relay(const Relay::Rewrite& rewrite) {
  const PresharedKey key = PresharedKey::random();
  EchoServer es(key);
  {
    Relay relay(es.endpoint(), rewrite);
    try {
      auto ch = open_session(relay.endpoint(), key, fast_options(), 5);
      for (const char* text : {"one", "two", "three"}) ch->send(7, bytes_of(text));
      for (int i = 0; i < 3; ++i) ch->recv();
    } catch (const TransportError&) {
    }
  }
  if (!es.wait_for_log(1)) return "(server logged nothing)";
  const std::string line = es.log()[0];
  // The server logs the failure before it finishes closing that session; until then a new
  // session is refused as busy. Retry for a bounded time.
  for (int attempt = 0; attempt < 100; ++attempt) {
    try {
      auto ch = open_session(es.endpoint(), key, fast_options(), 6);
      if (echo(*ch, "x") != "x") return "(server stopped serving)";
      return line;
    } catch (const TransportError& e) {
      if (std::string(e.what()).find("busy") == std::string::npos) throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  return "(server stayed busy)";
}

RelayAction pass(std::vector<std::byte> f) {
  return RelayAction{{std::move(f)}, false};
}

TEST(Tampering, FlippedCiphertextBitFailsAuthentication) {
  const std::string line = server_error_through_relay([](int i, std::vector<std::byte> f) {
    if (i == 1) f[wire::kFrameHeaderBytes] ^= std::byte{1};
    return pass(std::move(f));
  });
  EXPECT_THAT(line, HasSubstr("authentication tag mismatch"));
}

TEST(Tampering, ChangedHeaderTagFailsAuthentication) {
  const std::string line = server_error_through_relay([](int i, std::vector<std::byte> f) {
    if (i == 1) f[8] ^= std::byte{0x10};  // the message tag is associated data
    return pass(std::move(f));
  });
  EXPECT_THAT(line, HasSubstr("authentication tag mismatch"));
}

TEST(Tampering, ReplayedFrameFails) {
  const std::string line = server_error_through_relay([](int i, std::vector<std::byte> f) {
    if (i == 1) return RelayAction{{f, f}, false};
    return pass(std::move(f));
  });
  EXPECT_THAT(line, HasSubstr("authentication tag mismatch on frame 2"));
}

TEST(Tampering, DroppedFrameFails) {
  const std::string line = server_error_through_relay([](int i, std::vector<std::byte> f) {
    if (i == 1) return RelayAction{};
    return pass(std::move(f));
  });
  // Frame 2 arrives where frame 1 was expected: wrong counter.
  EXPECT_THAT(line, HasSubstr("authentication tag mismatch on frame 1"));
}

TEST(Tampering, ReorderedFramesFail) {
  std::vector<std::byte> held;
  const std::string line = server_error_through_relay([&](int i, std::vector<std::byte> f) {
    if (i == 1) {
      held = std::move(f);
      return RelayAction{};
    }
    if (i == 2) return RelayAction{{f, held}, false};
    return pass(std::move(f));
  });
  EXPECT_THAT(line, HasSubstr("authentication tag mismatch on frame 1"));
}

TEST(Tampering, OversizedLengthPrefixIsRefusedBeforeAllocating) {
  const std::string line = server_error_through_relay([](int i, std::vector<std::byte> f) {
    if (i == 1) wire::store_le<std::uint32_t>(f.data(), 0xFFFFFFF0u);
    return pass(std::move(f));
  });
  EXPECT_THAT(line, HasSubstr("frame of 4294967280 bytes exceeds the limit of 16777216 bytes"));
}

TEST(Tampering, UnknownFrameKindIsRefused) {
  const std::string line = server_error_through_relay([](int i, std::vector<std::byte> f) {
    if (i == 1) wire::store_le<std::uint16_t>(f.data() + 4, 77);
    return pass(std::move(f));
  });
  EXPECT_THAT(line, HasSubstr("unknown kind 77"));
}

TEST(Tampering, EmptyFrameMarkedMoreIsRefused) {
  const std::string line = server_error_through_relay([](int i, std::vector<std::byte> f) {
    if (i == 1) {
      wire::store_le<std::uint32_t>(f.data(), 0);
      wire::store_le<std::uint16_t>(f.data() + 6, wire::kFlagMore);
    }
    return pass(std::move(f));
  });
  EXPECT_THAT(line, HasSubstr("empty frame marked 'more'"));
}

TEST(Tampering, TruncatedFrameThenCloseIsAnError) {
  const std::string line = server_error_through_relay([](int i, std::vector<std::byte> f) {
    if (i == 1) {
      f.resize(f.size() - 5);
      return RelayAction{{f}, true};
    }
    return pass(std::move(f));
  });
  EXPECT_THAT(line, HasSubstr("peer closed the connection after"));
}

// The channel's CPU cost per byte (what `huddle profile` reports as comm_cpu_ns_per_byte): a
// positive, finite figure, and messages too small to amortise a frame's fixed work cost more per
// byte than large ones.
TEST(SecureChannel, CpuCostPerByteIsMeasured) {
  const double large = measure_channel_cpu_s_per_byte(std::size_t{1} << 20, 0.02);
  const double tiny = measure_channel_cpu_s_per_byte(16, 0.02);
  EXPECT_GT(large, 0.0);
  EXPECT_LT(large, 1e-6);  // under a microsecond a byte: far above what any CPU sealing takes
  EXPECT_GT(tiny, large);
}

}  // namespace
}  // namespace huddle::net
