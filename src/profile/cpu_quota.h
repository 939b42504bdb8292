// CPU quota probe: how many cores' worth of CPU time this process's cgroup may use.
//
// A device under a CFS quota (a container's CPU limit, the testbed's emulated slow devices) runs
// in bursts: it computes at full speed until the period's quota is spent, then stops until the
// next period. Timing its ops then says little about its speed (a stop falls wherever the quota
// runs out, often in a collective's wait), while the quota itself says how much of the device
// is left. The online estimator (planner/online_estimator.h) uses it.
#pragma once

#include <optional>
#include <string>

namespace huddle::profile {

// The quota of this process's cgroup in cores (cgroup v1 cpu.cfs_quota_us / cpu.cfs_period_us,
// or v2 cpu.max); nullopt when there is none or it cannot be read.
std::optional<double> cpu_quota_cores();

// The share of `threads` threads' CPU time the quota allows: min(1, quota / threads), 1 without
// a quota (or none readable).
double cpu_quota_share(int threads);

// Parsing helpers, exposed for tests: a v1 quota and period (quota -1: none), and a v2 cpu.max
// text ("max 100000": none; "25000 100000": a quarter core).
std::optional<double> cfs_quota_cores(const std::string& quota_us, const std::string& period_us);
std::optional<double> cpu_max_cores(const std::string& cpu_max);

}  // namespace huddle::profile
