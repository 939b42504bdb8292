#include "planner/hpipe_dp.h"

#include "core/error.h"
#include "plan/pipeline.h"
#include "planner/constants.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace huddle::hpipe {
namespace {

// Lexicographic objective of Algorithm 1: bottleneck first, then the sum of stage times.
struct Score {
  double bottleneck = kInf;
  double total = kInf;
  bool better_than(const Score& o) const {
    return bottleneck < o.bottleneck || (bottleneck == o.bottleneck && total < o.total);
  }
};

// Prefix sums of unit seconds per device and of unit bytes.
struct Prefix {
  std::vector<std::vector<double>> seconds;  // [D][U+1]
  std::vector<std::int64_t> bytes;           // [U+1]
  explicit Prefix(const DistributionProblem& p) {
    const auto U = static_cast<std::size_t>(p.units);
    for (const auto& row : p.unit_s) {
      HUDDLE_CHECK(row.size() == U, "unit_s rows need one entry per unit");
      std::vector<double> s(U + 1, 0.0);
      for (std::size_t u = 0; u < U; ++u) s[u + 1] = s[u] + row[u];
      seconds.push_back(std::move(s));
    }
    HUDDLE_CHECK(p.unit_bytes.size() == U, "unit_bytes needs one entry per unit");
    bytes.assign(U + 1, 0);
    for (std::size_t u = 0; u < U; ++u) bytes[u + 1] = bytes[u] + p.unit_bytes[u];
  }
  double compute(int d, int a, int b) const {
    const auto& s = seconds[static_cast<std::size_t>(d)];
    return s[static_cast<std::size_t>(b)] - s[static_cast<std::size_t>(a)];
  }
  std::int64_t range_bytes(int a, int b) const {
    return bytes[static_cast<std::size_t>(b)] - bytes[static_cast<std::size_t>(a)];
  }
};

void check_problem(const DistributionProblem& p) {
  const auto D = static_cast<std::size_t>(p.devices());
  HUDDLE_CHECK(p.units >= 1 && D >= 1, "a distribution needs units and devices");
  HUDDLE_CHECK(p.transfer_s.size() == D && p.tail_s.size() == D && p.budget.size() == D,
               "transfer_s, tail_s and budget need one entry per device");
  for (const auto& row : p.transfer_s) HUDDLE_CHECK(row.size() == D, "transfer_s is D x D");
}

Distribution finish(Distribution d) {
  d.bottleneck = 0;
  d.total = 0;
  for (const double s : d.stage_s) {
    d.bottleneck = std::max(d.bottleneck, s);
    d.total += s;
  }
  return d;
}

Distribution better(Distribution a, Distribution b) {
  if (!b.feasible) return a;
  if (!a.feasible) return b;
  const Score sa{a.bottleneck, a.total}, sb{b.bottleneck, b.total};
  return sb.better_than(sa) ? b : a;
}

// Device speed for the heuristic order: total compute of all units.
std::vector<int> by_speed(const DistributionProblem& p) {
  std::vector<int> order(static_cast<std::size_t>(p.devices()));
  std::iota(order.begin(), order.end(), 0);
  const auto total = [&](int d) {
    const auto& row = p.unit_s[static_cast<std::size_t>(d)];
    return std::accumulate(row.begin(), row.end(), 0.0);
  };
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return total(a) < total(b); });
  return order;
}

// Pairwise swaps while they improve the objective.
Distribution improve_by_swaps(const DistributionProblem& p, std::vector<int> order) {
  Distribution best = distribute_in_order(p, order);
  bool improved = true;
  while (improved) {
    improved = false;
    for (std::size_t i = 0; i < order.size(); ++i) {
      for (std::size_t j = i + 1; j < order.size(); ++j) {
        std::swap(order[i], order[j]);
        const Distribution d = distribute_in_order(p, order);
        if (d.feasible && (!best.feasible || Score{d.bottleneck, d.total}.better_than(
                                                 Score{best.bottleneck, best.total}))) {
          best = d;
          improved = true;
        } else {
          std::swap(order[i], order[j]);
        }
      }
    }
  }
  return best;
}

}  // namespace

Distribution evaluate_distribution(const DistributionProblem& p, const std::vector<int>& order,
                                   const std::vector<std::pair<int, int>>& ranges) {
  check_problem(p);
  HUDDLE_CHECK(order.size() == ranges.size() && !order.empty());
  const Prefix pre(p);
  Distribution d;
  d.feasible = true;
  d.order = order;
  d.ranges = ranges;
  for (std::size_t s = 0; s < order.size(); ++s) {
    const int dev = order[s];
    const auto [a, b] = ranges[s];
    double t = pre.compute(dev, a, b);
    const auto udev = static_cast<std::size_t>(dev);
    t += s + 1 < order.size() ? p.transfer_s[udev][static_cast<std::size_t>(order[s + 1])]
                              : p.tail_s[udev];
    d.stage_s.push_back(t);
  }
  return finish(std::move(d));
}

