// ClientConnection over real sockets on 127.0.0.1: the accepted socket is found from the
// connection's addresses, and it tells a client that is there (silent, or sending more) from one
// that closed or reset the connection.
#include "serve/client_connection.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace huddle::serve {
namespace {

// A listener, a client connected to it and the accepted socket, with the accepted side's
// addresses as cpp-httplib would give them to a handler.
struct ConnectedPair {
  int listener = -1, client = -1, accepted = -1;
  int local_port = 0, remote_port = 0;

  ConnectedPair() {
    listener = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    EXPECT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(listener, 4), 0);
    EXPECT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    local_port = ntohs(addr.sin_port);
    client = ::socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_EQ(::connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    len = sizeof addr;
    EXPECT_EQ(::getsockname(client, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    remote_port = ntohs(addr.sin_port);
    accepted = ::accept(listener, nullptr, nullptr);
    EXPECT_GE(accepted, 0);
  }
  ~ConnectedPair() {
    for (int fd : {listener, client, accepted})
      if (fd >= 0) ::close(fd);
  }
  int find() const {
    return ClientConnection::find_socket("127.0.0.1", remote_port, "127.0.0.1", local_port);
  }
};

TEST(ClientConnection, FindsTheAcceptedSocketNotTheClientsOrTheListeners) {
  ConnectedPair pair;
  EXPECT_EQ(pair.find(), pair.accepted);
  // Another remote port, or another local one: no such connection.
  EXPECT_EQ(
      ClientConnection::find_socket("127.0.0.1", pair.local_port, "127.0.0.1", pair.remote_port),
      pair.client);  // the same test is the client's socket, seen from its side
  EXPECT_EQ(ClientConnection::find_socket("127.0.0.1", pair.remote_port + 1, "127.0.0.1",
                                          pair.local_port),
            -1);
  EXPECT_EQ(
      ClientConnection::find_socket("127.0.0.2", pair.remote_port, "127.0.0.1", pair.local_port),
      -1);
  EXPECT_EQ(ClientConnection::find_socket("", -1, "", -1), -1);
}

TEST(ClientConnection, GoneOnlyOnceTheClientClosesOrResets) {
  for (const bool reset : {false, true}) {
    ConnectedPair pair;
    // What a handler holds: the connection found through its request's addresses.
    httplib::Request req;
    req.remote_addr = "127.0.0.1";
    req.remote_port = pair.remote_port;
    req.local_addr = "127.0.0.1";
    req.local_port = pair.local_port;
    const ClientConnection connection(req);
    ASSERT_TRUE(connection.found());
    EXPECT_FALSE(connection.gone()) << "a silent client is there";
    ASSERT_EQ(::send(pair.client, "GET", 3, MSG_NOSIGNAL), 3);
    EXPECT_FALSE(connection.gone()) << "a client that sent more (a pipelined request) is there";
    // cpp-httplib has read the request by the time its handler runs.
    char buf[8];
    ASSERT_EQ(::recv(pair.accepted, buf, sizeof buf, 0), 3);
    EXPECT_FALSE(connection.gone());
    if (reset) {
      linger hard{1, 0};  // close with a reset (RST) instead of an orderly end of stream
      ASSERT_EQ(::setsockopt(pair.client, SOL_SOCKET, SO_LINGER, &hard, sizeof hard), 0);
    }
    ::close(pair.client);
    pair.client = -1;
    EXPECT_TRUE(connection.gone()) << (reset ? "reset" : "closed");
  }
  httplib::Request unknown;  // no addresses (not a TCP connection this process holds)
  EXPECT_FALSE(ClientConnection(unknown).found());
  EXPECT_FALSE(ClientConnection(unknown).gone());
}

}  // namespace
}  // namespace huddle::serve
