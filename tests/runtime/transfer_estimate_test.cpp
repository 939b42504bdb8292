// The profiler's transfer costs from receive durations alone (runtime/transfer_estimate.h):
// ping-pong samples made from a known link, T(n) = a + b n the same both ways, whose waits hold
// the rest of the earlier trip the other way.
#include "runtime/transfer_estimate.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace huddle::assign {
namespace {

constexpr double kLatency = 1.0e-3, kSecondsPerByte = 8.0e-9;  // 1 ms + 1 Gbit/s

double trip(std::int64_t bytes) {
  return kLatency + kSecondsPerByte * static_cast<double>(bytes);
}

// Classes 0, 1: primary -> remote and back, 196 KB; 2, 3: the same, 786 KB; 4: within the
// primary (cpu1 -> cpuN); 5: remote -> primary over another link (a second remote).
const std::vector<TripClass> kClasses = {{0, 196608}, {0, 196608},  {0, 786432},
                                         {0, 786432}, {-1, 196608}, {1, 196608}};

// A receive of class `da` whose wait held the rest of the trip `reverse` the other way, which its
// device had begun `lead` seconds before: raw = T(da) + T(reverse) - lead.
TransferSample round_trip(int da, int reverse, double lead) {
  const auto bytes = [](int c) { return kClasses[static_cast<std::size_t>(c)].bytes; };
  return {da, trip(bytes(da)) + trip(bytes(reverse)) - lead, reverse, lead};
}

TEST(TransferEstimate, APingPongOfTwoSizesRecoversEachOneWayTrip) {
  // One layer of GPT-2 with the linears remote: norm out (0), attention out back (1), norm out
  // (0), up-projection back (3), activation out (2), down-projection back (1).
  std::vector<TransferSample> samples;
  for (int layer = 0; layer < 12; ++layer) {
    samples.push_back(round_trip(1, 0, 2.4e-3));
    samples.push_back(round_trip(0, 1, 2.3e-3));
    samples.push_back(round_trip(3, 0, 2.5e-3));
    samples.push_back(round_trip(2, 3, 2.7e-3));
    samples.push_back(round_trip(1, 2, 3.0e-3));
    samples.push_back(round_trip(0, 1, 2.3e-3));
  }
  const std::vector<double> t = transfer_costs(samples, kClasses);
  ASSERT_EQ(t.size(), kClasses.size());
  for (int c = 0; c < 4; ++c) {
    EXPECT_NEAR(t[static_cast<std::size_t>(c)], trip(kClasses[static_cast<std::size_t>(c)].bytes),
                1e-6)
        << "class " << c;
  }
  EXPECT_EQ(t[4], -1);  // not between devices
  EXPECT_EQ(t[5], -1);  // its link has no samples
  // Taking a wait as one trip (the old estimate) priced the down-projection's 196 KB reply,
  // which waited out the rest of the 786 KB activation's trip, at 2.7x its time.
  EXPECT_GT(samples[4].raw_s, 2.5 * trip(196608));
}

TEST(TransferEstimate, OneWayTripsAreTheirOwnTimes) {
  std::vector<TransferSample> samples;
  for (int i = 0; i < 3; ++i) {
    samples.push_back({0, trip(196608), -1, 0});
    samples.push_back({3, trip(786432), -1, 0});
    samples.push_back({5, 2.0e-3, -1, 0});
  }
  const std::vector<double> t = transfer_costs(samples, kClasses);
  EXPECT_NEAR(t[0], trip(196608), 1e-6);
  EXPECT_NEAR(t[1], trip(196608), 1e-6);  // the other direction of the same link
  EXPECT_NEAR(t[3], trip(786432), 1e-6);
  EXPECT_NEAR(t[5], 2.0e-3, 1e-9);  // a link with one size: its latency term carries it
}

TEST(TransferEstimate, OneSizeBothWaysSplitsTheRoundTripInHalf) {
  // Round trips of one size cannot tell latency from bandwidth, nor one way from the other.
  std::vector<TransferSample> samples = {round_trip(1, 0, 2.0e-3), round_trip(0, 1, 2.0e-3)};
  samples[0].raw_s += 1.0e-3;  // one direction's receiver waited longer: still half each
  samples[1].raw_s -= 1.0e-3;
  const std::vector<double> t = transfer_costs(samples, kClasses);
  EXPECT_NEAR(t[0], trip(196608), 1e-6);
  EXPECT_NEAR(t[1], trip(196608), 1e-6);
  EXPECT_EQ(t[2], t[3]);
}

TEST(TransferEstimate, NegativeWaitsCostNothing) {
  // A receive shorter than the other side's ops (their charged times ran long) is no trip at all.
  const std::vector<double> t = transfer_costs({{0, -1.0e-3, -1, 0}}, kClasses);
  EXPECT_EQ(t[0], 0);
  EXPECT_EQ(t[1], 0);
}

}  // namespace
}  // namespace huddle::assign
