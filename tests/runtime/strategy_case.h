// A model run under a strategy with device shares: the parameter of the in-process strategy
// tests (distributed_test, arch_distributed_test), and its test name.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

namespace huddle::testing {

struct StrategyCase {
  std::string model;
  std::string strategy;  // a make_plan strategy (arch_distributed_test: or "tiled-2d", a 2x2 grid)
  std::vector<double> shares;
};

// "gpt2_tiny_galaxy_3_1": model, strategy and shares, '-' as '_'.
inline std::string case_name(const StrategyCase& c) {
  std::string name = c.model + "_" + c.strategy;
  for (double s : c.shares) {
    name += '_';
    name += std::to_string(static_cast<int>(s));
  }
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

}  // namespace huddle::testing
