// What the planners' GLPK models share: an owned problem, and the time unit they solve in.
#pragma once

#include <glpk.h>

#include <memory>

namespace huddle {

struct GlpkProblemDeleter {
  void operator()(glp_prob* p) const { glp_delete_prob(p); }
};
using GlpkProblem = std::unique_ptr<glp_prob, GlpkProblemDeleter>;

// Times enter GLPK in milliseconds (seconds x kMs), so coefficients stay within a few orders of
// magnitude of 1: GLPK's tolerances are absolute.
inline constexpr double kMs = 1e3;

}  // namespace huddle
