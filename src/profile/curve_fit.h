// Fitting an op's cost curve, time = overhead + flops / throughput, to timed samples.
#pragma once

#include "planner/cluster.h"

#include <vector>

namespace huddle::profile {

struct Sample {
  double flops = 0;    // > 0
  double seconds = 0;  // > 0
};

// Weighted least squares on relative error (each sample weighs 1/seconds², so a small op counts as
// much as a large one): minimises Σ ((overhead + flops·b − t) / t)² with overhead >= 0 and b > 0.
// When the unconstrained optimum has a negative overhead, the fit goes through the origin.
// Needs at least one sample; with a single sample the overhead is 0.
OpCurve fit_curve(const std::vector<Sample>& samples);

// |predicted − measured| / measured of `curve` for each of `samples`, in order.
std::vector<double> relative_errors(const OpCurve& curve, const std::vector<Sample>& samples);

// Median of relative_errors (0 without samples).
double median_relative_error(const OpCurve& curve, const std::vector<Sample>& samples);

}  // namespace huddle::profile