Distribution distribute_in_order(const DistributionProblem& p, const std::vector<int>& order) {
  check_problem(p);
  const Prefix pre(p);
  const int U = p.units, K = static_cast<int>(order.size());
  // V[a][m]: units [a, U) with order[m] taking [a, next) non-empty; next[a][m] = (b, m') with
  // m' = K when b = U.
  std::vector<std::vector<Score>> V(static_cast<std::size_t>(U),
                                    std::vector<Score>(static_cast<std::size_t>(K)));
  std::vector<std::vector<std::pair<int, int>>> next(
      static_cast<std::size_t>(U), std::vector<std::pair<int, int>>(static_cast<std::size_t>(K)));
  for (int a = U - 1; a >= 0; --a) {
    for (int m = 0; m < K; ++m) {
      const int dev = order[static_cast<std::size_t>(m)];
      const auto udev = static_cast<std::size_t>(dev);
      Score best;
      std::pair<int, int> arg{-1, -1};
      for (int b = a + 1; b <= U; ++b) {
        if (pre.range_bytes(a, b) > p.budget[udev]) break;  // bytes only grow with b
        const double comp = pre.compute(dev, a, b);
        if (b == U) {
          const double st = comp + p.tail_s[udev];
          const Score s{st, st};
          if (s.better_than(best)) best = s, arg = {b, K};
          continue;
        }
        for (int m2 = m + 1; m2 < K; ++m2) {
          const Score& rest = V[static_cast<std::size_t>(b)][static_cast<std::size_t>(m2)];
          if (rest.bottleneck == kInf) continue;
          const double st =
              comp +
              p.transfer_s[udev][static_cast<std::size_t>(order[static_cast<std::size_t>(m2)])];
          const Score s{std::max(st, rest.bottleneck), st + rest.total};
          if (s.better_than(best)) best = s, arg = {b, m2};
        }
      }
      V[static_cast<std::size_t>(a)][static_cast<std::size_t>(m)] = best;
      next[static_cast<std::size_t>(a)][static_cast<std::size_t>(m)] = arg;
    }
  }
  int first = -1;
  for (int m = 0; m < K; ++m) {
    if (V[0][static_cast<std::size_t>(m)].bottleneck == kInf) continue;
    if (first < 0 ||
        V[0][static_cast<std::size_t>(m)].better_than(V[0][static_cast<std::size_t>(first)]))
      first = m;
  }
  Distribution d;
  if (first < 0) return d;
  std::vector<int> stages;
  std::vector<std::pair<int, int>> ranges;
  for (int a = 0, m = first; a < U;) {
    const auto [b, m2] = next[static_cast<std::size_t>(a)][static_cast<std::size_t>(m)];
    stages.push_back(order[static_cast<std::size_t>(m)]);
    ranges.emplace_back(a, b);
    a = b;
    m = m2;
  }
  return evaluate_distribution(p, stages, ranges);
}

Distribution distribute(const DistributionProblem& p) {
  check_problem(p);
  const int D = p.devices();
  if (D <= 6) {
    std::vector<int> order(static_cast<std::size_t>(D));
    std::iota(order.begin(), order.end(), 0);
    Distribution best;
    do {
      best = better(std::move(best), distribute_in_order(p, order));
    } while (std::next_permutation(order.begin(), order.end()));
    return best;
  }
  std::vector<int> given(static_cast<std::size_t>(D));
  std::iota(given.begin(), given.end(), 0);
  return better(improve_by_swaps(p, by_speed(p)), improve_by_swaps(p, given));
}

Distribution distribute_in_order_brute_force(const DistributionProblem& p,
                                             const std::vector<int>& order) {
  check_problem(p);
  const Prefix pre(p);
  const int U = p.units, K = static_cast<int>(order.size());
  Distribution best;
  // cuts[0..K]: cuts[0] = 0, cuts[K] = U, non-decreasing; device order[m] takes [cuts[m],
  // cuts[m+1]).
  std::vector<int> cuts(static_cast<std::size_t>(K + 1), 0);
  cuts[static_cast<std::size_t>(K)] = U;
  const std::function<void(int)> rec = [&](int m) {
    if (m == K) {
      std::vector<int> stages;
      std::vector<std::pair<int, int>> ranges;
      for (int i = 0; i < K; ++i) {
        const int a = cuts[static_cast<std::size_t>(i)], b = cuts[static_cast<std::size_t>(i + 1)];
        if (a == b) continue;
        const int dev = order[static_cast<std::size_t>(i)];
        if (pre.range_bytes(a, b) > p.budget[static_cast<std::size_t>(dev)]) return;
        stages.push_back(dev);
        ranges.emplace_back(a, b);
      }
      best = better(std::move(best), evaluate_distribution(p, stages, ranges));
      return;
    }
    const int lo = cuts[static_cast<std::size_t>(m - 1)];
    for (int c = lo; c <= U; ++c) {
      cuts[static_cast<std::size_t>(m)] = c;
      rec(m + 1);
    }
  };
  rec(1);
  return best;
}

