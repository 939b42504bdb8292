// HPipe's Algorithms 1 and 2 (planner/hpipe_dp.h) against brute force on small random instances.
#include "planner/hpipe_dp.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

namespace huddle::hpipe {
namespace {

bool close(double a, double b) {
  return std::abs(a - b) <= 1e-12 * std::max({1.0, std::abs(a), std::abs(b)});
}

DistributionProblem random_problem(std::mt19937& rng, int units, int devices, bool tight_memory) {
  std::uniform_real_distribution<double> speed(0.5, 4.0), unit(0.1, 2.0), link(0.0, 1.5);
  std::uniform_int_distribution<std::int64_t> bytes(1, 10);
  DistributionProblem p;
  p.units = units;
  std::vector<double> work;
  for (int u = 0; u < units; ++u) work.push_back(unit(rng));
  for (int d = 0; d < devices; ++d) {
    const double s = speed(rng);
    std::vector<double> row;
    for (int u = 0; u < units; ++u) row.push_back(work[static_cast<std::size_t>(u)] / s);
    p.unit_s.push_back(row);
    std::vector<double> sends;
    for (int e = 0; e < devices; ++e) sends.push_back(d == e ? 0.0 : link(rng));
    p.transfer_s.push_back(sends);
    p.tail_s.push_back(d == 0 ? 0.0 : link(rng) / 4);
  }
  std::int64_t total = 0;
  for (int u = 0; u < units; ++u) {
    p.unit_bytes.push_back(bytes(rng));
    total += p.unit_bytes.back();
  }
  std::uniform_int_distribution<std::int64_t> budget(tight_memory ? 5 : total,
                                                     tight_memory ? total / 2 + 6 : 2 * total);
  for (int d = 0; d < devices; ++d) p.budget.push_back(budget(rng));
  return p;
}

void expect_valid(const DistributionProblem& p, const Distribution& d) {
  ASSERT_TRUE(d.feasible);
  ASSERT_EQ(d.order.size(), d.ranges.size());
  int next = 0;
  std::vector<bool> used(static_cast<std::size_t>(p.devices()), false);
  for (std::size_t s = 0; s < d.ranges.size(); ++s) {
    EXPECT_EQ(d.ranges[s].first, next);
    EXPECT_LT(d.ranges[s].first, d.ranges[s].second);
    next = d.ranges[s].second;
    EXPECT_FALSE(used[static_cast<std::size_t>(d.order[s])]) << "a device holds two stages";
    used[static_cast<std::size_t>(d.order[s])] = true;
    std::int64_t bytes = 0;
    for (int u = d.ranges[s].first; u < d.ranges[s].second; ++u)
      bytes += p.unit_bytes[static_cast<std::size_t>(u)];
    EXPECT_LE(bytes, p.budget[static_cast<std::size_t>(d.order[s])]);
  }
  EXPECT_EQ(next, p.units);
  // The reported figures are the assignment's.
  const Distribution again = evaluate_distribution(p, d.order, d.ranges);
  EXPECT_TRUE(close(again.bottleneck, d.bottleneck));
}

TEST(HpipeDistribution, FixedOrderEqualsBruteForce) {
  std::mt19937 rng(12);
  int feasible = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int units = 1 + trial % 8, devices = 1 + (trial / 8) % 4;
    const DistributionProblem p = random_problem(rng, units, devices, trial % 3 == 0);
    std::vector<int> order(static_cast<std::size_t>(devices));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    const Distribution dp = distribute_in_order(p, order);
    const Distribution brute = distribute_in_order_brute_force(p, order);
    ASSERT_EQ(dp.feasible, brute.feasible) << "trial " << trial;
    if (!dp.feasible) continue;
    ++feasible;
    expect_valid(p, dp);
    EXPECT_TRUE(close(dp.bottleneck, brute.bottleneck))
        << "trial " << trial << ": " << dp.bottleneck << " vs " << brute.bottleneck;
    // Stages follow the order given.
    std::size_t pos = 0;
    for (const int dev : dp.order) {
      while (pos < order.size() && order[pos] != dev) ++pos;
      EXPECT_LT(pos, order.size()) << "stage order differs from the device order";
    }
  }
  EXPECT_GT(feasible, 150);
}

TEST(HpipeDistribution, OrderSearchEqualsBruteForce) {
  std::mt19937 rng(7);
  int infeasible = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int units = 1 + trial % 8, devices = 1 + (trial / 8) % 4;
    const DistributionProblem p = random_problem(rng, units, devices, trial % 3 == 0);
    const Distribution dp = distribute(p);
    const Distribution brute = distribute_brute_force(p);
    ASSERT_EQ(dp.feasible, brute.feasible) << "trial " << trial;
    if (!dp.feasible) {
      ++infeasible;
      continue;
    }
    expect_valid(p, dp);
    EXPECT_TRUE(close(dp.bottleneck, brute.bottleneck))
        << "trial " << trial << ": " << dp.bottleneck << " vs " << brute.bottleneck;
  }
  EXPECT_GT(infeasible, 0);  // the tight-memory instances include refusals
}

