// A primary's admission port (net/join_listener.h) and the JOIN exchange (net/join.h) over real
// loopback TCP: admitted workers are queued with the address to dial; a wrong key, another kind
// of OPEN and every malformed JOIN are refused with the reason, queue nothing, and leave the
// listener taking the next join.
#include "net/join.h"
#include "net/join_listener.h"
#include "net/session.h"

#include "net_test_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

namespace huddle::net {
namespace {

using testing::error_of;
using testing::fast_options;
using ::testing::HasSubstr;
using testing::loopback;

// A listener whose log is kept for assertions.
class AdmissionPort {
 public:
  explicit AdmissionPort(const PresharedKey& key, ChannelOptions options = fast_options())
      : listener_(Listener::bind(loopback()), key, options, [this](const std::string& line) {
          std::lock_guard lock(mutex_);
          log_.push_back(line);
        }) {
    listener_.start();
  }
  JoinListener& listener() { return listener_; }
  Endpoint endpoint() const { return loopback(listener_.port()); }
  // Waits (bounded) until the listener has refused `n` connections; false if it has not.
  bool refused_at_least(std::uint64_t n) {
    for (int i = 0; i < 500 && listener_.stats().refused < n; ++i)
      std::this_thread::sleep_for(Duration(10));
    return listener_.stats().refused >= n;
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> log_;
  JoinListener listener_;
};

// Sends OPEN of `kind` and, for a join, `payload` as the JOIN message; returns the error the
// primary's answer raised ("(no error)" when it admitted).
std::string join_with(const Endpoint& primary, const PresharedKey& key,
                      std::span<const std::byte> payload, std::uint32_t kind = 3,
                      std::uint32_t tag = wire::kTagJoin) {
  return error_of([&] {
    auto channel = SecureChannel::connect(primary, key, fast_options());
    wire::Open open;
    open.kind = kind;
    channel->send(wire::kTagOpen, wire::encode(open));
    if (kind == 3) channel->send(tag, payload);
    channel->recv();
  });
}

std::vector<std::byte> join_record(std::uint16_t port, std::string_view host,
                                   std::uint16_t host_bytes, std::uint32_t reserved = 0) {
  wire::Join j;
  j.port = port;
  j.host_bytes = host_bytes;
  j.reserved = reserved;
  const wire::JoinBytes record = wire::encode(j);
  std::vector<std::byte> out(record.begin(), record.end());
  for (const char c : host) out.push_back(std::byte(c));
  return out;
}

TEST(Join, AnnouncementLeavesAWildcardHostToThePrimary) {
  EXPECT_EQ(announcement_for(Endpoint{"0.0.0.0", 7001}).host, "");
  EXPECT_EQ(announcement_for(Endpoint{"::", 7001}).host, "");
  EXPECT_EQ(announcement_for(Endpoint{"10.0.0.5", 7001}).host, "10.0.0.5");
  EXPECT_EQ(announcement_for(Endpoint{"10.0.0.5", 7001}).port, 7001);
}

TEST(Join, AdmittedWorkersAreQueuedWithTheAddressToDial) {
  const PresharedKey key = PresharedKey::random();
  AdmissionPort port(key);
  // No host: the address the join came from.
  request_join(port.endpoint(), key, fast_options(), {"", 7001});
  request_join(port.endpoint(), key, fast_options(), {"10.1.2.3", 7002});
  request_join(port.endpoint(), key, fast_options(), {"", 7001});  // again: listed once
  EXPECT_EQ(port.listener().take(), (std::vector<std::string>{"127.0.0.1:7001", "10.1.2.3:7002"}));
  EXPECT_TRUE(port.listener().take().empty());
  EXPECT_EQ(port.listener().stats().admitted, 3u);
  EXPECT_EQ(port.listener().stats().refused, 0u);
}

TEST(Join, AWrongKeyIsRefusedAndNothingIsQueued) {
  const PresharedKey key = PresharedKey::random();
  AdmissionPort port(key);
  const std::string error = error_of([&] {
    request_join(port.endpoint(), PresharedKey::random(), fast_options(), {"", 7001});
  });
  EXPECT_THAT(error, HasSubstr("bad key"));
  EXPECT_TRUE(port.refused_at_least(1));
  EXPECT_TRUE(port.listener().take().empty());
  // The listener goes on.
  request_join(port.endpoint(), key, fast_options(), {"", 7003});
  EXPECT_EQ(port.listener().take(), std::vector<std::string>{"127.0.0.1:7003"});
}

TEST(Join, MalformedJoinsAreRefusedWithTheReason) {
  const PresharedKey key = PresharedKey::random();
  AdmissionPort port(key);
  const Endpoint at = port.endpoint();
  EXPECT_THAT(join_with(at, key, join_record(7001, "", 0), /*kind=*/1),
              HasSubstr("takes joins only"));
  EXPECT_THAT(join_with(at, key, join_record(0, "", 0)), HasSubstr("malformed join: port 0"));
  EXPECT_THAT(join_with(at, key, join_record(7001, "abc", 5)),
              HasSubstr("3 bytes for a host of 5"));
  EXPECT_THAT(join_with(at, key, join_record(7001, "", 0, 1)), HasSubstr("reserved"));
  EXPECT_THAT(join_with(at, key, join_record(7001, "a b", 3)), HasSubstr("not a name"));
  EXPECT_THAT(join_with(at, key, join_record(7001, "", 300)), HasSubstr("at most 255"));
  EXPECT_THAT(join_with(at, key, std::vector<std::byte>(4)), HasSubstr("fewer than"));
  EXPECT_THAT(join_with(at, key, join_record(7001, "", 0), 3, wire::kTagOpenAck),
              HasSubstr("expected tag"));
  // Longer than any JOIN: refused before it is read.
  EXPECT_NE(join_with(at, key, std::vector<std::byte>(1 << 16)), "(no error)");
  EXPECT_TRUE(port.refused_at_least(9));
  EXPECT_TRUE(port.listener().take().empty());
  EXPECT_EQ(port.listener().stats().admitted, 0u);
  request_join(at, key, fast_options(), {"", 7004});
  EXPECT_EQ(port.listener().take(), std::vector<std::string>{"127.0.0.1:7004"});
}

// Slowloris: clients that connect and stay silent hold one thread each until the deadline, not
// the port. The listener's deadline is 60 s, the joiner's own handshake gives up after 2 s: it
// completes only if the silent clients do not stand in its way.
TEST(Join, SilentClientsDelayNoOtherJoin) {
  const PresharedKey key = PresharedKey::random();
  ChannelOptions patient = fast_options();
  patient.handshake_timeout = Duration(60000);
  AdmissionPort port(key, patient);
  std::vector<Socket> silent;
  for (std::size_t i = 0; i + 1 < JoinListener::kMaxJoinHandshakes; ++i)
    silent.push_back(Socket::connect(port.endpoint(), Duration(2000)));
  request_join(port.endpoint(), key, fast_options(), {"", 7005});
  EXPECT_EQ(port.listener().take(), std::vector<std::string>{"127.0.0.1:7005"});
  port.listener().stop();  // wakes the silent clients' threads
  EXPECT_EQ(port.listener().stats().refused, silent.size());
}

TEST(Join, AWorkerRefusesAJoinAsAnUnknownKind) {
  const PresharedKey key = PresharedKey::random();
  testing::EchoServer worker(key);
  const std::string error = error_of([&] {
    request_join(worker.endpoint(), key, fast_options(), {"", 7001});
  });
  EXPECT_THAT(error, HasSubstr("unknown kind 3"));
}

}  // namespace
}  // namespace huddle::net
