#include "profile/link_probe.h"

#include "core/error.h"
#include "net/inproc_transport.h"

#include <gtest/gtest.h>

#include <thread>

namespace huddle::profile {
namespace {

TEST(LinkProbe, MeasuresAnEmulatedLink) {
  net::InprocOptions options;
  options.link.latency = net::Duration(2);
  options.link.bytes_per_second = 50e6;  // 400 Mbit/s
  net::InprocCluster cluster(2, options);
  std::thread echo([&] { echo_link(cluster.rank(1), 0, std::size_t{64} << 20); });
  LinkProbeOptions probe;
  probe.pings = 5;
  probe.min_transfer_s = 0.02;
  const LinkMeasurement m = measure_link(cluster.rank(0), 1, probe);
  echo.join();
  // Every message is delayed by at least the emulated latency and its size over the bandwidth,
  // so the probe can only see a slower link, never a faster one.
  EXPECT_GE(m.latency_s, 0.002);
  EXPECT_GT(m.bandwidth_bps, 0.0);
  EXPECT_LE(m.bandwidth_bps, 2 * 400e6);
  EXPECT_GT(m.duplex_bandwidth_bps, 0.0);
  EXPECT_LE(m.duplex_bandwidth_bps, m.bandwidth_bps);
  EXPECT_GE(m.bulk_bytes, std::size_t{64} << 10);
}

TEST(LinkProbe, EchoRefusesForeignMessages) {
  net::InprocCluster cluster(2);
  const std::vector<std::byte> junk(16);
  cluster.rank(0).send(1, 0x1234u, junk);
  try {
    echo_link(cluster.rank(1), 0, 1 << 20);
    FAIL() << "expected a TransportError";
  } catch (const TransportError& e) {
    EXPECT_NE(std::string(e.what()).find("unexpected tag 0x1234"), std::string::npos) << e.what();
  }
}

TEST(LinkProbe, EchoRefusesOversizedMessages) {
  net::InprocCluster cluster(2);
  const std::vector<std::byte> big(4096);
  cluster.rank(0).send(1, kLinkBulkTag, big);
  EXPECT_THROW(echo_link(cluster.rank(1), 0, 1024), TransportError);
}

}  // namespace
}  // namespace huddle::profile