TEST(HpipeDistribution, MemoryInfeasibleAndForcedSplits) {
  // Two units of 6 bytes; devices of 5 bytes cannot hold any: infeasible.
  DistributionProblem p;
  p.units = 2;
  p.unit_s = {{1, 1}, {1, 1}};
  p.transfer_s = {{0, 0.1}, {0.1, 0}};
  p.tail_s = {0, 0};
  p.unit_bytes = {6, 6};
  p.budget = {5, 5};
  EXPECT_FALSE(distribute(p).feasible);
  EXPECT_FALSE(distribute_brute_force(p).feasible);
  // 6-byte budgets: each device must take exactly one unit, although one device alone would be
  // faster (no transfer).
  p.budget = {6, 6};
  const Distribution d = distribute(p);
  ASSERT_TRUE(d.feasible);
  EXPECT_EQ(d.ranges.size(), 2u);
  EXPECT_NEAR(d.bottleneck, 1.1, 1e-12);
  // With room, the slow link keeps everything on one device.
  p.budget = {12, 12};
  p.transfer_s = {{0, 5}, {5, 0}};
  const Distribution one = distribute(p);
  ASSERT_TRUE(one.feasible);
  EXPECT_EQ(one.ranges.size(), 1u);
  EXPECT_NEAR(one.bottleneck, 2.0, 1e-12);
}

TEST(HpipeDistribution, OrderSearchBeatsTheFixedOrder) {
  // Devices 0 and 2 are fast and linked well to each other; device 1 is slow behind slow links.
  // The output goes back to device 0 (tail 0 there, 3 s from the others). In the given order
  // 0, 1, 2 (devices may be skipped) device 2 can only come after device 0 and must then send the
  // output over a slow link, so the best is device 0 alone (4 s); the search runs 2 then 0.
  DistributionProblem p;
  p.units = 4;
  p.unit_s = {{1, 1, 1, 1}, {4, 4, 4, 4}, {1, 1, 1, 1}};
  p.transfer_s = {{0, 3, 0.1}, {3, 0, 3}, {0.1, 3, 0}};
  p.tail_s = {0, 3, 3};
  p.unit_bytes = {1, 1, 1, 1};
  p.budget = {10, 10, 10};
  const Distribution fixed = distribute_in_order(p, {0, 1, 2});
  const Distribution searched = distribute(p);
  ASSERT_TRUE(fixed.feasible && searched.feasible);
  EXPECT_NEAR(fixed.bottleneck, 4.0, 1e-12);
  EXPECT_NEAR(searched.bottleneck, 2.1, 1e-12);  // two units on 2, then two on 0
  EXPECT_EQ(searched.order, (std::vector<int>{2, 0}));
  EXPECT_TRUE(close(searched.bottleneck, distribute_brute_force(p).bottleneck));
  EXPECT_TRUE(close(fixed.bottleneck, distribute_in_order_brute_force(p, {0, 1, 2}).bottleneck));
}

TEST(HpipeDistribution, HeuristicBeyondSixDevicesFindsAValidSplit) {
  std::mt19937 rng(3);
  const DistributionProblem p = random_problem(rng, 20, 8, false);
  const Distribution d = distribute(p);
  expect_valid(p, d);
  // Never worse than the given order.
  std::vector<int> order(8);
  std::iota(order.begin(), order.end(), 0);
  EXPECT_LE(d.bottleneck, distribute_in_order(p, order).bottleneck + 1e-12);
}

// Stage times growing with the tokens before the slice (attention over the cache), with a fixed
// cost per slice so that slicing has a price.
StageTime random_stage_time(std::mt19937& rng, int stages) {
  std::uniform_real_distribution<double> coef(0.01, 1.0);
  std::vector<double> fixed, per_token, per_pair;
  for (int i = 0; i < stages; ++i) {
    fixed.push_back(coef(rng));
    per_token.push_back(coef(rng));
    per_pair.push_back(coef(rng) / 10);
  }
  return [=](int i, int a, int b) {
    const auto s = static_cast<std::size_t>(i);
    const double len = b - a;
    return fixed[s] + per_token[s] * len + per_pair[s] * len * (a + b) / 2;
  };
}

