#include "net/socket.h"

#include "core/error.h"

#include <gtest/gtest.h>

#include <thread>

namespace huddle::net {
namespace {

TEST(Endpoint, ParsesHostPortAndBracketedV6) {
  Endpoint a = parse_endpoint("10.0.0.3:7000");
  EXPECT_EQ(a.host, "10.0.0.3");
  EXPECT_EQ(a.port, 7000);
  EXPECT_EQ(a.str(), "10.0.0.3:7000");
  Endpoint b = parse_endpoint("[::1]:65535");
  EXPECT_EQ(b.host, "::1");
  EXPECT_EQ(b.port, 65535);
  EXPECT_EQ(b.str(), "[::1]:65535");
  EXPECT_EQ(parse_endpoint("jetson.local:0").host, "jetson.local");
}

TEST(Endpoint, RejectsMalformedAddressesNamingThem) {
  for (const char* text : {"host", "host:", ":80", "host:65536", "host:-1", "host:8x", "::1:80",
                           "[::1]80", "[::1]", "[::1:80"}) {
    try {
      parse_endpoint(text);
      ADD_FAILURE() << "accepted " << text;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  }
}

TEST(Socket, ConnectToClosedPortNamesTheAddress) {
  std::uint16_t port = 0;
  {
    Listener l = Listener::bind(Endpoint{"127.0.0.1", 0});
    port = l.port();
  }  // closed again: nobody listens there now
  try {
    Socket::connect(Endpoint{"127.0.0.1", port}, Duration(1000));
    FAIL() << "connected to a closed port";
  } catch (const TransportError& e) {
    EXPECT_NE(std::string(e.what()).find(fmt::format("127.0.0.1:{}", port)), std::string::npos)
        << e.what();
  }
}

TEST(Socket, SendRecvAndPeerCloseMidMessage) {
  Listener l = Listener::bind(Endpoint{"127.0.0.1", 0});
  EXPECT_GT(l.port(), 0);
  Socket client = Socket::connect(Endpoint{"127.0.0.1", l.port()}, Duration(1000));
  std::optional<Socket> server = l.accept(Duration(1000));
  ASSERT_TRUE(server.has_value());
  const std::vector<std::byte> msg(5, std::byte{42});
  client.send_all(msg, Wait::idle_for(Duration(1000)), "test");
  std::vector<std::byte> got(5);
  server->recv_exact(got, Wait::idle_for(Duration(1000)), "test");
  EXPECT_EQ(got, msg);
  client.send_all(msg, Wait::idle_for(Duration(1000)), "test");
  client.close();
  std::vector<std::byte> more(8);
  try {
    server->recv_exact(more, Wait::idle_for(Duration(1000)), "eight bytes");
    FAIL() << "read past the peer's close";
  } catch (const TransportError& e) {
    EXPECT_NE(std::string(e.what()).find("after 5 of 8 bytes"), std::string::npos) << e.what();
  }
}

TEST(Socket, SilentPeerTimesOutNamingTheWait) {
  Listener l = Listener::bind(Endpoint{"127.0.0.1", 0});
  Socket client = Socket::connect(Endpoint{"127.0.0.1", l.port()}, Duration(1000));
  std::optional<Socket> server = l.accept(Duration(1000));
  ASSERT_TRUE(server.has_value());
  std::vector<std::byte> buf(4);
  try {
    server->recv_exact(buf, Wait::idle_for(Duration(300)), "a header");
    FAIL() << "no timeout";
  } catch (const TransportError& e) {
    EXPECT_NE(std::string(e.what()).find("timed out after 300ms waiting for a header"),
              std::string::npos)
        << e.what();
  }
}

TEST(Listener, AcceptTimesOutAndInterruptWakesIt) {
  Listener l = Listener::bind(Endpoint{"127.0.0.1", 0});
  EXPECT_FALSE(l.accept(Duration(50)).has_value());
  std::thread t([&] { l.interrupt(); });
  EXPECT_FALSE(l.accept(Duration(60000)).has_value());  // returns once interrupted
  t.join();
  EXPECT_TRUE(l.interrupted());
}

TEST(Socket, ShutdownWakesABlockedReceiver) {
  Listener l = Listener::bind(Endpoint{"127.0.0.1", 0});
  Socket client = Socket::connect(Endpoint{"127.0.0.1", l.port()}, Duration(1000));
  std::optional<Socket> server = l.accept(Duration(1000));
  ASSERT_TRUE(server.has_value());
  std::thread t([&] { server->shutdown(); });
  std::vector<std::byte> buf(4);
  EXPECT_THROW(server->recv_exact(buf, Wait::idle_for(Duration(60000)), "x"), TransportError);
  t.join();
}

}  // namespace
}  // namespace huddle::net
