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

// A timed linear of more than one row: 2·R·K·N multiply-add FLOPs over a [K, N] weight (whose
// "weight FLOPs" are 2·K·N, as a one-row linear of it does).
struct LinearSample {
  double flops = 0;         // > 0
  double weight_flops = 0;  // > 0
  double seconds = 0;       // > 0
};

// The two curves of a multi-row linear, time = gemm.seconds(flops) + weights.seconds(weight_flops):
// what the multiply-adds take, and what each call spends on its weights (a GEMM fetches and packs
// them; on this project's CPUs that costs 1.5-3x a GEMV's pass over them, so the GEMV curve does
// not stand in well).
struct LinearCurves {
  OpCurve gemm, weights;  // weights.overhead_s is 0: the per-call overhead is gemm's
};

// Weighted least squares on relative error (weights 1/seconds², as fit_curve) of
// t = overhead + flops·b + weight_flops·c with overhead >= 0, b > 0 and c > 0. The samples must
// vary R for a weight shape to tell b from c. Where the free optimum breaks a bound the term is
// dropped (overhead 0), and where b or c would still not be positive, `fallback_weights` (the
// GEMV curve) is taken as the weights' cost and the GEMM curve fitted to what is left, as
// fit_curve would.
LinearCurves fit_linear_curves(const std::vector<LinearSample>& samples,
                               const OpCurve& fallback_weights);

}  // namespace huddle::profile