Distribution distribute_brute_force(const DistributionProblem& p) {
  std::vector<int> order(static_cast<std::size_t>(p.devices()));
  std::iota(order.begin(), order.end(), 0);
  Distribution best;
  do {
    best = better(std::move(best), distribute_in_order_brute_force(p, order));
  } while (std::next_permutation(order.begin(), order.end()));
  return best;
}

// ---------------------------------------------------------------- Algorithm 2

double flow_shop_makespan(int stages, const StageTime& t, const std::vector<int>& lengths) {
  HUDDLE_CHECK(stages >= 1);
  std::vector<double> finish(static_cast<std::size_t>(stages), 0.0);
  int a = 0;
  for (const int len : lengths) {
    HUDDLE_CHECK(len >= 1, "slices are at least one token");
    double prev = 0;  // stage i-1 finished (and sent) this slice
    for (int i = 0; i < stages; ++i) {
      auto& f = finish[static_cast<std::size_t>(i)];
      f = std::max(prev, f) + t(i, a, a + len);
      prev = f;
    }
    a += len;
  }
  return finish.back();
}

double slicing_bound(int stages, const StageTime& t, const std::vector<int>& lengths) {
  double sum = 0, worst = 0;
  int a = 0;
  for (const int len : lengths) {
    double c = 0;
    for (int i = 0; i < stages; ++i) c = std::max(c, t(i, a, a + len));
    sum += c;
    worst = std::max(worst, c);
    a += len;
  }
  return sum + (stages - 1) * worst;
}

namespace {

// Moves one boundary at a time by +-step while the makespan drops; keeps lengths >= 1.
void refine_boundaries(int stages, const StageTime& t, Slicing& s, int granule, int passes) {
  std::vector<int> steps = {granule};
  if (granule > 1) steps.push_back(1);
  std::vector<int> trial;
  for (int pass = 0; pass < passes; ++pass) {
    bool improved = false;
    for (const int step : steps) {
      for (std::size_t j = 0; j + 1 < s.lengths.size(); ++j) {
        for (const int delta : {step, -step}) {
          // Boundary after slice j moves by delta: slice j grows, slice j + 1 shrinks.
          const int a = s.lengths[j] + delta, b = s.lengths[j + 1] - delta;
          if (a < 1 || b < 1) continue;
          trial = s.lengths;
          trial[j] = a;
          trial[j + 1] = b;
          const double m = flow_shop_makespan(stages, t, trial);
          if (m < s.makespan) {
            s.lengths = trial;
            s.makespan = m;
            improved = true;
          }
        }
      }
    }
    if (!improved) break;
  }
}

}  // namespace

