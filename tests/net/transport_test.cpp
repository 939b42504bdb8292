// Transport contract tests, run over both the in-process and the TCP transport.
#include "net/transport.h"

#include "net/server.h"
#include "net_test_util.h"
#include "test_cluster.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <random>

namespace huddle::net {
namespace {

using testing::bytes_of;
using testing::error_of;
using ::testing::HasSubstr;
using testing::run_ranks;
using testing::string_of;
using testing::TestCluster;
using testing::TransportKind;

class TransportTest : public ::testing::TestWithParam<TransportKind> {};

TEST_P(TransportTest, EveryPairExchangesMessagesInOrder) {
  constexpr int kRanks = 4;
  TestCluster cluster(GetParam(), kRanks);
  run_ranks(kRanks, [&](int r) {
    Transport& t = cluster.rank(r);
    EXPECT_EQ(t.rank(), r);
    EXPECT_EQ(t.size(), kRanks);
    // Send everything first (messages are small enough to be buffered), then receive.
    for (int p = 0; p < kRanks; ++p) {
      if (p == r) continue;
      for (int i = 0; i < 3; ++i)
        t.send(p, static_cast<std::uint32_t>(i), bytes_of(fmt::format("{}->{}#{}", r, p, i)));
    }
    for (int p = 0; p < kRanks; ++p) {
      if (p == r) continue;
      for (int i = 0; i < 3; ++i) {
        const Message m = t.recv(p);
        EXPECT_EQ(m.tag, static_cast<std::uint32_t>(i));
        EXPECT_EQ(string_of(m.payload), fmt::format("{}->{}#{}", p, r, i));
      }
    }
  });
}

TEST_P(TransportTest, RecvIntoChecksTagAndSize) {
  TestCluster cluster(GetParam(), 2);
  Transport& a = cluster.rank(0);
  Transport& b = cluster.rank(1);
  a.send(1, 5, bytes_of("12345678"));
  std::vector<std::byte> out(8);
  b.recv_into(0, 5, out);
  EXPECT_EQ(string_of(out), "12345678");
  a.send(1, 6, bytes_of("1234"));
  const std::string err = error_of([&] { b.recv_into(0, 7, out); });
  EXPECT_THAT(err, HasSubstr("expected message tag 7 of 8 bytes, got tag 6 with 4 bytes"));
  EXPECT_THAT(err, HasSubstr(b.peer_name(0)));
  EXPECT_THAT(err, HasSubstr("rank 0"));
}

TEST_P(TransportTest, SilentPeerTimesOutNamingIt) {
  TestCluster cluster(GetParam(), 3, Duration(300));
  const std::string err = error_of([&] { cluster.rank(0).recv(2); });
  EXPECT_THAT(err, HasSubstr("rank 2"));
  EXPECT_THAT(err, HasSubstr("timed out after 300ms"));
}

TEST_P(TransportTest, PeerKilledMidExchangeIsAnErrorNamingIt) {
  TestCluster cluster(GetParam(), 3, Duration(3000));
  Transport& t0 = cluster.rank(0);
  Transport& t1 = cluster.rank(1);
  t1.send(0, 1, bytes_of("first"));
  EXPECT_EQ(string_of(t0.recv(1).payload), "first");
  cluster.kill(1);
  const std::string err = error_of([&] { t0.recv(1); });
  EXPECT_THAT(err, HasSubstr("rank 1"));
  EXPECT_THAT(err, HasSubstr("closed"));
  EXPECT_THROW(t1.send(2, 1, bytes_of("late")), TransportError);
  // The other links are unaffected.
  cluster.rank(2).send(0, 3, bytes_of("fine"));
  EXPECT_EQ(string_of(t0.recv(2).payload), "fine");
}

TEST_P(TransportTest, ConcurrentSendersAndReceiversPerPeer) {
  constexpr int kRanks = 3;
  constexpr int kMessages = 40;
  TestCluster cluster(GetParam(), kRanks);
  run_ranks(kRanks, [&](int r) {
    Transport& t = cluster.rank(r);
    std::vector<std::thread> threads;
    std::atomic<int> failures{0};
    for (int p = 0; p < kRanks; ++p) {
      if (p == r) continue;
      threads.emplace_back([&, p] {  // sender to p
        std::mt19937 rng(static_cast<unsigned>(r * 100 + p));
        for (int i = 0; i < kMessages; ++i) {
          std::vector<std::byte> payload(rng() % 70000, static_cast<std::byte>(i));
          t.send(p, static_cast<std::uint32_t>(i), payload);
        }
      });
      threads.emplace_back([&, p] {  // receiver from p
        std::mt19937 rng(static_cast<unsigned>(p * 100 + r));
        for (int i = 0; i < kMessages; ++i) {
          const std::size_t n = rng() % 70000;
          std::vector<std::byte> out(n);
          t.recv_into(p, static_cast<std::uint32_t>(i), out);
          if (n > 0 &&
              (out.front() != static_cast<std::byte>(i) || out.back() != static_cast<std::byte>(i)))
            ++failures;
        }
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(failures.load(), 0);
  });
}

TEST_P(TransportTest, LinkEmulationKeepsOrder) {
  LinkEmulation link;
  link.latency = Duration(2);
  link.bytes_per_second = 50e6;
  TestCluster cluster(GetParam(), 2, Duration(5000), link);
  for (int i = 0; i < 5; ++i)
    cluster.rank(0).send(1, static_cast<std::uint32_t>(i), bytes_of(std::string(1000 * i, 'a')));
  for (int i = 0; i < 5; ++i) {
    const Message m = cluster.rank(1).recv(0);
    EXPECT_EQ(m.tag, static_cast<std::uint32_t>(i));
    EXPECT_EQ(m.payload.size(), 1000u * static_cast<unsigned>(i));
  }
}

TEST_P(TransportTest, CloseWakesABlockedReceiver) {
  TestCluster cluster(GetParam(), 2, Duration(60000));
  std::thread closer([&] {
    std::this_thread::sleep_for(Duration(20));
    cluster.rank(1).close();
  });
  EXPECT_THROW(cluster.rank(1).recv(0), TransportError);
  closer.join();
}

INSTANTIATE_TEST_SUITE_P(Kinds, TransportTest,
                         ::testing::Values(TransportKind::kInproc, TransportKind::kTcp),
                         [](const auto& param_info) {
                           return testing::kind_name(param_info.param);
                         });

TEST(InprocTransport, LinkEmulationComputesDelay) {
  LinkEmulation link;
  link.latency = Duration(3);
  link.bytes_per_second = 1e6;
  EXPECT_EQ(link.delay(0).count(), 3000);
  EXPECT_EQ(link.delay(1000).count(), 3000 + 1000);
  EXPECT_FALSE(LinkEmulation{}.active());
}

// The flow a runtime follows: a primary opens sessions on two workers, tells them the mesh,
// and the workers build their mesh link through their Servers.
TEST(TcpMesh, WorkersBuildTheirMeshThroughTheirServers) {
  const PresharedKey key = PresharedKey::random();
  constexpr std::uint64_t kSession = 1234;
  std::vector<std::unique_ptr<Server>> servers;
  std::vector<Endpoint> endpoints;
  std::atomic<int> exchanged{0};
  for (int w = 0; w < 2; ++w) {
    ServerOptions so;
    so.channel = testing::fast_options();
    so.log = [](const std::string&) {};
    servers.push_back(std::make_unique<Server>(
        Listener::bind(testing::loopback()), key, so,
        [&, w](SecureChannel& control, const OpenRequest& open, LinkAcceptor& links) {
          const Message plan = control.recv();  // "<rank>": the rank this worker has
          MeshConfig cfg;
          cfg.rank = std::stoi(string_of(plan.payload));
          cfg.endpoints.assign(endpoints.begin(), endpoints.end());
          cfg.session_id = open.session_id;
          cfg.channel = testing::fast_options();
          auto mesh = connect_mesh(cfg, key, &links);
          const int peer = 1 - cfg.rank;
          mesh->send(peer, 1, bytes_of(fmt::format("from worker {}", w)));
          const Message m = mesh->recv(peer);
          if (string_of(m.payload) == fmt::format("from worker {}", 1 - w)) ++exchanged;
          control.send(2, bytes_of("done"));
          control.recv();  // until the primary closes
        }));
    endpoints.push_back(testing::loopback(servers.back()->port()));
    servers.back()->start();
  }
  std::vector<std::unique_ptr<SecureChannel>> controls;
  for (int w = 0; w < 2; ++w) {
    controls.push_back(open_session(endpoints[static_cast<std::size_t>(w)], key,
                                    testing::fast_options(), kSession));
  }
  for (int w = 0; w < 2; ++w)
    controls[static_cast<std::size_t>(w)]->send(1, bytes_of(std::to_string(w)));
  for (int w = 0; w < 2; ++w)
    EXPECT_EQ(string_of(controls[static_cast<std::size_t>(w)]->recv().payload), "done");
  EXPECT_EQ(exchanged.load(), 2);
  // A link for another session is refused.
  EXPECT_THAT(error_of([&] { open_link(endpoints[0], key, testing::fast_options(), 999, 1, 2); }),
              HasSubstr("no session 999"));
  for (auto& c : controls) c->close("done");
}

// The runtime's shape of mesh: rank 0 has no listener and dials everyone; the others take its
// link and dial the lower ranks. Rank 2 starts late (its port is not even listening at first):
// the others' dials are refused and retried with backoff until it is up.
TEST(TcpMesh, ARankWithoutAListenerDialsEveryoneAndALateRankIsWaitedFor) {
  const PresharedKey key = PresharedKey::random();
  std::vector<std::optional<Listener>> listeners(3);
  listeners[1] = Listener::bind(testing::loopback());
  std::uint16_t late_port = 0;
  {
    const Listener probe = Listener::bind(testing::loopback());  // a port free a moment ago
    late_port = probe.port();
  }
  std::vector<std::optional<Endpoint>> endpoints = {
      std::nullopt, testing::loopback(listeners[1]->port()), testing::loopback(late_port)};
  std::vector<std::unique_ptr<TcpTransport>> mesh(3);
  std::atomic<bool> late_started{false};
  run_ranks(3, [&](int r) {
    MeshConfig cfg;
    cfg.rank = r;
    cfg.endpoints = endpoints;
    cfg.session_id = 5;
    cfg.channel = testing::fast_options();
    cfg.connect_timeout = Duration(20000);
    if (r == 0) {
      mesh[0] = connect_mesh(cfg, key, nullptr);
      return;
    }
    if (r == 2) {
      std::this_thread::sleep_for(Duration(300));
      listeners[2] = Listener::bind(testing::loopback(late_port));
      late_started.store(true);
    }
    ListenerAcceptor acceptor(*listeners[static_cast<std::size_t>(r)], key, cfg.channel);
    mesh[static_cast<std::size_t>(r)] = connect_mesh(cfg, key, &acceptor);
  });
  EXPECT_TRUE(late_started.load());
  run_ranks(3, [&](int r) {
    for (int p = 0; p < 3; ++p) {
      if (p != r) mesh[static_cast<std::size_t>(r)]->send(p, 3, bytes_of(std::to_string(r)));
    }
    for (int p = 0; p < 3; ++p) {
      if (p == r) continue;
      EXPECT_EQ(string_of(mesh[static_cast<std::size_t>(r)]->recv(p).payload), std::to_string(p));
    }
  });
  MeshConfig shape;
  shape.endpoints = endpoints;
  EXPECT_TRUE(dials(shape, 0, 2));
  EXPECT_TRUE(dials(shape, 2, 1));
  EXPECT_FALSE(dials(shape, 1, 2));
}

// A peer that never comes up: the dial gives up at the deadline, naming the peer and how often
// it tried; a bad key is not retried.
TEST(TcpMesh, DialGivesUpAtTheDeadlineAndNeverRetriesABadKey) {
  std::uint16_t dead_port = 0;
  {
    const Listener probe = Listener::bind(testing::loopback());
    dead_port = probe.port();
  }
  const PresharedKey key = PresharedKey::random();
  const std::string dead = error_of([&] {
    dial_with_retry(
        [&](const ChannelOptions& o) {
          return open_session(testing::loopback(dead_port), key, o, 1);
        },
        testing::fast_options(), Clock::now() + Duration(400), "open a session on the dead one");
  });
  EXPECT_THAT(dead, HasSubstr("cannot open a session on the dead one"));
  EXPECT_THAT(dead, HasSubstr("attempts in"));
  testing::EchoServer es(key);
  const std::string bad = error_of([&] {
    dial_with_retry(
        [&](const ChannelOptions& o) {
          return open_session(es.endpoint(), PresharedKey::random(), o, 1);
        },
        testing::fast_options(), Clock::now() + Duration(20000), "open a session");
  });
  EXPECT_THAT(bad, HasSubstr("bad key"));
  EXPECT_THAT(bad, HasSubstr("(1 attempt in"));
}

}  // namespace
}  // namespace huddle::net
