// HPipe's two dynamic programmes over abstract costs (papers/hpipe-pipeline-sequence-slicing,
// Algorithms 1 and 2), each with a brute-force twin that the tests compare it with. No model or
// cluster types here: hpipe_planner.h builds the costs from the cost model.
//
// Algorithm 1, workload distribution. U units (0..U-1, a model's layer-level pieces in order)
// are cut into contiguous stages, one per device, in a device order. Stage time = compute of its
// units on its device + the transfer of the activation to the next stage's device (the last
// stage: tail_s of its device, e.g. the logits to the primary). Minimised: the bottleneck, the
// largest stage time (exact); ties broken by the smallest sum of stage times (one slice's
// latency), so that a device whose stage would not lower the bottleneck is left out rather than
// adding a transfer (the tie-break is greedy inside the DP: not guaranteed the least sum). A device
// may take no units (it is then skipped: the transfer goes from the previous non-empty stage to the
// next). A device may take a range only when the range's bytes fit its budget.
//   The paper's recurrence A[b][m] = min_k max(A[k][m-1], T(k+1, b, m)) runs here from the end
// of the model (V[a][m] = units [a, U) on devices m.. of the order, m taking [a, b) non-empty),
// because a stage's outgoing transfer depends on the device of the next non-empty stage, which a
// suffix knows. O(U^2 D^2) per order.
//   The order: the paper fixes it; here every permutation is tried up to 6 devices (720 DPs), and
// beyond, the devices sorted by speed (total compute, fastest first) and the given order, each
// improved by swapping pairs while that lowers the objective.
//
// Algorithm 2, sequence slicing. N pipeline stages; c(a, b) = max over stages of
// stage_time(i, a, b), the time of the slowest stage on prompt tokens [a, b) (it grows with a:
// attention reads the KV cache of the tokens before). A slicing 0 = p0 < p1 < ... < pM = n is
// scored by F = sum_j c(slice j) + (N - 1) * max_j c(slice j), an upper bound of the pipeline's
// makespan. (The form, max_i sum_j t_ij + (N-1) t_m, is not a DP over slices; F bounds
// it from above.) For each candidate cap t (a distinct c(a, b)), dp[p] = min_a dp[a] + c(a, p)
// over c(a, p) <= t gives the best sum under that cap for EVERY prefix length p at once, so one
// pass per cap serves the whole prepare phase (all prompt lengths up to the context).
//   Exact: every boundary, every distinct c(a, b) as a cap. O(n^4); meant for n up to ~64.
//   Approximate (SlicingOptions, for long contexts): boundaries only on multiples of `granule`
//   (plus p itself as the last boundary of a prefix of length p), and the caps thinned to at most
//   `max_caps` quantiles of the distinct c(a, b) values between boundaries (the single slice is
//   a candidate for every p whatever the caps). The result is then a slicing within the
//   constraint but not necessarily F's optimum.
//   Among the per-cap optimal slicings of each p (and the single slice), the one with the
//   smallest simulated makespan (flow_shop_makespan) is chosen; SlicingOptions::refine adds
//   equal slicings and a local search on the simulated makespan.
//
// Flow-shop simulation: stage i starts slice j when it has finished slice j-1 and stage i-1 has
// finished slice j (including sending it): finish[i][j] = max(finish[i-1][j], finish[i][j-1]) +
// t_ij, with t_ij = stage_time(i, slice j), which includes the stage's outgoing transfer (the
// sender is busy while it sends, as in the paper's t_ij = t_c + t_t).
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

namespace huddle::hpipe {

// ---------------------------------------------------------------- Algorithm 1

struct DistributionProblem {
  int units = 0;                                // U >= 1
  std::vector<std::vector<double>> unit_s;      // [D][U] compute seconds of unit u on device d
  std::vector<std::vector<double>> transfer_s;  // [D][D] activation cut from a to b (a != b)
  std::vector<double> tail_s;                   // [D] after the last stage on d (0: nothing)
  std::vector<std::int64_t> unit_bytes;         // [U] memory of each unit
  std::vector<std::int64_t> budget;             // [D] memory each device gives
  int devices() const { return static_cast<int>(unit_s.size()); }
};

struct Distribution {
  bool feasible = false;                    // false: no assignment fits in memory
  std::vector<int> order;                   // devices of the non-empty stages, in pipeline order
  std::vector<std::pair<int, int>> ranges;  // [begin, end) per stage, covering 0..U
  std::vector<double> stage_s;              // compute + outgoing transfer per stage
  double bottleneck = 0;                    // max of stage_s
  double total = 0;                         // sum of stage_s
};

// Stage times of a given assignment (stages in pipeline order, ranges covering 0..U); the
// memory budget is not checked.
Distribution evaluate_distribution(const DistributionProblem& p, const std::vector<int>& order,
                                   const std::vector<std::pair<int, int>>& ranges);

// The DP over one device order (a permutation or a subset of 0..D-1; devices may be left empty).
Distribution distribute_in_order(const DistributionProblem& p, const std::vector<int>& order);

// The DP over the device orders described above.
Distribution distribute(const DistributionProblem& p);

// Brute force: every permutation, every split into contiguous (possibly empty) ranges. Small
// instances only (tests).
Distribution distribute_brute_force(const DistributionProblem& p);
Distribution distribute_in_order_brute_force(const DistributionProblem& p,
                                             const std::vector<int>& order);

// ---------------------------------------------------------------- Algorithm 2

// stage_time(i, a, b): seconds stage i takes on tokens [a, b), 0 <= a < b <= n.
using StageTime = std::function<double(int stage, int a, int b)>;

struct SlicingOptions {
  int granule = 1;   // slice boundaries on multiples of this (1: every token)
  int max_caps = 0;  // candidate caps kept (0: all distinct values, exact)
  // Beyond the paper: F over-charges the pipeline's fill and drain when the stages differ (it
  // takes (N-1) times the slowest slice), so its optimum is not always the fastest slicing. With
  // `refine`, the equal-length slicings (k = 2..max_equal slices) are candidates too, and the
  // best candidate's boundaries are then moved one at a time by +-granule (and +-1 token when
  // granule > 1) while the simulated makespan drops (at most `refine_passes` sweeps).
  bool refine = false;
  int max_equal = 64;
  int refine_passes = 3;
};

struct Slicing {
  std::vector<int> lengths;  // slice lengths, summing to the prompt length
  double bound = 0;          // F of this slicing
  double makespan = 0;       // flow_shop_makespan of this slicing
  double min_bound = 0;      // the least F found over all slicings searched (exact: the optimum)
};

// The flow-shop makespan of slicing `lengths` over `stages` stages.
double flow_shop_makespan(int stages, const StageTime& t, const std::vector<int>& lengths);
// F of slicing `lengths`.
double slicing_bound(int stages, const StageTime& t, const std::vector<int>& lengths);

// The chosen slicing for every prompt length p = 1..n (result[p-1]). With default options exact:
// for every p the minimum F is found, and among the per-cap optima the smallest makespan kept.
std::vector<Slicing> slice_all_lengths(int stages, int n, const StageTime& t,
                                       const SlicingOptions& options = {});

// Brute force over all 2^(n-1) slicings (n <= ~20): the minimum F and the minimum makespan.
struct BruteForceSlicing {
  double min_bound = 0;
  double min_makespan = 0;
};
BruteForceSlicing slice_brute_force(int stages, int n, const StageTime& t);

}  // namespace huddle::hpipe