TEST(HpipeSlicing, ExactEqualsBruteForceForEveryPrefix) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 120; ++trial) {
    const int stages = 1 + trial % 4, n = 1 + (trial * 7) % 16;
    const StageTime t = random_stage_time(rng, stages);
    const std::vector<Slicing> all = slice_all_lengths(stages, n, t);
    ASSERT_EQ(all.size(), static_cast<std::size_t>(n));
    for (int p = 1; p <= n; ++p) {
      const Slicing& s = all[static_cast<std::size_t>(p - 1)];
      EXPECT_EQ(std::accumulate(s.lengths.begin(), s.lengths.end(), 0), p);
      const BruteForceSlicing brute = slice_brute_force(stages, p, t);
      EXPECT_TRUE(close(s.min_bound, brute.min_bound))
          << "trial " << trial << " p " << p << ": " << s.min_bound << " vs " << brute.min_bound;
      // The chosen slicing's own figures, and the makespan within the bound.
      EXPECT_TRUE(close(s.makespan, flow_shop_makespan(stages, t, s.lengths)));
      EXPECT_TRUE(close(s.bound, slicing_bound(stages, t, s.lengths)));
      EXPECT_LE(s.makespan, s.bound * (1 + 1e-12));
      EXPECT_GE(s.makespan, brute.min_makespan * (1 - 1e-12));
      EXPECT_LE(s.makespan, flow_shop_makespan(stages, t, {p}) * (1 + 1e-12));
    }
  }
}

TEST(HpipeSlicing, RefinementOnlyLowersTheMakespan) {
  std::mt19937 rng(11);
  int lower = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const int stages = 2 + trial % 3, n = 4 + trial % 10;
    const StageTime t = random_stage_time(rng, stages);
    SlicingOptions refine;
    refine.refine = true;
    const std::vector<Slicing> plain = slice_all_lengths(stages, n, t);
    const std::vector<Slicing> refined = slice_all_lengths(stages, n, t, refine);
    for (int p = 1; p <= n; ++p) {
      const Slicing &a = plain[static_cast<std::size_t>(p - 1)],
                    &b = refined[static_cast<std::size_t>(p - 1)];
      EXPECT_EQ(std::accumulate(b.lengths.begin(), b.lengths.end(), 0), p);
      EXPECT_TRUE(close(b.makespan, flow_shop_makespan(stages, t, b.lengths)));
      EXPECT_TRUE(close(b.bound, slicing_bound(stages, t, b.lengths)));
      EXPECT_LE(b.makespan, a.makespan * (1 + 1e-12));
      EXPECT_TRUE(close(b.min_bound, a.min_bound));
      if (p <= 12) {
        EXPECT_GE(b.makespan, slice_brute_force(stages, p, t).min_makespan * (1 - 1e-12));
      }
      lower += b.makespan < a.makespan * (1 - 1e-9) ? 1 : 0;
    }
  }
  EXPECT_GT(lower, 0);  // the refinement finds something the bound's optima miss
}

TEST(HpipeSlicing, FlowShopByHand) {
  // Two stages, stage 0 takes 1 s a slice, stage 1 takes 2 s: 1 + 2 + 2 for two slices.
  const StageTime t = [](int i, int, int) { return i == 0 ? 1.0 : 2.0; };
  EXPECT_DOUBLE_EQ(flow_shop_makespan(2, t, {1, 1}), 5.0);
  EXPECT_DOUBLE_EQ(slicing_bound(2, t, {1, 1}), 2 + 2 + 2);
  EXPECT_DOUBLE_EQ(flow_shop_makespan(1, t, {1, 1, 1}), 3.0);
}

TEST(HpipeSlicing, SlicingPaysOnABalancedPipeline) {
  // Linear cost, four equal stages: slices overlap the stages, so the chosen makespan is well
  // below one slice's (4 x the whole prompt's stage time).
  const StageTime t = [](int, int a, int b) { return 0.001 + (b - a) * 1.0; };
  const std::vector<Slicing> all = slice_all_lengths(4, 16, t);
  const Slicing& s = all.back();
  EXPECT_GT(s.lengths.size(), 1u);
  EXPECT_LT(s.makespan, 0.5 * flow_shop_makespan(4, t, {16}));
}

TEST(HpipeSlicing, ApproximateModeStaysOnTheGranuleAndNeverLosesToOneSlice) {
  std::mt19937 rng(9);
  const StageTime t = random_stage_time(rng, 3);
  const std::vector<Slicing> exact = slice_all_lengths(3, 40, t);
  const std::vector<Slicing> coarse = slice_all_lengths(3, 40, t, {4, 16});
  for (int p = 1; p <= 40; ++p) {
    const Slicing& c = coarse[static_cast<std::size_t>(p - 1)];
    int start = 0;
    for (std::size_t j = 0; j + 1 < c.lengths.size(); ++j) {
      start += c.lengths[j];
      EXPECT_EQ(start % 4, 0) << "boundary off the granule at p " << p;
    }
    EXPECT_EQ(start + c.lengths.back(), p);
    EXPECT_LE(c.makespan, flow_shop_makespan(3, t, {p}) * (1 + 1e-12));
    EXPECT_GE(c.min_bound, exact[static_cast<std::size_t>(p - 1)].min_bound * (1 - 1e-12));
  }
}

}  // namespace
}  // namespace huddle::hpipe
