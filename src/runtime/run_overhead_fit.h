// The costs a profiling run pays beyond its ops' and transfers' own times, fitted to the runs'
// gaps (measured wall time less that prediction): the executor's own time per op on each device
// (dispatch, allocation, the glue between ops) and each remote device's fixed cost per run (the
// session's messages, the worker's wake-up, the output's return), paid once by a run that places
// any op on it.
#pragma once

#include "planner/dcg.h"

#include <cstddef>
#include <span>
#include <vector>

namespace huddle::assign {

// x >= 0 minimising |A x - b|^2 for a small system, A given by rows (rows[r][c]; every row as
// long). Active set: a column whose value would be negative is pinned to 0 and the rest refit.
// A column that is all zero, or that earlier columns already span (it cannot be told apart from
// them), gets 0.
std::vector<double> nonneg_least_squares(const std::vector<std::vector<double>>& rows,
                                         std::span<const double> b);

// The executor's own time per op on each device, in seconds: ops_on[r][d] ops of run r ran on
// device d, and run r measured gaps[r] seconds beyond its ops and transfers. Least squares over
// the runs with every cost >= 0 (a device whose cost would be negative gets 0 and the others are
// refitted); a device no run used, or one the runs cannot tell apart from another, gets 0.
std::vector<double> fit_op_overheads(const std::vector<std::vector<double>>& ops_on,
                                     std::span<const double> gaps);

// ops_on[r][d]: how many ops run r places on device d, for `devices` devices
// (`provider_device`: the device of each provider).
std::vector<std::vector<double>> ops_per_device(const std::vector<Assignment>& runs,
                                                const std::vector<int>& provider_device,
                                                std::size_t devices);

// By device: whether its fixed cost can be told from the constant every run pays — some run
// places an op on it and some does not (d >= 1; device 0 is the primary: false).
std::vector<bool> fixed_cost_identifiable(const std::vector<std::vector<double>>& ops_on);

struct RunOverheads {
  std::vector<double> per_op;    // by device: seconds per op placed on it
  std::vector<double> fixed;     // by device: seconds per run that places any op on it (0: d = 0)
  std::vector<bool> identified;  // fixed_cost_identifiable(ops_on)
};

// fit_op_overheads with one more column per remote device d >= 1: 1 where run r places an op on
// d (ops_on[r][d] > 0), else 0; every cost >= 0. The per-op columns of a run sum to its op count,
// the same for every run, so they also carry the constant every run pays (device 0's process,
// the session): the fixed cost of a device is what runs using it pay beyond that, and it is
// identified only where some run avoids the device. A device every run (or no run) uses gets
// fixed cost 0 and `identified` false: its cost stays in the constant, which every plan pays.
RunOverheads fit_run_overheads(const std::vector<std::vector<double>>& ops_on,
                               std::span<const double> gaps);

}  // namespace huddle::assign
