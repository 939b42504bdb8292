// Small random assignment problems and brute force over every assignment, for the DCG, profiling
// path and DP tests.
#pragma once

#include "planner/assignment_dp.h"
#include "planner/dcg.h"

#include <fmt/format.h>

#include <functional>
#include <random>

namespace huddle::assign::testing {

struct RandomShape {
  int ops = 6;
  int providers = 2;
  bool chain = true;         // each op reads only the op before it
  double incapable = 0.25;   // chance a provider cannot run an op (never all of them)
  int sizes = 2;             // distinct tensor sizes
  bool remote_last = false;  // the last provider is on device 1 (its outputs cost to the end)
};

inline AssignProblem random_problem(const RandomShape& s, std::mt19937& rng) {
  AssignProblem p;
  std::uniform_real_distribution<double> u(0, 1);
  for (int pr = 0; pr < s.providers; ++pr) {
    p.provider_device.push_back(s.remote_last && pr == s.providers - 1 ? 1 : 0);
  }
  for (int op = 0; op < s.ops; ++op) {
    p.op_names.push_back(fmt::format("op{}", op));
    std::vector<bool> row;
    for (int pr = 0; pr < s.providers; ++pr) row.push_back(u(rng) >= s.incapable);
    row[static_cast<std::size_t>(std::uniform_int_distribution<int>(0, s.providers - 1)(rng))] =
        true;
    p.capable.push_back(row);
  }
  auto size = [&] {
    return 1024 * std::int64_t{1 + std::uniform_int_distribution<int>(0, s.sizes - 1)(rng)};
  };
  for (int op = 1; op < s.ops; ++op) {
    p.edges.push_back({op - 1, op, DType::F32, size(), fmt::format("t{}", op - 1)});
    // Joins: sometimes also read an earlier op (a residual), sometimes not the previous one.
    if (!s.chain && op >= 2 && u(rng) < 0.5) {
      const int from = std::uniform_int_distribution<int>(0, op - 2)(rng);
      p.edges.push_back({from, op, DType::F32, size(), fmt::format("t{}", from)});
      if (u(rng) < 0.3) p.edges.erase(p.edges.end() - 2);  // a branch: op skips op - 1
    }
  }
  p.edges.push_back({s.ops - 1, kEnd, DType::F32, size(), "out"});
  return p;
}

inline Costs random_costs(const Dcg& dcg, std::mt19937& rng) {
  std::uniform_real_distribution<double> u(0.1, 10.0);
  Costs c;
  for (const DcgNode& n : dcg.nodes()) c.node.push_back(n.op < 0 ? 0.0 : u(rng));
  for (int i = 0; i < dcg.num_da(); ++i) c.da.push_back(u(rng) * 0.5);
  return c;
}

// Calls fn for every assignment of capable providers.
inline void for_each_assignment(const Dcg& dcg, const std::function<void(const Assignment&)>& fn) {
  const AssignProblem& p = dcg.problem();
  Assignment a(static_cast<std::size_t>(p.num_ops()), 0);
  std::function<void(int)> rec = [&](int op) {
    if (op == p.num_ops()) {
      fn(a);
      return;
    }
    for (int pr = 0; pr < p.num_providers(); ++pr) {
      if (dcg.node(op, pr) < 0) continue;
      a[static_cast<std::size_t>(op)] = pr;
      rec(op + 1);
    }
  };
  rec(0);
}

}  // namespace huddle::assign::testing