std::vector<Slicing> slice_all_lengths(int stages, int n, const StageTime& t,
                                       const SlicingOptions& options) {
  HUDDLE_CHECK(stages >= 1 && n >= 1 && options.granule >= 1 && options.max_caps >= 0);
  const int g = options.granule;
  // Slice starts: 0, g, 2g, ... below n (every token when g = 1).
  std::vector<int> starts;
  for (int a = 0; a < n; a += g) starts.push_back(a);
  const auto S = starts.size();
  // c[si][b] = max_i stage_time(i, starts[si], b) for b in (starts[si], n].
  std::vector<std::vector<double>> c(S, std::vector<double>(static_cast<std::size_t>(n) + 1, kInf));
  std::vector<double> caps;
  for (std::size_t si = 0; si < S; ++si) {
    for (int b = starts[si] + 1; b <= n; ++b) {
      double worst = 0;
      for (int i = 0; i < stages; ++i) worst = std::max(worst, t(i, starts[si], b));
      c[si][static_cast<std::size_t>(b)] = worst;
      // Caps from slices between boundaries (and ending anywhere when exact).
      if (g == 1 || b % g == 0 || b == n) caps.push_back(worst);
    }
  }
  std::sort(caps.begin(), caps.end());
  caps.erase(std::unique(caps.begin(), caps.end()), caps.end());
  if (options.max_caps > 0 && caps.size() > static_cast<std::size_t>(options.max_caps)) {
    // Quantiles of the distinct values (the largest always kept).
    std::vector<double> thin;
    const auto k = static_cast<std::size_t>(options.max_caps);
    for (std::size_t q = 1; q <= k; ++q) thin.push_back(caps[(q * caps.size()) / k - 1]);
    thin.erase(std::unique(thin.begin(), thin.end()), thin.end());
    caps = std::move(thin);
  }

  const double N1 = stages - 1;
  std::vector<Slicing> best(static_cast<std::size_t>(n));
  for (int p = 1; p <= n; ++p) {
    // The single slice: always a candidate.
    Slicing& b = best[static_cast<std::size_t>(p - 1)];
    b.lengths = {p};
    b.bound = stages * c[0][static_cast<std::size_t>(p)];
    b.min_bound = b.bound;
    b.makespan = flow_shop_makespan(stages, t, b.lengths);
  }
  std::vector<double> dp(static_cast<std::size_t>(n) + 1);
  std::vector<int> parent(static_cast<std::size_t>(n) + 1);
  std::vector<double> slice_worst(static_cast<std::size_t>(n) + 1);
  std::vector<int> lengths;
  for (const double cap : caps) {
    std::fill(dp.begin(), dp.end(), kInf);
    dp[0] = 0;
    slice_worst[0] = 0;
    for (int p = 1; p <= n; ++p) {
      double v = kInf;
      int arg = -1;
      for (std::size_t si = 0; si < S && starts[si] < p; ++si) {
        const double cost = c[si][static_cast<std::size_t>(p)];
        const double before = dp[static_cast<std::size_t>(starts[si])];
        if (cost > cap || before == kInf) continue;
        if (before + cost < v) v = before + cost, arg = starts[si];
      }
      dp[static_cast<std::size_t>(p)] = v;
      parent[static_cast<std::size_t>(p)] = arg;
      if (arg < 0) continue;
      const double own = c[static_cast<std::size_t>(arg / g)][static_cast<std::size_t>(p)];
      slice_worst[static_cast<std::size_t>(p)] =
          std::max(slice_worst[static_cast<std::size_t>(arg)], own);
      Slicing& b = best[static_cast<std::size_t>(p - 1)];
      // F of this slicing (its true maximum may be below the cap).
      const double bound = v + N1 * slice_worst[static_cast<std::size_t>(p)];
      b.min_bound = std::min(b.min_bound, bound);
      if (arg == 0) continue;  // the single slice, already a candidate
      lengths.clear();
      for (int q = p; q > 0; q = parent[static_cast<std::size_t>(q)])
        lengths.push_back(q - parent[static_cast<std::size_t>(q)]);
      std::reverse(lengths.begin(), lengths.end());
      const double makespan = flow_shop_makespan(stages, t, lengths);
      if (makespan < b.makespan || (makespan == b.makespan && bound < b.bound)) {
        b.lengths = lengths;
        b.bound = bound;
        b.makespan = makespan;
      }
    }
  }
  if (options.refine) {
    for (int p = 1; p <= n; ++p) {
      Slicing& b = best[static_cast<std::size_t>(p - 1)];
      for (int k = 2; k <= std::min(p, options.max_equal); ++k) {
        const std::vector<std::int64_t> equal = equal_slices(p, k);
        lengths.assign(equal.begin(), equal.end());
        const double makespan = flow_shop_makespan(stages, t, lengths);
        if (makespan < b.makespan) b.lengths = lengths, b.makespan = makespan;
      }
      refine_boundaries(stages, t, b, g, options.refine_passes);
      b.bound = slicing_bound(stages, t, b.lengths);
    }
  }
  return best;
}

BruteForceSlicing slice_brute_force(int stages, int n, const StageTime& t) {
  HUDDLE_CHECK(stages >= 1 && n >= 1 && n <= 24);
  BruteForceSlicing r{kInf, kInf};
  std::vector<int> lengths;
  for (std::uint32_t mask = 0; mask < (1u << (n - 1)); ++mask) {
    // Bit k set: a boundary after token k + 1.
    lengths.clear();
    int last = 0;
    for (int k = 0; k < n - 1; ++k) {
      if (mask & (1u << k)) {
        lengths.push_back(k + 1 - last);
        last = k + 1;
      }
    }
    lengths.push_back(n - last);
    r.min_bound = std::min(r.min_bound, slicing_bound(stages, t, lengths));
    r.min_makespan = std::min(r.min_makespan, flow_shop_makespan(stages, t, lengths));
  }
  return r;
}

}  // namespace huddle::hpipe
